"""DropInOptimizer._groups_with_grads: sparse gradients are refused, naming grad and the optimizer."""

import pytest
import torch

from optarium.optim import ClipSGD, MirrorDescent, ReWA, SAMPolyak


@pytest.mark.parametrize("cls", [ClipSGD, ReWA, MirrorDescent, SAMPolyak])
def test_sparse_gradient_is_refused_before_anything_moves(cls: type) -> None:
    p = torch.zeros(3, requires_grad=True)
    opt = cls([p], lr=0.1) if cls is not SAMPolyak else cls([p])

    def closure() -> torch.Tensor:
        p.grad = torch.ones(3).to_sparse()
        return torch.tensor(1.0)

    p.grad = torch.ones(3).to_sparse()
    with pytest.raises(ValueError, match=rf"^grad: {cls.__name__} does not support sparse gradients"):
        opt.step(closure)
    assert torch.equal(p.detach(), torch.zeros(3))
