"""What makes an optarium optimizer a drop-in ``torch.optim.Optimizer`` beyond the update rule.

``torch.optim.Optimizer.__getstate__`` keeps only ``defaults``, ``state`` and ``param_groups``, so settings an
optimizer keeps as instance attributes (``foreach``, ``nonfinite``, ``skipped_steps``, ...) were lost by
``copy.deepcopy`` and ``pickle``, and the copy's ``step()`` raised ``AttributeError``. And torch's own
optimizers fill group keys that older checkpoints lack (``maximize``, ``foreach``, ...) in ``__setstate__``,
which ``load_state_dict`` calls; an optimizer that did not raised ``KeyError`` at the first ``step()`` after
loading, e.g., a ``lion-pytorch`` checkpoint. :class:`DropInOptimizer` does both for every optimizer of the
family, so none can drift:

- attributes named in :attr:`DropInOptimizer.config_attrs` survive pickling and deep copies (hooks do not,
  as in torch: they may be unpicklable closures);
- after ``load_state_dict`` (and unpickling) every group has every key of ``defaults``, missing keys taking
  the instance's defaults.

:func:`check_lr` is the family's learning-rate rule, torch's: finite and ``>= 0`` (``lr=0`` is a valid,
frozen group, as in ``torch.optim``); a tensor ``lr`` is checked by value and returned as is.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch.optim import Optimizer

from optarium._core.validation import check_nonnegative

__all__ = ["DropInOptimizer", "check_lr"]


def check_lr(value: Any, name: str = "lr") -> Any:
    """``value`` if it is a finite learning rate ``>= 0`` (a float or a one-element tensor).

    Otherwise ``ValueError`` naming ``name``.
    """
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise ValueError(f"{name}: a tensor lr must have one element, got shape {tuple(value.shape)}")
        check_nonnegative(name, float(value))
        return value
    return check_nonnegative(name, value)


class DropInOptimizer(Optimizer):
    """Base of the family's optimizers: pickling keeps their settings; loading fills missing group keys.

    Subclasses list the instance attributes that are settings or counters in :attr:`config_attrs`.
    """

    #: Instance attributes kept by ``pickle`` and ``copy.deepcopy`` (in addition to torch's three).
    config_attrs: ClassVar[tuple[str, ...]] = ("foreach", "nonfinite", "skipped_steps")

    def _groups_with_grads(self) -> list[tuple[dict[str, Any], list[Any]]]:
        """``(group, params with a gradient)`` for every group that has one; sparse gradients are refused with
        ``ValueError`` naming ``grad`` and the optimizer (the family's dense-only rule, in one place)."""
        out = []
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if any(p.grad.is_sparse for p in params):
                raise ValueError(f"grad: {type(self).__name__} does not support sparse gradients")
            if params:
                out.append((group, params))
        return out

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        for name in self.config_attrs:
            if name in self.__dict__:
                state[name] = self.__dict__[name]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            for key, value in self.defaults.items():
                group.setdefault(key, value)
