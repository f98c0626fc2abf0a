"""The one on-disk cache folder of optarium (trained test networks, pretrained models, dequantised weights).

``$OPTARIUM_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/optarium``, else ``~/.cache/optarium``. Everything in
it is derived data that optarium can rebuild (by training or converting on the spot), never a download;
deleting the folder only costs time.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_root"]


def cache_root(*parts: str) -> Path:
    """The cache folder, or a sub-folder of it (``cache_root("alpha-pfn")``); not created here."""
    root = os.environ.get("OPTARIUM_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "optarium"
    )
    return Path(root, *parts)
