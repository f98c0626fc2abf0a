r"""GradPower: feed ``sign(g) * |g|^p`` to any torch optimizer (AdamWPower, MuonPower, ...).

Reference: Mingze Wang, Jinbo Wang, Jiaqi Zhang, Peng Pei, Wei Wang, Xunliang Cai, Weinan E, Lei Wu,
"GradPower: Powering Gradients for Faster Language Model Pre-Training", ICML 2026, arXiv:2505.24275.

Update rule. For every parameter with gradient :math:`g_t`, GradPower replaces the gradient by

.. math::  \tilde g_t = \varphi_p(g_t) = \operatorname{sign}(g_t)\odot|g_t|^{p}

and calls the *unchanged* base optimizer with its *unchanged* hyperparameters. With AdamW as the base
(AdamWPower):

.. math::
    m_t = \beta_1 m_{t-1} + (1-\beta_1)\tilde g_t,\quad
    v_t = \beta_2 v_{t-1} + (1-\beta_2)\tilde g_t^{2},\quad
    \theta_t = \theta_{t-1} - \eta_t\Big(\frac{m_t/(1-\beta_1^t)}{\sqrt{v_t/(1-\beta_2^t)}+\epsilon}
    + \lambda\theta_{t-1}\Big).

``p = 1`` is the identity (bit-for-bit the base optimizer). Adam-type bases with :math:`\epsilon\to 0` stay
invariant to rescaling the loss (the gradient scales by :math:`c^p`); SGD does not.

Design (where the paper is silent; see the module's tests for the checks):

- The wrapper subclasses ``torch.optim.Optimizer`` so LR schedulers accept it, and *shares* the base's
  ``param_groups`` and ``state`` (properties that read the base; no copies), so a scheduler, ``GradScaler``
  and clipping utilities act on the base.
- Inside ``step`` the transformed gradients are swapped into ``param.grad`` for the base's step and the raw
  gradients are put back afterwards, so logging and gradient-norm metrics see raw gradients. Clipping, if any,
  therefore acts on raw gradients before the transform (the user's ``clip_grad_norm_`` then ``step``).
- ``GradScaler`` unscales before it calls ``step``, so the transform sees unscaled gradients, as it must
  (scaled gradients would be multiplied by :math:`S^p`).
- Each param group may carry its own ``"p"``; groups without one get the wrapper's ``p``. ``p`` travels in
  ``state_dict`` with the group.
- A ``closure`` is evaluated once (under ``torch.enable_grad()``) before the transform; the base is then
  stepped without a closure, so bases that must re-evaluate the loss (LBFGS) are not supported.
- Default ``p = 1.2``: the paper's own default could not be read (only its abstract was reachable); 1.2 is
  the value a public write-up of AdamPower uses as its example. Sweep p for your problem.

MuonPower is ``GradPower(Muon(...), p)``: the transform acts on the raw gradient before Muon's momentum (the
"no change to the base optimizer" reading of the paper).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch.optim import Optimizer

from optarium._core.validation import (
    check_betas,
    check_nonnegative,
    check_positive,
    check_type,
)
from optarium.optim._dropin import check_lr
from optarium.optim._nonfinite import check_nonfinite_policy, should_step
from optarium.optim.functional import foreach_sign_power, sign_power

__all__ = ["AdamWPower", "GradPower"]


def _check_p(p: Any, name: str = "p") -> float:
    return check_positive(name, p)


class GradPower(Optimizer):
    """Wrap ``base`` so that every step sees ``sign(g) * |g| ** p`` instead of ``g``.

    Args:
        base: any ``torch.optim.Optimizer`` (AdamW, SGD, Muon, ...). It is wrapped, not copied: the wrapper's
            ``param_groups`` and ``state`` are the base's.
        p: the power, finite and > 0 (default 1.2). A param group's own ``"p"`` overrides it.
        foreach: use ``torch._foreach_*`` kernels for the transform (default ``None``: yes). ``False`` takes
            the per-tensor path; both give identical results.
        nonfinite: ``"raise"`` (default), ``"skip"`` or ``"off"``: what a step with NaN or inf gradients
            does (the optim family's shared policy, :mod:`optarium.optim._nonfinite`).

    Example:
        >>> import torch
        >>> model = torch.nn.Linear(4, 2)
        >>> opt = GradPower(torch.optim.AdamW(model.parameters(), lr=3e-3), p=1.2)
        >>> model(torch.randn(8, 4)).square().mean().backward()
        >>> opt.step()
    """

    def __init__(
        self, base: Optimizer, p: float = 1.2, *, foreach: bool | None = None, nonfinite: str = "raise"
    ) -> None:
        check_type("base", base, Optimizer)
        if isinstance(base, GradPower) or getattr(base, "_optarium_gradpower", False):
            raise ValueError(
                "base: already wrapped by GradPower (the wrappers would share one 'p' per group); "
                "use p = p1 * p2 on a single wrapper, since phi_p(phi_q(g)) = phi_pq(g)"
            )
        p = _check_p(p)
        if foreach is not None:
            check_type("foreach", foreach, bool)
        self._base = base
        base._optarium_gradpower = True  # type: ignore[attr-defined]
        self.foreach = foreach
        self.nonfinite = check_nonfinite_policy(nonfinite)
        self.skipped_steps = 0
        for i, group in enumerate(base.param_groups):
            group["p"] = _check_p(group.get("p", p), f"param_groups[{i}]['p']")
        base.defaults.setdefault("p", p)
        self._optimizer_step_pre_hooks = OrderedDict()
        self._optimizer_step_post_hooks = OrderedDict()
        self._optimizer_state_dict_pre_hooks = OrderedDict()
        self._optimizer_state_dict_post_hooks = OrderedDict()
        self._optimizer_load_state_dict_pre_hooks = OrderedDict()
        self._optimizer_load_state_dict_post_hooks = OrderedDict()
        self._patch_step_function()

    # The wrapper owns no groups or state of its own: both are the base's, read through on every access, so
    # they stay shared even after the base's load_state_dict replaces its lists.
    @property
    def base(self) -> Optimizer:
        """The wrapped optimizer."""
        return self._base

    @property
    def defaults(self) -> dict[str, Any]:  # type: ignore[override]
        """The base's defaults (with ``"p"`` added)."""
        return self._base.defaults

    @defaults.setter
    def defaults(self, value: dict[str, Any]) -> None:
        self._base.defaults = value

    @property
    def param_groups(self) -> list[dict[str, Any]]:  # type: ignore[override]
        """The base's param groups (shared, not copied); each carries ``"p"``."""
        return self._base.param_groups

    @param_groups.setter
    def param_groups(self, value: list[dict[str, Any]]) -> None:
        self._base.param_groups = value

    @property
    def state(self) -> Any:  # type: ignore[override]
        """The base's per-parameter state (shared)."""
        return self._base.state

    @state.setter
    def state(self, value: Any) -> None:
        self._base.state = value

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group to the base; it gets the default ``p`` unless it carries its own."""
        group = dict(param_group)
        group["p"] = _check_p(group.get("p", self.defaults["p"]), "param_group['p']")
        self._base.add_param_group(group)

    def state_dict(self) -> dict[str, Any]:
        """The base's ``state_dict`` (param groups include ``p``); the wrapper's state-dict hooks run."""
        for pre_hook in self._optimizer_state_dict_pre_hooks.values():
            pre_hook(self)
        state_dict = self._base.state_dict()
        for post_hook in self._optimizer_state_dict_post_hooks.values():
            result = post_hook(self, state_dict)
            if result is not None:
                state_dict = result
        return state_dict

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load into the base; every loaded group must carry a valid ``p``; the wrapper's load hooks run."""
        for pre_hook in self._optimizer_load_state_dict_pre_hooks.values():
            result = pre_hook(self, state_dict)
            if result is not None:
                state_dict = result
        for i, group in enumerate(state_dict["param_groups"]):
            _check_p(group.get("p", self.defaults["p"]), f"param_groups[{i}]['p']")
        self._base.load_state_dict(state_dict)
        for group in self._base.param_groups:
            group.setdefault("p", self.defaults["p"])
        for post_hook in self._optimizer_load_state_dict_post_hooks.values():
            post_hook(self)

    def __getstate__(self) -> dict[str, Any]:
        return self.__dict__

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._base!r})"

    @torch.no_grad()
    def _transform(self) -> list[tuple[torch.Tensor, torch.Tensor]] | None:
        """Swap transformed gradients into ``param.grad``; return (param, raw grad) pairs to restore.

        ``None`` means the step is skipped (non-finite gradients under ``nonfinite="skip"``).
        """
        transformed: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
        for group in self._base.param_groups:
            params = [q for q in group["params"] if q.grad is not None]
            if any(q.grad.is_sparse for q in params):
                raise ValueError("grad: GradPower does not support sparse gradients")
            if not params:
                continue
            grads = [q.grad for q in params]
            p = group["p"]
            # complex gradients are transformed as pairs of reals (torch's optimizers treat them so)
            real = [torch.view_as_real(g) if g.is_complex() else g for g in grads]
            new = [sign_power(g, p) for g in real] if self.foreach is False else foreach_sign_power(real, p)
            new = [torch.view_as_complex(n) if g.is_complex() else n for g, n in zip(grads, new, strict=True)]
            transformed.extend(zip(params, grads, new, strict=True))
        # Checked after the transform: it keeps NaN and inf, and |g|^p can overflow a finite gradient (fp16,
        # or float32 beyond ~1e25 at p = 1.5), which must not reach the base optimizer either.
        if not should_step(type(self).__name__, [n for _, _, n in transformed], self.nonfinite):
            self.skipped_steps += 1
            return None
        for q, _, n in transformed:
            q.grad = n
        return [(q, g) for q, g, _ in transformed]

    def step(self, closure: Callable[[], Any] | None = None) -> Any:  # type: ignore[override]
        """Evaluate ``closure`` (if given), transform the gradients, step the base, restore raw gradients.

        Returns the closure's loss, or ``None``.
        """
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        swapped = self._transform()
        if swapped is None:
            return loss
        try:
            self._base_step()
        finally:
            for q, g in swapped:
                q.grad = g
        return loss

    def _base_step(self) -> None:
        """Step the base once. Global step hooks already ran for this (the wrapper's) step, so the base's
        unhooked step is called, with the base's own instance hooks around it: each hook fires once."""
        base = self._base
        raw = getattr(type(base).step, "__wrapped__", None)
        if raw is None:  # a base class whose step torch did not wrap: it runs no hooks of its own
            base.step()
            return
        args: tuple[Any, ...] = (base,)
        kwargs: dict[str, Any] = {}
        for pre_hook in base._optimizer_step_pre_hooks.values():
            result = pre_hook(base, args, kwargs)
            if result is not None:
                args, kwargs = result
        raw(*args, **kwargs)
        base._opt_called = True  # type: ignore[attr-defined]  # what an LR scheduler on the base tracks
        for post_hook in base._optimizer_step_post_hooks.values():
            post_hook(base, args, kwargs)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Zero (or drop) the gradients of the base's parameters."""
        self._base.zero_grad(set_to_none=set_to_none)


