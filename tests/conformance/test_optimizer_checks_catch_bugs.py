"""The drop-in checks of optarium.testing.optimizers fail on optimizers that have the bugs they look for.

Each broken optimizer below is plain SGD with one defect that torch's own generic optimizer tests catch
(and that optarium's optimizers had before these checks existed).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from optarium.testing import optimizers as conformance


class _SGD(torch.optim.Optimizer):
    def __init__(self, params: Any, lr: float = 1e-2, maximize: bool = False, foreach: Any = None) -> None:
        super().__init__(params, {"lr": lr, "maximize": maximize})

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        for group in self.param_groups:  # what torch.optim.SGD does for checkpoints without the flag
            group.setdefault("maximize", False)

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            sign = 1.0 if group["maximize"] else -1.0
            for p in group["params"]:
                if p.grad is not None:
                    self._update(p, p.grad, sign * group["lr"])
        return loss

    def _update(self, p: torch.Tensor, g: torch.Tensor, alpha: float) -> None:
        p.add_(g, alpha=alpha)


class _KeepsAttribute(_SGD):
    """Keeps a setting as an instance attribute that torch's ``__getstate__`` drops."""

    def __init__(self, params: Any, **kw: Any) -> None:
        self.scale = 1.0
        super().__init__(params, **kw)

    def _update(self, p: torch.Tensor, g: torch.Tensor, alpha: float) -> None:
        p.add_(g, alpha=alpha * self.scale)


class _NeedsEveryGroupKey(_SGD):
    """Reads ``group["maximize"]`` but fills nothing on load."""

    def __setstate__(self, state: dict[str, Any]) -> None:
        torch.optim.Optimizer.__setstate__(self, state)


class _RefusesZeroLR(_SGD):
    def __init__(self, params: Any, lr: float = 1e-2, **kw: Any) -> None:
        if not lr > 0:
            raise ValueError(f"lr: must be > 0, got {lr}")
        super().__init__(params, lr=lr, **kw)


class _RealPartOnly(_SGD):
    def _update(self, p: torch.Tensor, g: torch.Tensor, alpha: float) -> None:
        if p.is_complex():
            p.real.add_(g.real, alpha=alpha)
        else:
            p.add_(g, alpha=alpha)


class _WrapsWithHooksTwice(_SGD):
    """A wrapper that steps its base through the base's hooked ``step`` (global hooks fire twice)."""

    def __init__(self, params: Any, **kw: Any) -> None:
        self.base = _SGD(params, **kw)
        super().__init__(self.base.param_groups[0]["params"], **kw)
        self.param_groups = self.base.param_groups

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        return self.base.step(closure)


def _case(cls: type) -> conformance.OptimizerCase:
    return conformance.OptimizerCase(
        name=cls.__name__, factory=cls, quadratic=(0.1, 10, 1.0), rosenbrock=(1e-3, 10, 10.0)
    )


@pytest.mark.parametrize(
    ("cls", "check", "errors"),
    [
        (_KeepsAttribute, conformance.check_deepcopy_and_pickle, (AttributeError, AssertionError)),
        (_NeedsEveryGroupKey, conformance.check_loads_older_state_dict, (KeyError, AssertionError)),
        (_RefusesZeroLR, conformance.check_zero_lr, (ValueError,)),
        (_RealPartOnly, conformance.check_complex_parameters, (AssertionError,)),
        (_WrapsWithHooksTwice, conformance.check_step_hooks_once, (AssertionError,)),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_check_catches_the_bug(cls: type, check: Callable[..., Any], errors: tuple[type, ...]) -> None:
    with pytest.raises(errors):
        check(_case(cls))
    check(_case(_SGD))  # and the reference passes it


def test_plain_sgd_passes_every_drop_in_check() -> None:
    """The reference passes, so the failures above come from the defects, not from the checks."""
    for check in (
        conformance.check_deepcopy_and_pickle,
        conformance.check_loads_older_state_dict,
        conformance.check_named_parameters,
        conformance.check_state_dict_hooks,
        conformance.check_step_hooks_once,
        conformance.check_zero_lr,
        conformance.check_one_element_loss,
        conformance.check_complex_parameters,
    ):
        check(_case(_SGD))
