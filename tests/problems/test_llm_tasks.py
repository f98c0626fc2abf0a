"""Generated few-shot tasks of optarium.problems.llm_tasks."""

from __future__ import annotations

import pytest

from optarium.problems import llm_tasks as lt


def test_sentiment_balanced_disjoint_deterministic():
    t = lt.remapped_sentiment(16, 48, seed=3, n_cues=2, n_fillers=1)
    assert t.options == ["foo", "bar"]
    assert [y for _, y in t.queries].count("foo") == 24
    assert not {x for x, _ in t.demos} & {x for x, _ in t.queries}
    assert t == lt.remapped_sentiment(16, 48, seed=3, n_cues=2, n_fillers=1)
    assert t != lt.remapped_sentiment(16, 48, seed=4, n_cues=2, n_fillers=1)
    # difficulty: number of cue words present in each input
    for x, y in t.queries:
        lex = lt._POS if y == "foo" else lt._NEG
        assert sum(w in x.split() for w in lex) == 2


def test_exact_match_tasks():
    c = lt.char_shift(4, 4, seed=0, shift=2)
    for x, y in c.demos + c.queries:
        assert len(x) == len(y) and all((ord(b) - ord(a)) % 26 == 2 for a, b in zip(x, y, strict=True))
    a = lt.antonyms(8, 16, seed=1)
    assert a.options is None and len(a.queries) == 16
    assert not {x for x, _ in a.demos} & {x for x, _ in a.queries}
    assert len(lt.capitals(4, 4).demos) == 4


def test_bad_input():
    with pytest.raises(ValueError, match="n_demos"):
        lt.remapped_sentiment(0, 4)
    with pytest.raises(ValueError, match="n_queries"):
        lt.antonyms(4, 0)
    with pytest.raises(ValueError, match="n_demos \\+ n_queries"):
        lt.capitals(20, 20)
