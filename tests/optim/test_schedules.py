"""WSD and cosine learning-rate multipliers."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from optarium.optim import cosine_schedule, wsd_schedule


def test_wsd_shape() -> None:
    f = wsd_schedule(100, 10, decay_start=0.8)
    assert [f(s) for s in range(10)] == pytest.approx([(s + 1) / 10 for s in range(10)])
    assert all(f(s) == 1.0 for s in range(10, 80))
    assert f(90) == pytest.approx(0.5)
    assert f(100) == 0.0
    vals = [f(s) for s in range(80, 101)]
    assert all(a >= b for a, b in itertools.pairwise(vals))


def test_cosine_shape() -> None:
    f = cosine_schedule(110, 10)
    assert f(9) == 1.0
    assert f(10) == pytest.approx(1.0)
    assert f(60) == pytest.approx(0.5)
    assert f(110) == pytest.approx(0.0, abs=1e-15)
    g = cosine_schedule(110, 10, final=0.1)
    assert g(110) == pytest.approx(0.1)
    assert g(60) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi / 2)))


def test_with_lambda_lr() -> None:
    x = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([x], lr=2.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, wsd_schedule(10, 2, decay_start=0.5))
    lrs = []
    for _ in range(10):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert lrs[:2] == pytest.approx([1.0, 2.0]) and lrs[4] == 2.0 and lrs[-1] < lrs[5]


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"total_steps": 0, "warmup_steps": 0}, "total_steps"),
        ({"total_steps": 10, "warmup_steps": 11}, "warmup_steps"),
        ({"total_steps": 10, "warmup_steps": 1, "decay_start": 1.5}, "decay_start"),
    ],
)
def test_bad_arguments(kwargs: dict[str, float], name: str) -> None:
    with pytest.raises(ValueError, match=name):
        wsd_schedule(**kwargs)  # type: ignore[arg-type]
