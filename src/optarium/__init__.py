"""optarium: optimization methods of 51 ICML 2026 papers, PyTorch first, each reproducing its paper's claim.

``import optarium`` is cheap: it imports no family, no torch and no optional back-end. Subpackages load on
first attribute access (``optarium.bo``), so heavy optional libraries are only imported by the code that
needs them. The lazy subpackages are found at run time, not listed by hand: every package under
``optarium/``, that is each registry family (``optarium._core.registry.FAMILIES``) that has a package so
far and the shared packages (``_core``, ``problems``, ``testing``, ``experiments``, ``harness`` and the
public numerics such as ``ot``). ``dir(optarium)`` lists them.

>>> import optarium
>>> "optim" in dir(optarium) and "harness" in dir(optarium)
True
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache
from typing import Any

__version__ = "0.1.0"


@lru_cache(maxsize=1)
def _lazy_submodules() -> tuple[str, ...]:
    """The names of the packages under ``optarium/``, sorted (a directory listing; imports nothing)."""
    return tuple(sorted(m.name for m in pkgutil.iter_modules(__path__) if m.ispkg))


def __getattr__(name: str) -> Any:
    if not name.startswith("__") and name in _lazy_submodules():
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({"__version__", *globals(), *_lazy_submodules()})


def _public() -> list[str]:
    return ["__version__", *[m for m in _lazy_submodules() if not m.startswith("_")]]


__all__ = _public()
