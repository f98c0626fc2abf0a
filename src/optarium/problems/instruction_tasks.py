"""Generated instruction-following tasks for continual instruction tuning (nothing is downloaded).

The task suite of the sapo-prompts spec (``shared/papers/sapo-prompts.md``), standing in for SuperNI / TRACE:

- T1 :func:`sentiment_task` -- sentiment of a template sentence from a fixed lexicon (Positive/Negative);
- T2 :func:`antonym_task` -- the antonym of a word;
- T3 :func:`category_task` -- which category a noun phrase belongs to (animal / food / tool);
- T4 :func:`uppercase_task` -- copy the input in upper case;
- T5 :func:`continent_task` -- country -> continent from a small table (the held-out, never-trained task).

Each generator returns an :class:`InstructionTask`: the original instruction, the label words that a
paraphrase must keep character-exact, and disjoint ``train`` / ``test`` lists of ``(input, answer)`` pairs,
deterministic under ``seed``. Difficulty controls: T1 ``n_cues`` / ``n_fillers`` (fewer cue words among more
fillers is harder), T2 ``both_directions`` (doubles the pool), T3 ``n_categories`` (2 or 3) and
``n_adjectives`` (distractor words), T4 ``n_words`` (longer inputs), T5 none (a fixed table).

:func:`format_prompt` builds the SAPO prompt ``instruction + "\\n\\nText:\\n" + input + "\\n" + suffix`` and
:func:`format_answer` the target ``" " + answer + "\\n"`` (the newline ends the answer when decoding).
:data:`PARAPHRASE_BANK` holds, per task, 11 hand-written rewrites of the original instruction that differ in
length, order and tone, with or without restating the label set (the LLM paraphraser of the paper replaced by
a fixed bank). :class:`WordTokenizer` is a word-level tokenizer (lower-case words with capitalisation markers)
for the tiny from-scratch model of the quick check.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from optarium.problems.llm_tasks import _ANT, _FILL, _NEG, _POS, _SUBJ

__all__ = [
    "PARAPHRASE_BANK",
    "InstructionTask",
    "WordTokenizer",
    "antonym_task",
    "category_task",
    "continent_task",
    "format_answer",
    "format_prompt",
    "sapo_task_suite",
    "sentiment_task",
    "uppercase_task",
]

SUFFIX = "Answer:"

_ANT_MORE = [
    ("above", "below"),
    ("add", "remove"),
    ("awake", "asleep"),
    ("before", "after"),
    ("begin", "end"),
    ("brave", "afraid"),
    ("cheap", "expensive"),
    ("come", "go"),
    ("day", "night"),
    ("easy", "difficult"),
    ("enter", "exit"),
    ("friend", "enemy"),
    ("give", "take"),
    ("heavy", "light"),
    ("kind", "cruel"),
    ("laugh", "cry"),
    ("left", "right"),
    ("male", "female"),
    ("more", "less"),
    ("new", "old"),
    ("north", "south"),
    ("east", "west"),
    ("on", "off"),
    ("polite", "rude"),
    ("question", "answer"),
    ("safe", "dangerous"),
    ("same", "different"),
    ("smooth", "rough"),
    ("start", "finish"),
    ("sweet", "sour"),
    ("tall", "short"),
    ("wide", "narrow"),
    ("wild", "tame"),
    ("asleep", "awake"),
    ("always", "never"),
    ("accept", "refuse"),
    ("arrive", "leave"),
    ("noisy", "silent"),
    ("sharp", "blunt"),
    ("public", "private"),
    ("simple", "complex"),
    ("success", "failure"),
    ("victory", "defeat"),
    ("warm", "cool"),
    ("healthy", "sick"),
    ("include", "exclude"),
    ("increase", "decrease"),
    ("maximum", "minimum"),
    ("whole", "part"),
    ("guilty", "innocent"),
]

_CATEGORIES = {
    "animal": [
        "cat",
        "dog",
        "horse",
        "rabbit",
        "tiger",
        "lion",
        "sheep",
        "goat",
        "mouse",
        "eagle",
        "whale",
        "monkey",
        "snake",
        "duck",
        "bear",
        "fox",
    ],
    "food": [
        "bread",
        "cheese",
        "apple",
        "banana",
        "rice",
        "soup",
        "pasta",
        "carrot",
        "cake",
        "butter",
        "pizza",
        "salad",
        "potato",
        "orange",
        "honey",
        "cookie",
    ],
    "tool": [
        "hammer",
        "wrench",
        "saw",
        "drill",
        "shovel",
        "ladder",
        "chisel",
        "pliers",
        "axe",
        "rake",
        "spanner",
        "screwdriver",
        "knife",
        "needle",
        "brush",
        "scissors",
    ],
}
_ADJ = ["small", "big", "old", "new", "red", "brown", "heavy", "tiny", "clean", "cheap", "green", "long"]
_COPY_WORDS = [
    "river",
    "stone",
    "cloud",
    "paper",
    "garden",
    "window",
    "silver",
    "winter",
    "candle",
    "forest",
    "bottle",
    "market",
    "pencil",
    "mirror",
    "planet",
    "ticket",
    "basket",
    "engine",
    "pocket",
    "rocket",
]
_CONTINENT = [
    ("France", "Europe"),
    ("Germany", "Europe"),
    ("Italy", "Europe"),
    ("Spain", "Europe"),
    ("Norway", "Europe"),
    ("Poland", "Europe"),
    ("Greece", "Europe"),
    ("Ireland", "Europe"),
    ("Sweden", "Europe"),
    ("Portugal", "Europe"),
    ("Austria", "Europe"),
    ("Hungary", "Europe"),
    ("Japan", "Asia"),
    ("China", "Asia"),
    ("India", "Asia"),
    ("Thailand", "Asia"),
    ("Vietnam", "Asia"),
    ("Korea", "Asia"),
    ("Nepal", "Asia"),
    ("Mongolia", "Asia"),
    ("Indonesia", "Asia"),
    ("Pakistan", "Asia"),
    ("Egypt", "Africa"),
    ("Kenya", "Africa"),
    ("Nigeria", "Africa"),
    ("Ghana", "Africa"),
    ("Morocco", "Africa"),
    ("Ethiopia", "Africa"),
    ("Uganda", "Africa"),
    ("Senegal", "Africa"),
    ("Algeria", "Africa"),
    ("Tanzania", "Africa"),
    ("Brazil", "America"),
    ("Peru", "America"),
    ("Chile", "America"),
    ("Canada", "America"),
    ("Mexico", "America"),
    ("Argentina", "America"),
    ("Colombia", "America"),
    ("Cuba", "America"),
    ("Bolivia", "America"),
    ("Venezuela", "America"),
]

INSTRUCTIONS = {
    "sentiment": "Classify the sentiment of the text. Reply with Positive or Negative.",
    "antonym": "Write the antonym of the given word.",
    "category": "Decide which category the object belongs to: animal, food or tool.",
    "uppercase": "Copy the text exactly, writing every letter in upper case.",
    "continent": "Name the continent where the given country is located.",
}

#: 11 rewrites of each original instruction (length, order, tone; with and without the label set). The
#: sentiment rewrites keep the label words "Positive" and "Negative" character-exact where they name them.
PARAPHRASE_BANK: dict[str, list[str]] = {
    "sentiment": [
        "Read the text and say whether its sentiment is Positive or Negative.",
        "Is the opinion in the text Positive or Negative? Answer with one word.",
        "Sentiment classification: label the text as Positive or Negative.",
        "Decide if the writer feels good or bad about it and reply with Positive or Negative.",
        "Tell me the sentiment of this text.",
        "Label: Positive or Negative.",
        "You are a careful reviewer. Please judge the tone of the text below and answer Positive or "
        "Negative.",
        "What is the sentiment of the text? Choose Positive or Negative.",
        "Classify the text by sentiment.",
        "Given a short review, output Positive if it is favourable and Negative otherwise.",
        "Answer with Positive or Negative: how does the text feel?",
    ],
    "antonym": [
        "Give the opposite of the word.",
        "What is the opposite of the given word? Reply with one word.",
        "Antonym task: write a word with the opposite meaning.",
        "Read the word and write its antonym.",
        "Write the word that means the opposite.",
        "Opposite?",
        "You are a helpful dictionary. Please give the antonym of the word below.",
        "Find the antonym of the word in the text.",
        "Return a single word whose meaning is the opposite of the given one.",
        "Name the opposite of this word.",
        "Turn the word into its opposite.",
    ],
    "category": [
        "Which category does the object belong to: animal, food or tool?",
        "Read the text and say whether the object is an animal, a food or a tool.",
        "Classify the object as animal, food or tool.",
        "Name the category of the object.",
        "Category?",
        "You are a careful sorter. Please put the object below into one of three groups: animal, food, tool.",
        "Decide the category of the given object.",
        "Is this an animal, a food or a tool? Answer with one word.",
        "Tell me what kind of thing the object is.",
        "Sort the object into its category: animal, food or tool.",
        "Object category classification: reply with the category.",
    ],
    "uppercase": [
        "Rewrite the text in upper case.",
        "Copy the text and capitalise every letter.",
        "Write the text again in capital letters.",
        "Read the text and write it in upper case.",
        "Upper case?",
        "You are a careful typist. Please copy the text below using only capital letters.",
        "Convert the text to upper case.",
        "Repeat the words of the text, all in capitals.",
        "Classify nothing; just copy the text in upper case.",
        "Decide nothing and write the text in capital letters.",
        "Say the text again, but in upper case letters.",
    ],
    "continent": [
        "Which continent is the country in?",
        "Name the continent of the given country.",
        "Read the country and write its continent.",
        "Continent?",
        "You are a geography teacher. Please say on which continent the country below lies.",
        "Tell me the continent where this country is.",
        "Give the continent of the country in the text.",
        "Where is this country? Reply with the continent.",
        "Write the continent that contains the country.",
        "Decide the continent of the given country.",
        "Country to continent: answer with one word.",
    ],
}


@dataclass(frozen=True)
class InstructionTask:
    """One instruction-tuning task: original instruction, label words to keep exact, train/test pairs.

    Attributes:
        name: task name (``"sentiment"``, ...).
        instruction: the original natural-language instruction I_k.
        labels: label words a paraphrase must keep character-exact (empty for open-ended tasks).
        train: ``(input, answer)`` pairs to train and score prompts on.
        test: ``(input, answer)`` pairs to evaluate on (inputs disjoint from ``train``).
        max_new_tokens: greedy-decoding budget for exact-match evaluation.
        suffix: the fixed output-format suffix after the input (always the original one).
    """

    name: str
    instruction: str
    labels: tuple[str, ...]
    train: list[tuple[str, str]]
    test: list[tuple[str, str]]
    max_new_tokens: int = 4
    suffix: str = SUFFIX


def format_prompt(instruction: str, x: str, suffix: str = SUFFIX) -> str:
    """The SAPO prompt: ``instruction + "\\n\\nText:\\n" + x + "\\n" + suffix``."""
    return f"{instruction}\n\nText:\n{x}\n{suffix}"


def format_answer(y: str) -> str:
    """The training target: ``" " + y + "\\n"`` (the newline marks the end of the answer)."""
    return f" {y}\n"


def _check_sizes(n_train: int, n_test: int) -> None:
    for name, v in (("n_train", n_train), ("n_test", n_test)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {v!r}")


def _split(pool: list[tuple[str, str]], n_train: int, n_test: int, rng: random.Random, name: str) -> tuple:
    if n_train + n_test > len(pool):
        raise ValueError(f"n_train + n_test must be <= {len(pool)} for the {name} task")
    p = list(pool)
    rng.shuffle(p)
    return p[:n_train], p[n_train : n_train + n_test]


def sentiment_task(
    n_train: int = 48, n_test: int = 96, *, seed: int = 0, n_cues: int = 1, n_fillers: int = 1
) -> InstructionTask:
    """T1: sentiment of ``"{subject} was {cue/filler words}"`` (balanced Positive/Negative)."""
    _check_sizes(n_train, n_test)
    if n_cues < 1 or n_fillers < 0:
        raise ValueError("n_cues must be >= 1 and n_fillers >= 0")
    rng = random.Random(seed)
    pool: dict[str, str] = {}
    need = n_train + n_test
    tries = 0
    while len(pool) < need:
        tries += 1
        if tries > 100 * need:
            raise ValueError("n_train + n_test exceeds the distinct sentences of these settings")
        c = len(pool) % 2
        words = rng.sample(_POS if c == 0 else _NEG, n_cues) + rng.sample(_FILL, min(n_fillers, len(_FILL)))
        rng.shuffle(words)
        s = f"{rng.choice(_SUBJ)} was {' and '.join(words)}"
        if s not in pool:
            pool[s] = "Positive" if c == 0 else "Negative"
    items = list(pool.items())
    tr, te = items[:n_train], items[n_train:]
    rng.shuffle(tr)
    rng.shuffle(te)
    return InstructionTask("sentiment", INSTRUCTIONS["sentiment"], ("Positive", "Negative"), tr, te, 3)


def antonym_task(
    n_train: int = 48, n_test: int = 96, *, seed: int = 0, both_directions: bool = True
) -> InstructionTask:
    """T2: word -> antonym (80 pairs; ``both_directions`` adds the reverses: 152 words with one antonym).

    Words with two antonyms in the pool ("old": young / new, "light": dark / heavy, ...) are dropped.
    """
    _check_sizes(n_train, n_test)
    base = list(dict.fromkeys(_ANT + _ANT_MORE))
    pool = base + ([(b, a) for a, b in base] if both_directions else [])
    answers: dict[str, set[str]] = {}
    for a, b in pool:
        answers.setdefault(a, set()).add(b)
    pool = sorted((a, next(iter(bs))) for a, bs in answers.items() if len(bs) == 1)  # unambiguous only
    tr, te = _split(pool, n_train, n_test, random.Random(seed), "antonym")
    return InstructionTask("antonym", INSTRUCTIONS["antonym"], (), tr, te, 4)


def category_task(
    n_train: int = 48, n_test: int = 96, *, seed: int = 0, n_categories: int = 3, n_adjectives: int = 1
) -> InstructionTask:
    """T3: ``"the {adjectives} {noun}"`` -> animal / food / tool (``n_categories`` 2 drops "tool")."""
    _check_sizes(n_train, n_test)
    if n_categories not in (2, 3):
        raise ValueError(f"n_categories must be 2 or 3, got {n_categories!r}")
    if not 0 <= n_adjectives <= 2:
        raise ValueError(f"n_adjectives must be in 0..2, got {n_adjectives!r}")
    cats = list(_CATEGORIES)[:n_categories]
    rng = random.Random(seed)
    pool = []
    for c in cats:
        for noun in _CATEGORIES[c]:
            if n_adjectives == 0:
                pool.append((f"the {noun}", c))
            else:
                for a in _ADJ:
                    for b in _ADJ if n_adjectives == 2 else [""]:
                        if a != b:
                            pool.append((f"the {a} {b + ' ' if b else ''}{noun}", c))
    tr, te = _split(pool, n_train, n_test, rng, "category")
    return InstructionTask("category", INSTRUCTIONS["category"], tuple(cats), tr, te, 3)


def uppercase_task(
    n_train: int = 48, n_test: int = 96, *, seed: int = 0, n_words: int = 2
) -> InstructionTask:
    """T4: ``n_words`` distinct words -> the same words in upper case."""
    _check_sizes(n_train, n_test)
    if not 1 <= n_words <= 4:
        raise ValueError(f"n_words must be in 1..4, got {n_words!r}")
    rng = random.Random(seed)
    pool: dict[str, str] = {}
    need = n_train + n_test
    distinct = math.perm(len(_COPY_WORDS), n_words)
    if need > distinct:  # the sampling loop below would never end
        raise ValueError(f"n_train + n_test must be <= {distinct} for {n_words} word(s)")
    while len(pool) < need:
        s = " ".join(rng.sample(_COPY_WORDS, n_words))
        pool.setdefault(s, s.upper())
    items = list(pool.items())
    return InstructionTask("uppercase", INSTRUCTIONS["uppercase"], (), items[:n_train], items[n_train:], 6)


def continent_task(n_train: int = 8, n_test: int = 34, *, seed: int = 0) -> InstructionTask:
    """T5 (held out): country -> continent (Europe/Asia/Africa/America) from a 42-row table."""
    _check_sizes(n_train, n_test)
    tr, te = _split(list(_CONTINENT), n_train, n_test, random.Random(seed), "continent")
    return InstructionTask("continent", INSTRUCTIONS["continent"], (), tr, te, 3)


def sapo_task_suite(n_train: int = 48, n_test: int = 96, *, seed: int = 0) -> dict[str, InstructionTask]:
    """T1-T5 with default difficulty; T5 gets all the table rows its small pool allows (8 train)."""
    return {
        "sentiment": sentiment_task(n_train, n_test, seed=seed),
        "antonym": antonym_task(n_train, n_test, seed=seed),
        "category": category_task(n_train, n_test, seed=seed),
        "uppercase": uppercase_task(n_train, n_test, seed=seed),
        "continent": continent_task(8, min(n_test, len(_CONTINENT) - 8), seed=seed),
    }


_TOKEN = re.compile(r"[A-Za-z]+|[0-9]|\n|[^\sA-Za-z0-9]")


class WordTokenizer:
    """Word-level tokenizer with capitalisation markers, for a tiny from-scratch LM.

    Words are lower-cased; a word in capitals (two letters or more) is preceded by ``<up>``, a capitalised
    word by ``<cap>``; digits, punctuation and ``"\\n"`` are tokens; spaces are implicit. Ids: 0 ``<pad>``,
    1 ``<eos>``, 2 ``<unk>``, 3 ``<cap>``, 4 ``<up>``, then the vocabulary in sorted order. The interface
    mirrors the HF tokenizers used elsewhere: ``tok(text, add_special_tokens=False)["input_ids"]``,
    ``decode(ids)``, ``pad_token_id``, ``eos_token_id``, ``len(tok)``.
    """

    pad_token_id = 0
    eos_token_id = 1
    unk_token_id = 2
    _SPECIAL = ("<pad>", "<eos>", "<unk>", "<cap>", "<up>")

    def __init__(self, words: Iterable[str]) -> None:
        vocab = sorted({w.lower() for w in words} - set(self._SPECIAL))
        self.itos: list[str] = [*self._SPECIAL, *vocab]
        self.stoi = {w: i for i, w in enumerate(self.itos)}

    @classmethod
    def from_texts(cls, texts: Iterable[str]) -> WordTokenizer:
        """A tokenizer whose vocabulary is every word token of ``texts``."""
        words: set[str] = set()
        for t in texts:
            words.update(m.group(0).lower() for m in _TOKEN.finditer(t))
        return cls(words)

    def __len__(self) -> int:
        return len(self.itos)

    def tokenize(self, text: str) -> list[str]:
        """Token strings of ``text`` (markers included)."""
        out: list[str] = []
        for m in _TOKEN.finditer(text):
            w = m.group(0)
            if w.isalpha() and len(w) > 1 and w.isupper():
                out.append("<up>")
            elif w.isalpha() and w[0].isupper():
                out.append("<cap>")
            out.append(w.lower())
        return out

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict[str, list[int]]:
        """``{"input_ids": [...]}`` of ``text``."""
        ids = [self.stoi.get(t, self.unk_token_id) for t in self.tokenize(text)]
        if add_special_tokens:
            ids.append(self.eos_token_id)
        return {"input_ids": ids}

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids``: words joined by spaces (none before punctuation or after a newline)."""
        out = ""
        mode = ""
        for i in ids:
            t = self.itos[int(i)] if 0 <= int(i) < len(self.itos) else "<unk>"
            if t in ("<pad>", "<eos>"):
                continue
            if t in ("<cap>", "<up>"):
                mode = t
                continue
            w = t.upper() if mode == "<up>" else (t.capitalize() if mode == "<cap>" else t)
            mode = ""
            if t == "\n" or not out or out.endswith("\n") or not (t[0].isalnum() or t[0] == "<"):
                out += w
            else:
                out += " " + w
        return out
