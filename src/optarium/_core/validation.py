"""Argument validation with uniform messages, used by every constructor in optarium.

Every check raises ``ValueError`` (or ``TypeError`` for a wrong type) whose message starts with the argument's
name: ``"lr: must be > 0, got -1.0"``. Checks return the validated value, converted where stated, so a
constructor can write ``self.lr = check_positive("lr", lr)``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = [
    "check_betas",
    "check_choice",
    "check_finite",
    "check_in_range",
    "check_int",
    "check_nonnegative",
    "check_positive",
    "check_probability",
    "check_type",
]


def _as_real(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name}: must be a real number, got {type(value).__name__} {value!r}")
    return float(value)


def check_finite(name: str, value: Any) -> float:
    """``value`` as a float; ``ValueError`` if NaN or infinite."""
    x = _as_real(name, value)
    if not math.isfinite(x):
        raise ValueError(f"{name}: must be finite, got {x!r}")
    return x


def check_positive(name: str, value: Any, *, allow_inf: bool = False) -> float:
    """``value`` as a float > 0 (finite unless ``allow_inf``)."""
    x = _as_real(name, value)
    if math.isnan(x) or x <= 0 or (math.isinf(x) and not allow_inf):
        bound = "> 0" if allow_inf else "finite and > 0"
        raise ValueError(f"{name}: must be {bound}, got {x!r}")
    return x


def check_nonnegative(name: str, value: Any) -> float:
    """``value`` as a finite float >= 0."""
    x = _as_real(name, value)
    if not math.isfinite(x) or x < 0:
        raise ValueError(f"{name}: must be finite and >= 0, got {x!r}")
    return x


def check_in_range(
    name: str,
    value: Any,
    low: float,
    high: float,
    *,
    low_inclusive: bool = True,
    high_inclusive: bool = True,
) -> float:
    """``value`` as a float in the interval from ``low`` to ``high`` (bracket types as given)."""
    x = _as_real(name, value)
    ok_low = x >= low if low_inclusive else x > low
    ok_high = x <= high if high_inclusive else x < high
    if math.isnan(x) or not (ok_low and ok_high):
        lb = "[" if low_inclusive else "("
        hb = "]" if high_inclusive else ")"
        raise ValueError(f"{name}: must be in {lb}{low}, {high}{hb}, got {x!r}")
    return x


def check_probability(name: str, value: Any) -> float:
    """``value`` as a float in [0, 1]."""
    return check_in_range(name, value, 0.0, 1.0)


def check_int(name: str, value: Any, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """``value`` as an int (bools rejected) within the optional bounds."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name}: must be an integer, got {type(value).__name__} {value!r}")
    n = int(value)
    if minimum is not None and n < minimum:
        raise ValueError(f"{name}: must be >= {minimum}, got {n}")
    if maximum is not None and n > maximum:
        raise ValueError(f"{name}: must be <= {maximum}, got {n}")
    return n


def check_choice(name: str, value: Any, choices: Iterable[Any]) -> Any:
    """``value`` if it is one of ``choices``."""
    options = tuple(choices)
    if value not in options:
        listed = ", ".join(repr(c) for c in options)
        raise ValueError(f"{name}: must be one of {listed}, got {value!r}")
    return value


def check_type(name: str, value: Any, types: type | tuple[type, ...]) -> Any:
    """``value`` if it is an instance of ``types``; ``TypeError`` naming the argument otherwise."""
    if not isinstance(value, types):
        wanted = types.__name__ if isinstance(types, type) else " or ".join(t.__name__ for t in types)
        raise TypeError(f"{name}: must be {wanted}, got {type(value).__name__}")
    return value


def check_betas(name: str, value: Any) -> tuple[float, float]:
    """A pair of momentum coefficients, each in [0, 1)."""
    if not isinstance(value, Sequence) or isinstance(value, str) or len(value) != 2:
        raise ValueError(f"{name}: must be a pair (beta1, beta2), got {value!r}")
    b1 = check_in_range(f"{name}[0]", value[0], 0.0, 1.0, high_inclusive=False)
    b2 = check_in_range(f"{name}[1]", value[1], 0.0, 1.0, high_inclusive=False)
    return b1, b2
