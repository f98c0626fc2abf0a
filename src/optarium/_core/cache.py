"""The one on-disk cache folder of optarium (trained test networks, pretrained models, dequantised weights).

``$OPTARIUM_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/optarium``, else ``~/.cache/optarium``. Everything in
it is derived data that optarium can rebuild (by training or converting on the spot), never a download;
deleting the folder only costs time.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["cache_root", "load_cached", "store_cached"]

T = TypeVar("T")


def cache_root(*parts: str) -> Path:
    """The cache folder, or a sub-folder of it (``cache_root("alpha-pfn")``); not created here."""
    root = os.environ.get("OPTARIUM_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "optarium"
    )
    return Path(root, *parts)


def load_cached(
    path: Path, load: Callable[[Path], T], errors: tuple[type[BaseException], ...] = ()
) -> T | None:
    """``load(path)`` if ``path`` exists, else ``None``. A file that fails to load with ``OSError``,
    ``ValueError`` or one of ``errors`` is damaged: a ``RuntimeWarning`` names it and ``None`` is returned, so
    the caller recomputes and overwrites it."""
    if not path.exists():
        return None
    try:
        return load(path)
    except (OSError, ValueError, *errors) as err:
        warnings.warn(f"cache: {path} is damaged ({err!r}); recomputing it", RuntimeWarning, stacklevel=2)
        return None


def store_cached(path: Path, save: Callable[[Path], Any], suffix: str = "") -> bool:
    """Write ``path`` atomically: ``save(tmp)`` on a temporary file of this process (``suffix`` appended, for
    writers that insist on an extension), then ``os.replace``. Returns ``False`` with a ``RuntimeWarning``
    when the cache folder is not writable (the caller keeps its in-memory result: only time is lost)."""
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}{suffix}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        save(tmp)
        os.replace(tmp, path)
        return True
    except OSError as err:
        with contextlib.suppress(OSError):  # the temporary file may not exist, or its folder not be one
            tmp.unlink(missing_ok=True)
        warnings.warn(f"cache: could not write {path} ({err!r}); not cached", RuntimeWarning, stacklevel=2)
        return False