class AdamWPower(GradPower):
    r"""AdamW fed with :math:`\operatorname{sign}(g)|g|^p`: ``GradPower(torch.optim.AdamW(...), p)``.

    Arguments are ``torch.optim.AdamW``'s with the same defaults, plus ``p`` (default 1.2) and ``nonfinite``
    (``"raise"`` or ``"skip"``, see :class:`GradPower`). The wrapped
    ``torch.optim.AdamW`` is available as :attr:`base`.

    Example:
        >>> import torch
        >>> model = torch.nn.Linear(4, 2)
        >>> opt = AdamWPower(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1, p=1.2)
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
        *,
        p: float = 1.2,
        maximize: bool = False,
        foreach: bool | None = None,
        capturable: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
        nonfinite: str = "raise",
    ) -> None:
        check_lr(lr)
        betas = check_betas("betas", betas)
        check_nonnegative("eps", eps)
        check_nonnegative("weight_decay", weight_decay)
        for name, flag in (("amsgrad", amsgrad), ("maximize", maximize)):
            check_type(name, flag, bool)
        if differentiable:
            raise ValueError("differentiable: AdamWPower's transform runs under no_grad; not supported")
        base = torch.optim.AdamW(
            params,
            lr=lr,
            betas=betas,
            eps=eps,
            weight_decay=weight_decay,
            amsgrad=amsgrad,
            maximize=maximize,
            foreach=foreach,
            capturable=capturable,
            differentiable=differentiable,
            fused=fused,
        )
        super().__init__(base, p=p, foreach=foreach, nonfinite=nonfinite)
