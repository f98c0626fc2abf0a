"""Tests of optarium.problems.step_arithmetic (the segment-po task)."""

from __future__ import annotations

import pytest
import torch

from optarium.problems import step_arithmetic as sa


def _eval(text: str) -> int:
    """Left-to-right evaluation of 'd o d o d ...=' modulo 10, written independently."""
    body = text.removeprefix("<bos>").removesuffix("=")
    acc = int(body[0])
    for op, d in zip(body[1::2], body[2::2], strict=True):
        acc = {"+": acc + int(d), "-": acc - int(d), "*": acc * int(d)}[op] % 10
    return acc


def test_prompts_answers_and_padding():
    b = sa.sample_problems(200, torch.Generator().manual_seed(0), min_ops=3, max_ops=5)
    texts = sa.decode(b.prompts)
    assert [_eval(t) for t in texts] == b.answer.tolist()
    lengths = b.prompt_mask.sum(1)
    assert torch.equal(lengths, 2 * b.n_ops + 3)
    assert bool((b.prompts[b.prompt_mask == 0] == sa.PAD).all())  # left padding only
    assert bool((b.prompts[:, -1] == sa.EQ).all())
    assert set(b.n_ops.tolist()) == {3, 4, 5}


def test_traces_correct_and_with_errors():
    g = torch.Generator().manual_seed(1)
    b = sa.sample_problems(300, g, min_ops=2, max_ops=3)
    t = sa.traces(b, g)
    assert bool((sa.reward(t, b.answer) == 1).all())
    for text, prompt in zip(sa.decode(t)[:20], sa.decode(b.prompts)[:20], strict=True):
        steps = text.removesuffix("<eos>").split(";")
        assert len(steps) == prompt.count("+") + prompt.count("-") + prompt.count("*") + 1
        for st in steps[:-1]:
            assert _eval(st[:4]) == int(st[4])  # each written step is right
    for text in sa.decode(sa.traces(b, g, error_prob=1.0))[:50]:  # every step slips (a final answer may
        for st in text.removesuffix("<eos>").split(";")[:-1]:  # still be right by luck, e.g. after "*0")
            assert _eval(st[:4]) != int(st[4])
    frac = float(sa.reward(sa.traces(b, g, error_prob=0.25), b.answer).mean())
    assert 0.35 < frac < 0.75  # about P(no slip) plus lucky slips; 2-3 steps


def test_reward_parsing_and_bad_input():
    ids = torch.tensor([[sa.ANS, 3, sa.EOS], [1, 2, sa.ANS], [sa.ANS, sa.SEMI, 3]])
    assert sa.answers_of(ids).tolist() == [3, -1, -1]
    assert sa.reward(ids, torch.tensor([3, 0, 3])).tolist() == [1.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="answer"):
        sa.reward(ids, torch.tensor([3]))
    with pytest.raises(ValueError, match="max_ops"):
        sa.sample_problems(3, torch.Generator(), min_ops=3, max_ops=2)
    with pytest.raises(ValueError, match="error_prob"):
        sa.traces(sa.sample_problems(3, torch.Generator()), torch.Generator(), error_prob=1.5)


def test_determinism():
    a = sa.sample_problems(50, torch.Generator().manual_seed(7))
    b = sa.sample_problems(50, torch.Generator().manual_seed(7))
    assert torch.equal(a.prompts, b.prompts) and torch.equal(a.answer, b.answer)
