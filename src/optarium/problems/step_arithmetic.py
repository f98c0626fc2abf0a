r"""Step-structured synthetic arithmetic with a verifiable answer (the laptop task of the segment-po spec).

A problem is ``n_ops`` operations on digits modulo ``modulus`` (10), evaluated left to right, e.g. the prompt
``7+5*3-4=`` with the chain-of-thought response ``7+5=2;2*3=6;6-4=2;A2`` and an end token. Every step
``a o b = c ;`` is 6 tokens, so a response has ``6 * n_ops + 3`` tokens (``A``, the answer, ``<eos>``) and
the steps are natural segments (``;`` is the delimiter). The reward is 1 when the token after the first ``A``
is the right answer, else 0.

:func:`traces` writes the target responses for supervised warm-up, each step's result wrong with probability
``error_prob`` (the error propagates: later steps compute from the written result, as a model that slipped
would); prompts of different lengths (``n_ops`` ranges) are left-padded with ``<pad>`` so that generation
appends at the right end.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from optarium._core.validation import check_int, check_probability

__all__ = ["VOCAB", "ArithmeticBatch", "answers_of", "decode", "reward", "sample_problems", "traces"]

#: the token strings; ids are the positions.
VOCAB: tuple[str, ...] = (*"0123456789", "+", "-", "*", "=", ";", "A", "<bos>", "<eos>", "<pad>")
_ID = {s: i for i, s in enumerate(VOCAB)}
PLUS, MINUS, TIMES, EQ, SEMI, ANS, BOS, EOS, PAD = (
    _ID[s] for s in ("+", "-", "*", "=", ";", "A", "<bos>", "<eos>", "<pad>")
)
_OPS = torch.tensor([PLUS, MINUS, TIMES])


@dataclass(frozen=True)
class ArithmeticBatch:
    """``prompts``: ``(n, P)`` long, left-padded ``<bos> d o d ... o d =``; ``prompt_mask``: 0/1 validity;
    ``digits``: ``(n, K+1)`` operands; ``ops``: ``(n, K)`` indices into ``+ - *`` (only the first
    ``n_ops[i]`` used); ``n_ops``: ``(n,)``; ``answer``: ``(n,)`` the correct result."""

    prompts: torch.Tensor
    prompt_mask: torch.Tensor
    digits: torch.Tensor
    ops: torch.Tensor
    n_ops: torch.Tensor
    answer: torch.Tensor


def _apply(a: torch.Tensor, op: torch.Tensor, b: torch.Tensor, modulus: int) -> torch.Tensor:
    return torch.where(op == 0, a + b, torch.where(op == 1, a - b, a * b)).remainder(modulus)


def sample_problems(
    n: int, generator: torch.Generator, *, min_ops: int = 2, max_ops: int = 2, modulus: int = 10
) -> ArithmeticBatch:
    """``n`` random problems with ``min_ops..max_ops`` operations, drawn from ``generator``."""
    n = check_int("n", n, minimum=1)
    min_ops = check_int("min_ops", min_ops, minimum=1)
    max_ops = check_int("max_ops", max_ops, minimum=min_ops)
    modulus = check_int("modulus", modulus, minimum=2, maximum=10)
    k = max_ops
    digits = torch.randint(modulus, (n, k + 1), generator=generator)
    ops = torch.randint(3, (n, k), generator=generator)
    n_ops = torch.randint(min_ops, max_ops + 1, (n,), generator=generator)
    acc = digits[:, 0]
    for j in range(k):  # k <= 5 sequential steps, vectorised over problems
        acc = torch.where(j < n_ops, _apply(acc, ops[:, j], digits[:, j + 1], modulus), acc)
    length = 2 * n_ops + 3  # <bos>, digit, (op, digit) * n_ops, "="
    width = 2 * k + 3
    body = torch.full((n, width), PAD, dtype=torch.long)
    body[:, 0] = BOS
    body[:, 1] = digits[:, 0]
    body[:, 2 : 2 * k + 1 : 2] = _OPS[ops]
    body[:, 3 : 2 * k + 2 : 2] = digits[:, 1:]
    pos = torch.arange(width).unsqueeze(0)
    body = torch.where(pos < length.unsqueeze(1) - 1, body, torch.full_like(body, PAD))
    body[torch.arange(n), length - 1] = EQ
    shift = (width - length).unsqueeze(1)  # left-pad: roll each row right by its padding
    idx = (pos - shift).remainder(width)
    prompts = body.gather(1, idx)
    mask = (pos >= shift).long()
    return ArithmeticBatch(prompts, mask, digits, ops, n_ops, acc)


def traces(
    batch: ArithmeticBatch, generator: torch.Generator, *, error_prob: float = 0.0, modulus: int = 10
) -> torch.Tensor:
    """Target responses ``(n, 6 * max_ops + 3)`` (right-padded with ``<pad>``): the steps, ``A``, the
    (written) final result and ``<eos>``; each step's result is replaced by a different random digit with
    probability ``error_prob``."""
    error_prob = check_probability("error_prob", error_prob)
    n, k = batch.ops.shape
    width = 6 * k + 3
    out = torch.full((n, width), PAD, dtype=torch.long)
    acc = batch.digits[:, 0]
    rows = torch.arange(n)
    for j in range(k):
        live = j < batch.n_ops
        true = _apply(acc, batch.ops[:, j], batch.digits[:, j + 1], modulus)
        wrong = (true + torch.randint(1, modulus, (n,), generator=generator)).remainder(modulus)
        slip = torch.rand(n, generator=generator) < error_prob
        res = torch.where(slip, wrong, true)
        step = torch.stack([acc, _OPS[batch.ops[:, j]], batch.digits[:, j + 1], torch.full_like(acc, EQ), res,
                            torch.full_like(acc, SEMI)], 1)  # fmt: skip
        cols = 6 * j + torch.arange(6)
        out[:, cols] = torch.where(live.unsqueeze(1), step, out[:, cols])
        acc = torch.where(live, res, acc)
    end = 6 * batch.n_ops
    out[rows, end] = ANS
    out[rows, end + 1] = acc
    out[rows, end + 2] = EOS
    return out


def answers_of(responses: torch.Tensor) -> torch.Tensor:
    """The digit after the first ``A`` of each response (``-1`` if there is none or it is not a digit)."""
    if not isinstance(responses, torch.Tensor) or responses.ndim != 2:
        raise ValueError("responses: must be a (n, T) tensor of token ids")
    is_a = responses == ANS
    has = is_a.any(1)
    first = is_a.long().argmax(1)
    nxt = (first + 1).clamp_max(responses.shape[1] - 1)
    tok = responses.gather(1, nxt.unsqueeze(1)).squeeze(1)
    ok = has & (first + 1 < responses.shape[1]) & (tok < 10)
    return torch.where(ok, tok, torch.full_like(tok, -1))


def reward(responses: torch.Tensor, answer: torch.Tensor) -> torch.Tensor:
    """1.0 where the response's answer equals ``answer``, else 0.0 (float ``(n,)``)."""
    if not isinstance(answer, torch.Tensor) or answer.shape != responses.shape[:1]:
        raise ValueError(f"answer: must have shape ({responses.shape[0]},)")
    return (answers_of(responses) == answer).float()


def decode(ids: torch.Tensor) -> list[str]:
    """The token strings of each row joined (``<pad>`` dropped)."""
    return ["".join(VOCAB[i] for i in row.tolist() if i != PAD) for row in ids]
