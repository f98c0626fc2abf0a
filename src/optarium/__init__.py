"""optarium: optimization methods of 51 ICML 2026 papers, PyTorch first, each reproducing its paper's claim.

``import optarium`` is cheap: families load on first attribute access (``optarium.optim``), so heavy optional
libraries are only imported by the code that needs them.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_SUBMODULES = (
    "_core",
    "optim",
    "problems",
    "testing",
    "experiments",
    "harness",
)

__all__ = ["__version__", *[m for m in _SUBMODULES if not m.startswith("_")]]


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"optarium.{name}")
    raise AttributeError(f"module 'optarium' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
