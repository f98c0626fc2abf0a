"""Argument validation: uniform messages that start with the argument's name."""

from __future__ import annotations

import math

import pytest

from optarium._core.validation import (
    check_betas,
    check_choice,
    check_finite,
    check_in_range,
    check_int,
    check_nonnegative,
    check_positive,
    check_probability,
    check_type,
)


def test_valid_values_pass_through_converted() -> None:
    assert check_positive("lr", 1) == 1.0 and isinstance(check_positive("lr", 1), float)
    assert check_positive("tau", math.inf, allow_inf=True) == math.inf
    assert check_nonnegative("wd", 0) == 0.0
    assert check_in_range("beta", 0.5, 0, 1, high_inclusive=False) == 0.5
    assert check_probability("q", 1.0) == 1.0
    assert check_int("n", 3, minimum=1) == 3
    assert check_choice("mode", "hard", ("hard", "soft")) == "hard"
    assert check_betas("betas", [0.9, 0.99]) == (0.9, 0.99)
    assert check_finite("x", -2.5) == -2.5


@pytest.mark.parametrize(
    ("call", "exc", "pattern"),
    [
        (lambda: check_positive("lr", 0.0), ValueError, r"^lr: must be finite and > 0, got 0.0$"),
        (lambda: check_positive("lr", math.nan), ValueError, r"^lr:"),
        (lambda: check_positive("lr", math.inf), ValueError, r"^lr:"),
        (lambda: check_positive("lr", "0.1"), TypeError, r"^lr: must be a real number"),
        (lambda: check_positive("lr", True), TypeError, r"^lr:"),
        (lambda: check_nonnegative("wd", -1e-9), ValueError, r"^wd:"),
        (
            lambda: check_in_range("b", 1.0, 0, 1, high_inclusive=False),
            ValueError,
            r"^b: must be in \[0, 1\)",
        ),
        (lambda: check_in_range("b", 0.0, 0, 1, low_inclusive=False), ValueError, r"^b: must be in \(0, 1\]"),
        (lambda: check_probability("q", 1.5), ValueError, r"^q:"),
        (lambda: check_int("n", 0, minimum=1), ValueError, r"^n: must be >= 1, got 0$"),
        (lambda: check_int("n", 5, maximum=4), ValueError, r"^n: must be <= 4"),
        (lambda: check_int("n", 2.0), TypeError, r"^n: must be an integer"),
        (
            lambda: check_choice("mode", "x", ("a", "b")),
            ValueError,
            r"^mode: must be one of 'a', 'b', got 'x'$",
        ),
        (lambda: check_type("base", 3, str), TypeError, r"^base: must be str, got int$"),
        (lambda: check_betas("betas", (0.9,)), ValueError, r"^betas:"),
        (lambda: check_betas("betas", (0.9, 1.0)), ValueError, r"^betas\[1\]:"),
        (lambda: check_finite("x", math.inf), ValueError, r"^x: must be finite"),
    ],
)
def test_invalid_values_raise_naming_the_argument(call: object, exc: type[Exception], pattern: str) -> None:
    with pytest.raises(exc, match=pattern):
        call()  # type: ignore[operator]
