r"""SAM-Polyak: Sharpness-Aware Minimization (SAM / USAM) with a stochastic Polyak step size.

Reference: Dimitris Oikonomou, Nicolas Loizou, "Adaptive Sharpness-Aware Minimization with a Polyak-type Step
size: A Theory-Grounded Scheduler", ICML 2026, arXiv:2606.01827. Official package: ``sam-sps`` 1.0.0 (PyPI,
MIT, ``from sam_sps import SAM_SPS``); this module is a reimplementation, checked against it side by side.

Update rule. With the mini-batch loss :math:`f_S` (the same batch for both passes), the sharpness radius
:math:`\rho`, the interpolation :math:`\lambda` between USAM (:math:`\lambda = 0`) and SAM
(:math:`\lambda = 1`), a lower bound :math:`\ell^*` on the batch loss, the cap :math:`\gamma_b` and weight
decay :math:`w`:

.. math::
    g_t = \nabla f_S(x_t),\qquad
    e_t = x_t + \rho\Big(1 - \lambda + \frac{\lambda}{\max(\|g_t\|, 10^{-12})}\Big)\, g_t,

    \tilde g_t = \nabla f_S(e_t),\qquad
    \gamma_t = \min\Big\{\frac{\big[f_S(e_t) - \ell^* - \langle \tilde g_t, e_t - x_t\rangle\big]_+}
        {c\,\max(\|\tilde g_t\|^2, 10^{-12})},\ \gamma_b\Big\},

    x_{t+1} = x_t - \gamma_t\,(\tilde g_t + w\, x_t).

Norms and the inner product run over all parameters of all groups. :math:`\rho = 0` gives SPS_max (Loizou et
al., 2021); the deterministic version is full batch with :math:`\ell^* = f^*` and :math:`\gamma_b = \infty`.
Weight decay is an L2 term added to :math:`\tilde g_t` in the descent only; it is not part of the Polyak
numerator or denominator (as in the package). After each step every group's ``lr`` holds its :math:`\gamma_t`
(as in the package), so logging ``param_groups[0]["lr"]`` logs the step size.

Where this differs from the package, and why:

- ``step`` returns the closure's loss at :math:`x_t` (torch's rule, as ``LBFGS`` does); the package returns
  :math:`f_S(e_t)`, which is kept here as :attr:`SAMPolyak.perturbed_loss`.
- The parameters are restored to :math:`x_t` from a stored copy (bit-exact); the package adds and then
  subtracts the perturbation, which rounds. The cost is one extra parameter-sized buffer during a step.
- Per-tensor norms and inner products are combined in float64 when any parameter is float64, else in
  float32; the package casts everything to float32. The descent is written in place as
  :math:`(1 - \gamma_t w)\,x_t - \gamma_t \tilde g_t` (no temporaries). One step therefore agrees with the
  package's step to float32 rounding, not bitwise (checked over 50 steps from shared iterates).
- Non-finite values: the gradient norm at :math:`x_t` and the Polyak numerator and denominator at :math:`e_t`
  are finite exactly when the gradients (and the loss at :math:`e_t`) are, short of overflow, so the
  family's ``should_step`` check runs only when one of them is not, before :math:`x_t` is perturbed or,
  at :math:`e_t`, after :math:`x_t` has been restored; it raises or skips by the ``nonfinite`` policy.
- Hyperparameters live in the param groups (so ``state_dict`` carries them): ``rho``, ``lambd`` and
  ``weight_decay`` may differ per group (the perturbation norm stays global), and ``gamma_max`` and ``c`` per
  group cap and scale the one global Polyak ratio. ``f_star`` must be the same in every group; a per-batch
  bound can be passed as ``step(closure, f_star=...)``.
- ``f_star`` must be a lower bound on every batch loss (0 for squared, cross-entropy and other
  non-negative losses; the known minimum for a shifted loss; for a negative log-likelihood of densities,
  which can be negative, a bound such as minus the sum of the log-density maxima). A loss at :math:`e_t`
  below ``f_star`` would make the Polyak gap negative and freeze the iterate without a word (the package's
  behaviour), so ``step`` raises ``ValueError`` naming ``f_star`` instead, with the parameters restored to
  :math:`x_t`. A negative gap with the loss above ``f_star`` (the sharpness term
  :math:`\langle\tilde g_t, e_t - x_t\rangle` exceeding the loss gap) is the method's rule:
  :math:`\gamma_t = 0`.
- Complex parameters are treated as pairs of reals (as torch's optimizers do): inner products are
  :math:`\operatorname{Re}\langle u, v\rangle` over ``torch.view_as_real``.
- ``c`` (our choice, from SPS): :math:`\gamma = \text{gap} / (c\,\|\tilde g\|^2)`; ``c = 1`` is the package.
- Both passes start from ``zero_grad(set_to_none=True)`` (as in the package), so a closure need not zero the
  gradients itself; after the step ``p.grad`` holds :math:`\tilde g_t` (without weight decay).
- The incoming ``lr`` of a group is not read: the Polyak step replaces the learning rate. An LR scheduler can
  be attached (it sees ``lr`` and ``initial_lr`` as usual) but does not change the step; schedule
  ``gamma_max`` or ``rho`` by writing to the group instead.

Limitations: for :math:`\lambda = 1` and fixed :math:`\rho` the gap turns negative within a distance of order
:math:`\rho` of a minimiser, :math:`\gamma_t = 0` and the iterate freezes (the paper's theory is for
:math:`\lambda = 0` with :math:`\rho \le 1/L`, where :math:`L` is the smoothness of the *batch* loss). There
is no ``maximize`` (torch has no SAM to mirror) and no momentum (the package has none).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch

from optarium._core.validation import (
    check_finite,
    check_in_range,
    check_nonnegative,
    check_positive,
    check_type,
)
from optarium.optim._dropin import DropInOptimizer
from optarium.optim._nonfinite import check_nonfinite_policy, should_step

_HALF = (torch.float16, torch.bfloat16)

__all__ = ["SAM_SPS", "SAMPolyak"]

#: The floor of the perturbation norm and of the Polyak denominator (as in the package).
_EPS = 1e-12

_GROUP_KEYS = ("rho", "lambd", "f_star", "gamma_max", "c", "weight_decay")


def _check_group(group: dict[str, Any], where: str) -> None:
    group["rho"] = check_nonnegative(f"{where}rho", group["rho"])
    group["lambd"] = check_in_range(f"{where}lambd", group["lambd"], 0.0, 1.0)
    group["f_star"] = check_finite(f"{where}f_star", group["f_star"])
    group["gamma_max"] = check_positive(f"{where}gamma_max", group["gamma_max"], allow_inf=True)
    group["c"] = check_positive(f"{where}c", group["c"])
    group["weight_decay"] = check_nonnegative(f"{where}weight_decay", group["weight_decay"])


class SAMPolyak(DropInOptimizer):
    r"""SAM / USAM with the stochastic Polyak step size of Oikonomou & Loizou (ICML 2026).

    Each ``step(closure)`` evaluates the closure twice: at :math:`x_t` and at the ascent point :math:`e_t`.
    See the module docstring for the update rule and the deviations from the authors' package.

    Args:
        params: parameters or param-group dicts.
        rho: sharpness radius :math:`\rho \ge 0` (default 0.1). Keep :math:`\rho \le 1/L` of the batch loss
            for :math:`\lambda = 0`.
        lambd: :math:`\lambda \in [0, 1]`: 0 is USAM (unnormalised ascent), 1 is SAM (default 1).
        f_star: lower bound :math:`\ell^*` on every batch loss (default 0, for non-negative losses); a loss
            below it raises ``ValueError`` (see the module docstring for how to set it).
        gamma_max: the cap :math:`\gamma_b > 0` (default 1; ``math.inf`` for no cap).
        c: the SPS constant :math:`c > 0` (default 1, the package's rule).
        weight_decay: L2 coefficient added to the gradient at :math:`e_t` in the descent (default 5e-4).
        foreach: use ``torch._foreach_*`` kernels (default ``None``: yes); ``False`` takes the per-tensor
            path.
        nonfinite: ``"raise"`` (default), ``"skip"`` or ``"off"`` for NaN/inf gradients (at either point) or a
            non-finite loss at :math:`e_t`; see :mod:`optarium.optim._nonfinite`.

    Attributes:
        skipped_steps: steps skipped under ``nonfinite="skip"``.
        perturbed_loss: the loss at :math:`e_t` of the last step (detached), or ``None``.

    Example:
        >>> import torch
        >>> model = torch.nn.Linear(4, 1)
        >>> opt = SAMPolyak(model.parameters(), rho=0.05, lambd=1.0)
        >>> x, y = torch.randn(16, 4), torch.randn(16, 1)
        >>> def closure():
        ...     opt.zero_grad()
        ...     loss = torch.nn.functional.mse_loss(model(x), y)
        ...     loss.backward()
        ...     return loss
        >>> loss = opt.step(closure)
        >>> gamma = opt.param_groups[0]["lr"]
    """

    def __init__(
        self,
        params: Iterable[Any],
        rho: float = 0.1,
        lambd: float = 1.0,
        f_star: float = 0.0,
        gamma_max: float = 1.0,
        c: float = 1.0,
        weight_decay: float = 5e-4,
        *,
        foreach: bool | None = None,
        nonfinite: str = "raise",
    ) -> None:
        defaults = {
            "rho": rho,
            "lambd": lambd,
            "f_star": f_star,
            "gamma_max": gamma_max,
            "c": c,
            "weight_decay": weight_decay,
        }
        _check_group(defaults, "")
        defaults["lr"] = defaults["gamma_max"]  # overwritten by gamma_t after every step (as in the package)
        if foreach is not None:
            check_type("foreach", foreach, bool)
        self.foreach = foreach
        self.nonfinite = check_nonfinite_policy(nonfinite)
        self.skipped_steps = 0
        self.perturbed_loss: torch.Tensor | None = None
        super().__init__(params, defaults)

    config_attrs = ("foreach", "nonfinite", "skipped_steps", "perturbed_loss")

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group; its own ``rho``, ``lambd``, ``gamma_max``, ``c``, ``weight_decay`` are validated."""
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        _check_group(group, "")
        if group["f_star"] != self.param_groups[0]["f_star"]:
            raise ValueError(
                f"f_star: must be the same in every param group, got {group['f_star']!r} and "
                f"{self.param_groups[0]['f_star']!r} (pass a per-batch bound as step(closure, f_star=...))"
            )

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load groups and (empty) state; every loaded group's hyperparameters are validated."""
        for i, group in enumerate(state_dict["param_groups"]):
            _check_group({k: group.get(k, self.defaults[k]) for k in _GROUP_KEYS}, f"param_groups[{i}].")
        super().load_state_dict(state_dict)

    # -- helpers ------------------------------------------------------------------------------------------

    def _norms(self, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        # half-precision norms are accumulated and returned in float32: an fp16 norm overflows at 65504
        if self.foreach is False or any(t.dtype in _HALF for t in tensors):
            return [
                torch.linalg.vector_norm(t, dtype=torch.float32 if t.dtype in _HALF else None)
                for t in tensors
            ]
        return list(torch._foreach_norm(tensors))

    @staticmethod
    def _dots(a: list[torch.Tensor], b: list[torch.Tensor]) -> list[torch.Tensor]:
        # A reduction per tensor without temporaries (there is no foreach dot); the same on both paths.
        # Complex tensors count as pairs of reals: Re<x, y> is the dot product of their real views.
        a = [torch.view_as_real(x) if x.is_complex() else x for x in a]
        b = [torch.view_as_real(y) if y.is_complex() else y for y in b]
        return [
            torch.dot(x.reshape(-1).float(), y.reshape(-1).float())
            if x.dtype in _HALF
            else torch.dot(x.reshape(-1), y.reshape(-1))
            for x, y in zip(a, b, strict=True)
        ]

    @staticmethod
    def _combine(values: list[torch.Tensor], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        if all(v.dtype == dtype and v.device == device for v in values):
            return torch.stack(values)
        return torch.stack([v.to(device=device, dtype=dtype) for v in values])

    def _restore(self, params: list[torch.Tensor], saved: list[torch.Tensor]) -> None:
        if self.foreach is False:
            for p, x in zip(params, saved, strict=True):
                p.copy_(x)
        else:
            torch._foreach_copy_(params, saved)

    # -- the step -----------------------------------------------------------------------------------------

    def step(  # type: ignore[override]
        self, closure: Callable[[], Any] | None = None, *, f_star: float | None = None
    ) -> Any:
        """One SAM-Polyak step: two closure evaluations, the Polyak step size, the descent from :math:`x_t`.

        Args:
            closure: re-evaluates the loss on the current batch (forward and backward) and returns it. It is
                called twice, under ``torch.enable_grad()``, each time after ``zero_grad(set_to_none=True)``.
                Required.
            f_star: a lower bound on this batch's loss for this step only (default: the groups' ``f_star``).

        Returns:
            The closure's loss at :math:`x_t` (the first evaluation). The loss at :math:`e_t` is kept in
            :attr:`perturbed_loss` and :math:`\\gamma_t` in every group's ``lr``.
        """
        if closure is None:
            raise ValueError(
                f"closure: {type(self).__name__}.step() requires a closure that re-evaluates the loss "
                "(forward, backward, return the loss); it is evaluated at x_t and at the ascent point"
            )
        if f_star is None:
            f_star = self.param_groups[0]["f_star"]
            if any(g["f_star"] != f_star for g in self.param_groups):
                raise ValueError("f_star: must be the same in every param group")
        else:
            f_star = check_finite("f_star", f_star)

        # Pass 1: gradients at x_t.
        self.zero_grad(set_to_none=True)
        with torch.enable_grad():
            loss = closure()

        groups = self._groups_with_grads()
        params_all = [p for _, ps in groups for p in ps]
        if not params_all:
            return loss
        grads_x = [p.grad for p in params_all]
        name = type(self).__name__
        device = params_all[0].device
        wide = (torch.float64, torch.complex128)
        acc = torch.float64 if any(p.dtype in wide for p in params_all) else torch.float32
        norm_x = float(torch.linalg.vector_norm(self._combine(self._norms(grads_x), acc, device)))
        # The norm is finite exactly when every gradient is (short of overflow), so the family's check runs
        # only when it is not: it raises or skips by the policy, before any parameter or state is touched.
        if not math.isfinite(norm_x) and not should_step(name, grads_x, self.nonfinite):
            self.skipped_steps += 1
            return loss
        norm_x = max(norm_x, _EPS)
        scales = {
            id(group): group["rho"] * ((1.0 - group["lambd"]) + group["lambd"] / norm_x)
            for group, _ in groups
        }

        with torch.no_grad():
            saved = [p.detach().clone() for p in params_all]
            for group, params in groups:
                gx = [p.grad for p in params]
                if self.foreach is False:
                    for p, g in zip(params, gx, strict=True):
                        p.add_(g, alpha=scales[id(group)])
                else:
                    torch._foreach_add_(params, gx, alpha=scales[id(group)])

        # Pass 2: gradients at e_t (the first-pass gradients stay alive in grads_x).
        try:
            self.zero_grad(set_to_none=True)
            with torch.enable_grad():
                loss_e = closure()
        finally:
            with torch.no_grad():
                self._restore(params_all, saved)
        del saved

        grads_e = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params_all]
        loss_e_t = _scalar_loss(loss_e)
        self.perturbed_loss = loss_e_t

        # Polyak step size at e_t; <g_e, e_t - x_t> = sum over tensors of scale_group * <g_e, g_x>.
        per_tensor_scale = torch.tensor(
            [scales[id(group)] for group, params in groups for _ in params], dtype=acc, device=device
        )
        dot = (self._combine(self._dots(grads_e, grads_x), acc, device) * per_tensor_scale).sum()
        den = self._combine(self._norms(grads_e), acc, device).square().sum()
        num = loss_e_t.to(device=device, dtype=acc) - f_star - dot
        loss_acc = loss_e_t.to(device=device, dtype=acc)
        num_f, den_f, loss_f = torch.stack([num, den, loss_acc]).tolist()  # one synchronisation
        if not (math.isfinite(num_f) and math.isfinite(den_f)):
            # non-finite gradients at e_t or a non-finite loss there: the shared policy decides
            checked = [*grads_e, loss_e_t.to(device=device, dtype=acc).reshape(1)]
            if not should_step(name, checked, self.nonfinite):
                self.skipped_steps += 1
                return loss
        # below the bound by more than rounding (near a minimiser a loss may round a few ulps under f*)
        if loss_f < f_star - 16 * torch.finfo(acc).eps * max(1.0, abs(f_star)):
            raise ValueError(
                f"f_star: the loss at the ascent point, {loss_f!r}, is below f_star = {f_star!r}; the Polyak "
                "step needs a lower bound on every batch loss (set f_star below the losses, e.g. the known "
                "minimum, or pass step(closure, f_star=...)); the parameters were left at x_t"
            )
        ratio = num_f / max(den_f, _EPS)

        with torch.no_grad():
            for group, params in groups:
                gamma = max(0.0, min(ratio / group["c"], group["gamma_max"]))
                group["lr"] = gamma
                if gamma == 0.0:
                    continue  # a non-positive gap: the parameters do not move
                ge = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
                wd = group["weight_decay"]
                # x - gamma (g_e + wd x) as (1 - gamma wd) x - gamma g_e: in place, no temporaries.
                if self.foreach is False:
                    for p, g in zip(params, ge, strict=True):
                        if wd != 0.0:
                            p.mul_(1.0 - gamma * wd)
                        p.add_(g, alpha=-gamma)
                else:
                    if wd != 0.0:
                        torch._foreach_mul_(params, 1.0 - gamma * wd)
                    torch._foreach_add_(params, ge, alpha=-gamma)
        for group in self.param_groups:
            if not any(group is g for g, _ in groups):
                group["lr"] = max(0.0, min(ratio / group["c"], group["gamma_max"]))
        return loss


def _scalar_loss(loss: Any) -> torch.Tensor:
    """The closure's loss as a detached 0-d tensor; a one-element loss of any shape (e.g. ``[1]``) is fine."""
    value = torch.as_tensor(loss.detach() if isinstance(loss, torch.Tensor) else loss)
    if value.numel() != 1:
        raise ValueError(f"closure: must return a scalar loss, got shape {tuple(value.shape)}")
    if value.is_complex():
        raise ValueError("closure: must return a real loss, got a complex one")
    return value.reshape(())


#: The package's name for the same optimizer.
SAM_SPS = SAMPolyak
