"""Unit functions that misbehave on purpose, for testing the runner's crash isolation.

They live in the package (not in ``tests/``) because the runner's worker processes are spawned and must be
able to import them by name.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["die_on_seed_one"]


def die_on_seed_one(
    slug: str, scale: str, config: Any, method: str, seed: int, *, threads: int | None = 1
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Kill the worker process outright (``os._exit``) for seed 1; report a finished unit otherwise."""
    if seed == 1:
        os._exit(3)
    unit = {"method": method, "seed": seed, "status": "done", "seconds": 0.0, "wall_seconds": 0.0,
            "n_records": 1, "error": None, "attempt": f"a{seed}"}  # fmt: skip
    return unit, [{"method": method, "seed": seed, "step": 1, "loss": float(seed), "status": "done",
                   "attempt": f"a{seed}"}]  # fmt: skip
