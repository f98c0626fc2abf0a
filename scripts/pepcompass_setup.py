"""Rebuild the pepcompass experiment's cached networks (VAE + assay / predictor oracles).

Usage: ``OMP_NUM_THREADS=1 python scripts/pepcompass_setup.py [OUT_DIR]`` (default: the package data folder
``src/optarium/experiments/data/pepcompass``). Deterministic (seed 0); about one CPU-minute. See
:mod:`optarium.experiments.pepcompass_data` for the recipe.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from optarium.experiments.pepcompass_data import build_artifacts

if __name__ == "__main__":
    default = Path(__file__).resolve().parents[1] / "src" / "optarium" / "experiments" / "data" / "pepcompass"
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else default
    print(json.dumps(build_artifacts(out), indent=1))
