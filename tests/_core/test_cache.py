"""optarium._core.cache: the cache folder, and atomic, loud reads and writes of cached files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from optarium._core.cache import cache_root, load_cached, store_cached


def test_cache_root_follows_the_environment(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OPTARIUM_CACHE_DIR", str(tmp_path))
    assert cache_root("x", "y") == tmp_path / "x" / "y"


def test_store_then_load_round_trips_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "a.json"
    assert load_cached(path, lambda p: json.loads(p.read_text())) is None  # absent: None, no warning
    assert store_cached(path, lambda p: p.write_text(json.dumps({"v": 1.5})))
    assert load_cached(path, lambda p: json.loads(p.read_text())) == {"v": 1.5}
    assert sorted(os.listdir(path.parent)) == ["a.json"]


def test_a_damaged_file_warns_and_is_recomputed(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text("{not json")
    with pytest.warns(RuntimeWarning, match="damaged"):
        assert load_cached(path, lambda p: json.loads(p.read_text())) is None
    with pytest.raises(KeyError):  # only the listed errors count as damage; others propagate
        load_cached(path, lambda p: {}["k"])
    with pytest.warns(RuntimeWarning, match="damaged"):
        assert load_cached(path, lambda p: {}["k"], (KeyError,)) is None


def test_an_unwritable_folder_warns_and_returns_false(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.warns(RuntimeWarning, match="not cached"):
        assert not store_cached(blocker / "a.json", lambda p: p.write_text("{}"))
    assert blocker.read_text() == ""
