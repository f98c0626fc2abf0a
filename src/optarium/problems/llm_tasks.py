"""Generated few-shot tasks for language-model adaptation (nothing is downloaded).

Each generator returns an :class:`LLMTask` (``demos``, ``queries`` as ``(x, y)`` string pairs, ``options`` for
option-scored tasks, else ``None`` for exact-match generation), deterministic under ``seed``; demos and
queries never share an input. Difficulty is controllable per task (see each generator).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = ["LLMTask", "antonyms", "capitals", "char_shift", "remapped_sentiment"]

_POS = [
    "great",
    "wonderful",
    "lovely",
    "superb",
    "delightful",
    "excellent",
    "charming",
    "brilliant",
    "pleasant",
    "fantastic",
    "joyful",
    "marvellous",
]
_NEG = [
    "awful",
    "terrible",
    "dreadful",
    "boring",
    "horrible",
    "dull",
    "miserable",
    "poor",
    "nasty",
    "annoying",
    "tedious",
    "disappointing",
]
_SUBJ = [
    "the movie",
    "the meal",
    "the concert",
    "the book",
    "the trip",
    "the game",
    "the hotel",
    "the show",
    "the lecture",
    "the party",
    "the album",
    "the service",
]
_FILL = ["quite", "really", "honestly", "overall", "at times", "mostly"]
_ANT = [
    ("hot", "cold"),
    ("big", "small"),
    ("fast", "slow"),
    ("happy", "sad"),
    ("light", "dark"),
    ("up", "down"),
    ("open", "closed"),
    ("early", "late"),
    ("hard", "soft"),
    ("rich", "poor"),
    ("young", "old"),
    ("wet", "dry"),
    ("loud", "quiet"),
    ("thick", "thin"),
    ("high", "low"),
    ("strong", "weak"),
    ("full", "empty"),
    ("clean", "dirty"),
    ("deep", "shallow"),
    ("long", "short"),
    ("good", "bad"),
    ("love", "hate"),
    ("win", "lose"),
    ("push", "pull"),
    ("buy", "sell"),
    ("true", "false"),
    ("alive", "dead"),
    ("inside", "outside"),
    ("first", "last"),
    ("near", "far"),
]
_CAP = [
    ("France", "Paris"),
    ("Germany", "Berlin"),
    ("Italy", "Rome"),
    ("Spain", "Madrid"),
    ("Japan", "Tokyo"),
    ("Egypt", "Cairo"),
    ("Russia", "Moscow"),
    ("Canada", "Ottawa"),
    ("Greece", "Athens"),
    ("Norway", "Oslo"),
    ("Peru", "Lima"),
    ("Kenya", "Nairobi"),
    ("Cuba", "Havana"),
    ("Chile", "Santiago"),
    ("Poland", "Warsaw"),
    ("Austria", "Vienna"),
    ("Ireland", "Dublin"),
    ("Portugal", "Lisbon"),
    ("Sweden", "Stockholm"),
    ("Finland", "Helsinki"),
    ("Hungary", "Budapest"),
    ("Thailand", "Bangkok"),
    ("China", "Beijing"),
    ("India", "Delhi"),
]
_WORDS = [
    "cat",
    "dog",
    "sun",
    "map",
    "pen",
    "cup",
    "box",
    "hat",
    "red",
    "toy",
    "bed",
    "car",
    "fig",
    "jam",
    "kit",
    "log",
    "mud",
    "net",
    "owl",
    "pig",
    "rug",
    "tan",
    "van",
    "web",
    "bird",
    "fish",
    "lamp",
    "milk",
    "ring",
    "ship",
    "tree",
    "wolf",
]


@dataclass(frozen=True)
class LLMTask:
    """Few-shot task: ``demos`` and ``queries`` are ``(input, output)`` pairs; ``options`` for scoring."""

    name: str
    demos: list[tuple[str, str]]
    queries: list[tuple[str, str]]
    options: list[str] | None = None
    max_new_tokens: int = 6


def _check(n_demos: int, n_queries: int) -> None:
    if n_demos < 1:
        raise ValueError(f"n_demos must be >= 1, got {n_demos}")
    if n_queries < 1:
        raise ValueError(f"n_queries must be >= 1, got {n_queries}")


def remapped_sentiment(
    n_demos: int = 16,
    n_queries: int = 48,
    *,
    seed: int = 0,
    n_cues: int = 1,
    n_fillers: int = 1,
    labels: tuple[str, str] = ("foo", "bar"),
) -> LLMTask:
    """Sentiment-like sentences with remapped labels (positive -> ``labels[0]``): the mapping must come from
    the demos. Difficulty: fewer cue words (``n_cues``) among more neutral fillers (``n_fillers``) is harder;
    classes are balanced in the queries."""
    _check(n_demos, n_queries)
    if n_cues < 1 or n_fillers < 0:
        raise ValueError("n_cues must be >= 1 and n_fillers >= 0")
    rng = random.Random(seed)
    seen: set[str] = set()

    def make(c: int) -> tuple[str, str]:
        while True:
            lex = _POS if c == 0 else _NEG
            words = rng.sample(lex, n_cues) + rng.sample(_FILL, min(n_fillers, len(_FILL)))
            rng.shuffle(words)
            s = f"{rng.choice(_SUBJ)} was {' and '.join(words)}"
            if s not in seen:
                seen.add(s)
                return s, labels[c]

    demos = [make(i % 2) for i in range(n_demos)]
    rng.shuffle(demos)
    queries = [make(i % 2) for i in range(n_queries)]
    rng.shuffle(queries)
    return LLMTask("remapped_sentiment", demos, queries, list(labels))


def _split(
    pairs: list[tuple[str, str]], n_demos: int, n_queries: int, rng: random.Random
) -> tuple[list, list]:
    if n_demos + n_queries > len(pairs):
        raise ValueError(f"n_demos + n_queries must be <= {len(pairs)} for this task")
    p = list(pairs)
    rng.shuffle(p)
    return p[:n_demos], p[n_demos : n_demos + n_queries]


def antonyms(
    n_demos: int = 8, n_queries: int = 16, *, seed: int = 0, both_directions: bool = True
) -> LLMTask:
    """Word -> antonym, exact match. ``both_directions`` doubles the pool (harder to memorise)."""
    _check(n_demos, n_queries)
    pairs = list(_ANT) + ([(b, a) for a, b in _ANT] if both_directions else [])
    d, q = _split(pairs, n_demos, n_queries, random.Random(seed))
    return LLMTask("antonyms", d, q, None, 4)


def capitals(n_demos: int = 8, n_queries: int = 16, *, seed: int = 0) -> LLMTask:
    """Country -> capital from a built-in table, exact match."""
    _check(n_demos, n_queries)
    d, q = _split(list(_CAP), n_demos, n_queries, random.Random(seed))
    return LLMTask("capitals", d, q, None, 4)


def char_shift(n_demos: int = 8, n_queries: int = 16, *, seed: int = 0, shift: int = 1) -> LLMTask:
    """Each letter replaced by the one ``shift`` later ("cat" -> "dbu" at shift 1), exact match; larger
    ``shift`` and longer words are harder."""
    _check(n_demos, n_queries)

    def enc(w: str) -> str:
        return "".join(chr((ord(ch) - 97 + shift) % 26 + 97) for ch in w)

    d, q = _split([(w, enc(w)) for w in _WORDS], n_demos, n_queries, random.Random(seed))
    return LLMTask("char_shift", d, q, None, 6)
