"""A batch in which one element's interior-point KKT matrix turns exactly singular after it has converged.

``data/singular_kkt_batch.pt.gz`` is the (mu, chol, mask) batch of 32 on which the sparse-tangent-portfolio
full run (synthetic n = 50, seed 4, epoch 5) crashed: ``torch.linalg.lu_factor`` raised for batch element 4,
which had already converged while the others iterated, so the whole training unit failed. The interior point
now factors with ``lu_factor_ex`` and freezes such elements; the batch must give what each element gives
alone.
"""

from __future__ import annotations

import gzip
import io
import warnings
from pathlib import Path

import torch

from optarium.soft.sparse_tangent_portfolio import sparse_tangent_weights

DATA = Path(__file__).parent / "data" / "singular_kkt_batch.pt.gz"


def _weights(*args: torch.Tensor) -> torch.Tensor:
    out = sparse_tangent_weights(*args)
    return out[0] if isinstance(out, tuple) else out


def test_a_singular_element_no_longer_fails_the_batch() -> None:
    data = torch.load(io.BytesIO(gzip.decompress(DATA.read_bytes())), weights_only=True)
    mu = data["mu"].clone().requires_grad_(True)
    chol, mask = data["chol"], data["mask"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the min-variance fallback is announced per call
        w = _weights(mu, chol, mask)
        alone = torch.cat(
            [_weights(mu[i : i + 1].detach(), chol[i : i + 1], mask[i : i + 1]) for i in range(32)]
        )
    assert bool(torch.isfinite(w).all())
    torch.testing.assert_close(w.detach(), alone, rtol=0, atol=1e-8)
    w.sum().backward()
    assert mu.grad is not None and bool(torch.isfinite(mu.grad).all())
