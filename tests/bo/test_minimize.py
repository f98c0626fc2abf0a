"""minimize(): the plain loop returns a Result with the best point, history and stopping status."""

from __future__ import annotations

import pytest
import torch

from optarium._core.result import Result
from optarium.bo.minimize import minimize
from optarium.bo.turbo_enn import TurboENN

DT = torch.float64
BOX = torch.tensor([[-2.0, -2.0], [2.0, 2.0]], dtype=DT)


def f(x: torch.Tensor) -> torch.Tensor:
    return ((x - 0.5) ** 2).sum(-1)


def test_returns_the_best_evaluation_and_a_history() -> None:
    res = minimize(f, BOX, 40, "turbo-enn", batch_size=4, progress=False)
    assert isinstance(res, Result) and res.status == "max_iter" and res.n_iter == 10
    Y = res.extras["Y"]
    assert len(Y) == 40 and res.value == float(Y.min())
    torch.testing.assert_close(res.x, res.extras["X"][Y.argmin()])
    best = res.history.metrics["best"]
    assert list(best) == sorted(best, reverse=True) and best[-1] == res.value
    assert res.history.metrics["evaluations"][-1] == 40 and res.value < 0.5


def test_budget_cut_target_progress_and_unbatched_f() -> None:
    res = minimize(lambda x: float(f(x.unsqueeze(0))), BOX, 10, "random", batch_size=4, batched=False)
    assert len(res.extras["Y"]) == 10 and res.n_iter == 3  # 4 + 4 + 2, progress bar on
    res = minimize(
        f, BOX, 200, TurboENN(BOX, batch_size=2, seed=0), batch_size=2, progress=False, target=0.05
    )
    assert res.status == "converged" and res.value <= 0.05 and len(res.extras["Y"]) < 200


def test_bad_input() -> None:
    with pytest.raises(ValueError, match=r"^budget"):
        minimize(f, BOX, 0, progress=False)
    with pytest.raises(ValueError, match=r"^strategy"):
        minimize(f, BOX, 5, "nope", progress=False)
    with pytest.raises(ValueError, match=r"^strategy"):
        minimize(f, BOX, 5, TurboENN(BOX, minimize=False), progress=False)
    with pytest.raises(ValueError, match=r"^bounds"):
        minimize(f, BOX, 5, TurboENN(BOX * 2), progress=False)
    with pytest.raises(ValueError, match=r"^f"):
        minimize(lambda x: torch.zeros(1), BOX, 4, "random", batch_size=2, progress=False)
