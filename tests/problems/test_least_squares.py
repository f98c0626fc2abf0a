"""The conditioned least-squares problem: its spectrum, its minimiser and its constants are as documented."""

from __future__ import annotations

import pytest
import torch

from optarium.problems.least_squares import conditioned_least_squares


def test_spectrum_minimiser_and_constants(seed: int) -> None:
    prob = conditioned_least_squares(60, 20, 3.0, 1.0, L=2.0, seed=seed)
    eig = torch.linalg.eigvalsh(prob.A.T @ prob.A / 60)
    assert float(eig[-1]) == pytest.approx(2.0, rel=1e-12)
    assert float(eig[0]) == pytest.approx(prob.mu, rel=1e-10) and prob.mu == pytest.approx(2.0 / 9, rel=1e-12)
    assert prob.L_max == pytest.approx(float((prob.A**2).sum(1).max()), rel=1e-14)
    assert float(prob.gap(prob.x_star)) == 0.0 and float(prob.loss(prob.x_star)) < 1e-25
    x = torch.randn(20, dtype=torch.float64)
    torch.testing.assert_close(prob.loss(x), prob.gap(x), rtol=1e-10, atol=0)
    idx = torch.tensor([0, 5, 7])
    r = prob.A[idx] @ x - prob.b[idx]
    torch.testing.assert_close(prob.loss(x, idx), 0.5 * (r @ r) / 3, rtol=1e-14, atol=0)


def test_seeded_dtype_and_bad_arguments() -> None:
    a = conditioned_least_squares(10, 4, seed=3, dtype=torch.float32)
    b = conditioned_least_squares(10, 4, seed=3, dtype=torch.float32)
    assert a.A.dtype == torch.float32 and torch.equal(a.A, b.A) and torch.equal(a.x_star, b.x_star)
    assert not torch.equal(a.A, conditioned_least_squares(10, 4, seed=4, dtype=torch.float32).A)
    with pytest.raises(ValueError, match=r"^s_min"):
        conditioned_least_squares(10, 4, s_max=1.0, s_min=2.0)
    with pytest.raises(ValueError, match=r"^L"):
        conditioned_least_squares(10, 4, L=0.0)
    with pytest.raises(ValueError, match=r"^n"):
        conditioned_least_squares(0, 4)
