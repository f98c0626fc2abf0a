"""Timing: a stopwatch that can be paused, so reported training time excludes evaluation."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["Stopwatch"]


class Stopwatch:
    """Accumulates wall-clock seconds (``time.perf_counter``) while running.

    >>> sw = Stopwatch().start()
    >>> with sw.paused():      # evaluation does not count
    ...     pass
    >>> sw.elapsed >= 0
    True
    """

    def __init__(self) -> None:
        self._total = 0.0
        self._since: float | None = None

    def start(self) -> Stopwatch:
        """Start (or resume) counting; returns ``self``."""
        if self._since is None:
            self._since = time.perf_counter()
        return self

    def stop(self) -> float:
        """Stop counting; returns the total elapsed seconds."""
        if self._since is not None:
            self._total += time.perf_counter() - self._since
            self._since = None
        return self._total

    @property
    def running(self) -> bool:
        """Whether the stopwatch is counting now."""
        return self._since is not None

    @property
    def elapsed(self) -> float:
        """Seconds counted so far, including the current running stretch."""
        extra = time.perf_counter() - self._since if self._since is not None else 0.0
        return self._total + extra

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Context in which time is not counted (resumes only if it was running)."""
        was_running = self.running
        self.stop()
        try:
            yield
        finally:
            if was_running:
                self.start()
