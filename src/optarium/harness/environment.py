"""The environment a run was made in: versions, CPU, threads, git revision; and the code fingerprint."""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import sys
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["code_fingerprint", "collect_environment"]

_PACKAGES = ("optarium", "torch", "numpy", "scipy", "matplotlib")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=5, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def collect_environment() -> dict[str, Any]:
    """Versions of Python and the key packages, platform, CPU, thread counts and the git revision."""
    import torch

    versions = {}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    src = Path(__file__).resolve().parents[1]
    revision = _git(["rev-parse", "HEAD"], src)
    dirty = _git(["status", "--porcelain", "--untracked-files=no"], src)
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "cuda": torch.cuda.is_available(),
        "versions": versions,
        "git_revision": revision or "unknown",
        "git_dirty": bool(dirty) if dirty is not None else None,
    }


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """A hash of every ``.py`` file of the installed optarium package, the Python version (the stdlib corpus
    depends on it) and the versions of torch, NumPy and SciPy.

    Two runs with the same fingerprint and configuration ran the same code, so stored records can be reused.
    """
    import numpy
    import scipy
    import torch

    root = Path(__file__).resolve().parents[1]
    h = hashlib.blake2b(digest_size=16)
    for version in (sys.version, torch.__version__, numpy.__version__, scipy.__version__):
        h.update(version.encode())
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()
