r"""ReWA: sparse training by Reparameterization, Weight decay and an Adaptive learning rate.

Reference: Huangyu Xu, Jingqin Yang, Qianqian Xu, Jiaye Teng, "Theoretical Analysis of Sparse Optimization
with Reparameterization, Weight Decay, and Adaptive Learning Rate", ICML 2026, arXiv:2605.25134. The update
rules below were restated from the paper's Algorithms 1-2 as written in its public repository
(github.com/childofcuriosity/rewa, read only, nothing copied).

Update rule. The network keeps its ordinary weight :math:`x`; the optimizer works on a hidden variable
:math:`y`, linked elementwise by

.. math::  x = \operatorname{sign}(y)\,|y|^{K}, \qquad y = \operatorname{sign}(x)\,|x|^{1/K}\qquad(K>0),

and recomputes :math:`y` from :math:`x` at every step (no state beyond the base optimizer's buffers). With
:math:`g = \partial f/\partial x` from backprop and :math:`u = K|y|^{K-1} = dx/dy`, the adaptive scale is

.. math::  s = |y|^{M}\,\frac{u}{u+\varepsilon}\quad(\varepsilon>0), \qquad s = |y|^{M}\quad(\varepsilon=0),

so the step on :math:`y` is :math:`\eta\,\frac{|y|^M}{K|y|^{K-1}+\varepsilon}\,\frac{\partial f}{\partial y}
= \eta\, g\, s` (the paper's "adaptive learning rate" :math:`\eta\, y^M/(y^{K-1}+\varepsilon)`).

- SGD base (Algorithm 1): :math:`d = g\odot s + \kappa y`, :math:`b \leftarrow \mu b + d`,
  :math:`y \leftarrow y - \eta b`; weight decay acts on :math:`y`, not on :math:`x`.
- AdamW base (Algorithm 2): :math:`y \leftarrow (1-\eta\kappa) y`; Adam moments with bias correction on
  :math:`G = g\odot s`; :math:`y \leftarrow y - \eta\,\hat m/(\sqrt{\hat v}+\epsilon_{\rm adam})`.

Then :math:`x \leftarrow \operatorname{sign}(y)|y|^{K}` is written back into the parameter.

Defaults follow the repository's CIFAR-10 recommendation: ``order`` :math:`K = 9`, ``adapt_exp``
:math:`M = 2`, ``eps`` :math:`\varepsilon = 0` (the README suggests :math:`\varepsilon > 0` for harder data),
``weight_decay`` :math:`\kappa = 10^{-4}`, momentum 0.9, betas (0.9, 0.999), Adam eps 1e-8. The README gives
:math:`0 \le M < K-1`; :math:`M \ge K-1` is accepted with a warning.

Link to :math:`\ell_p` (our derivation, not a statement quoted from the paper). With :math:`\varepsilon = 0` a
fixed point of the SGD base satisfies :math:`|y|^M g + \kappa y = 0`, i.e.
:math:`g = -\kappa\,\operatorname{sign}(x)|x|^{(1-M)/K}`: the stationarity condition of
:math:`f(x) + \lambda\sum_i|x_i|^p` with :math:`p = (K+1-M)/K` and :math:`\lambda = \kappa/p`
(:meth:`ReWA.lp_equivalent`). :math:`K = 9, M = 2` gives :math:`p = 8/9`; :math:`M = 1` gives :math:`\ell_1`.
The penalty's gradient in :math:`y` is :math:`\kappa y`, bounded, where direct :math:`\ell_p` has the
unbounded :math:`|x|^{p-1}` near 0. The AdamW base normalises the step, so the mapping does not carry over
exactly.

Design choices (where the paper is silent; each is checked in ``tests/optim/test_rewa.py``):

- ``eps = 0`` computes :math:`s = |y|^M` directly, never :math:`u/(u+0)` (0/0 at :math:`y=0`); ``eps > 0``
  computes :math:`u/(u+\varepsilon)` as :math:`1/(1+\varepsilon/u)`, finite for every :math:`K` (at
  :math:`y = 0` it is 0 for :math:`K>1`).
- For :math:`M>0` the scale vanishes at :math:`y = 0`: a coordinate at 0 with an empty optimizer state
  never moves again (the sparsity mechanism), and a parameter initialised to exactly 0 never trains.
  ``exclude`` (default ``"1d"``: every parameter with fewer than two dimensions, i.e. biases and
  normalisation scales and shifts, some of which are zero-initialised) moves such parameters into a plain
  base-optimizer group (``"rewa": False``, ``weight_decay`` 0) split off right after the group they came
  from, so ``param_groups`` may be longer than the groups passed in (a ``LambdaLR`` with one lambda per
  group must count the split groups). ``exclude=None`` applies ReWA to every parameter;
  a callable ``exclude(param) -> bool`` chooses per parameter. A group passed with ``"rewa": False`` is a
  plain SGD (coupled decay, as ``torch.optim.SGD``) or AdamW group. Constructing ReWA over an all-zero
  ReWA parameter with :math:`M > 0` warns.
- Sign trap: since :math:`s\to 0` as :math:`y\to 0`, :math:`y` cannot change sign in the small-step limit; a
  weight that starts with the wrong sign goes to 0 unless a large (momentum) step jumps over 0.
- Momentum buffer, dampening-free, initialised to the first direction (as ``torch.optim.SGD``); with
  :math:`K = 1, M = 0, \varepsilon = 0` ReWA is exactly ``torch.optim.SGD(..., weight_decay=kappa)`` or
  ``torch.optim.AdamW(..., weight_decay=kappa)``.
- ``maximize`` negates :math:`g`, as torch's SGD/AdamW do.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import torch

from optarium._core.validation import (
    check_betas,
    check_choice,
    check_in_range,
    check_nonnegative,
    check_positive,
    check_type,
)
from optarium.optim._dropin import DropInOptimizer, check_lr
from optarium.optim._nonfinite import check_nonfinite_policy, should_step
from optarium.optim.functional import foreach_sign_power, sign_power

__all__ = ["ReWA", "from_hidden", "to_hidden"]

BASES: tuple[str, ...] = ("sgd", "adamw")
ExcludeRule = Callable[[torch.Tensor], bool] | str | None


def to_hidden(x: torch.Tensor, order: float) -> torch.Tensor:
    """The hidden variable ``y = sign(x) * |x| ** (1 / order)`` (new tensor, ``x``'s dtype and device)."""
    return sign_power(x, 1.0 / check_positive("order", order))


def from_hidden(y: torch.Tensor, order: float) -> torch.Tensor:
    """The weight ``x = sign(y) * |y| ** order`` (new tensor, ``y``'s dtype and device)."""
    return sign_power(y, check_positive("order", order))


def _scale(y: torch.Tensor, order: float, adapt_exp: float, eps: float) -> torch.Tensor | None:
    """``|y|^M * u / (u + eps)`` with ``u = K |y|^(K-1)``; ``None`` when it is identically 1."""
    if adapt_exp == 0.0 and eps == 0.0:
        return None
    ay = y.abs()
    s = ay.pow(adapt_exp) if adapt_exp != 0.0 else None
    if eps > 0.0:
        f = ay.pow_(order - 1.0).mul_(order).reciprocal_().mul_(eps).add_(1.0).reciprocal_()
        s = f if s is None else s.mul_(f)
    return s


def _foreach_scale(
    ys: list[torch.Tensor], order: float, adapt_exp: float, eps: float
) -> list[torch.Tensor] | None:
    if adapt_exp == 0.0 and eps == 0.0:
        return None
    ay = torch._foreach_abs(ys)
    s = torch._foreach_pow(ay, adapt_exp) if adapt_exp != 0.0 else None
    if eps > 0.0:
        torch._foreach_pow_(ay, order - 1.0)
        torch._foreach_mul_(ay, order)
        torch._foreach_reciprocal_(ay)
        torch._foreach_mul_(ay, eps)
        torch._foreach_add_(ay, 1.0)
        torch._foreach_reciprocal_(ay)
        if s is None:
            s = ay
        else:
            torch._foreach_mul_(s, ay)
    return s


def _exclude_1d(p: torch.Tensor) -> bool:
    return p.ndim < 2


class ReWA(DropInOptimizer):
    r"""ReWA (Xu et al., ICML 2026): optimise :math:`y` with :math:`x = \operatorname{sign}(y)|y|^K`, weight
    decay on :math:`y` and the adaptive scale :math:`|y|^M u/(u+\varepsilon)`, over an SGD or AdamW base.

    Args:
        params: parameters or param groups. A group may set any hyperparameter below and ``"rewa"`` (bool;
            ``False`` makes it a plain SGD/AdamW group).
        lr: learning rate :math:`\eta` (>= 0), on the :math:`y` scale (:math:`|y| = |x|^{1/K}` is large for
            small weights: :math:`x = 10^{-3}` gives :math:`y \approx 0.46` at :math:`K = 9`).
        order: :math:`K > 0` (default 9).
        adapt_exp: :math:`M \ge 0` (default 2); :math:`M \ge K-1` warns (outside the README's range).
        eps: :math:`\varepsilon \ge 0` of the adaptive scale (default 0).
        weight_decay: :math:`\kappa \ge 0`, acting on :math:`y` (default 1e-4).
        base: ``"sgd"`` (Algorithm 1) or ``"adamw"`` (Algorithm 2).
        momentum: :math:`\mu \in [0, 1)` of the SGD base (default 0.9).
        betas: Adam's :math:`(\beta_1, \beta_2)` (default (0.9, 0.999)).
        adam_eps: Adam's denominator epsilon (default 1e-8).
        maximize: maximise the objective instead (negates the gradient).
        exclude: which parameters skip ReWA and go to a plain split-off group: ``"1d"`` (default: fewer than
            two dimensions, i.e. biases and normalisation parameters), ``None`` (none) or a callable
            ``exclude(param) -> bool``.
        foreach: use ``torch._foreach_*`` kernels (default ``None``: yes); ``False`` takes the per-tensor
            path.
        nonfinite: ``"raise"`` (default), ``"skip"`` or ``"off"`` for steps with NaN or inf gradients.

    Example:
        >>> import torch
        >>> model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
        >>> opt = ReWA(model.parameters(), lr=0.05, weight_decay=1e-3, base="sgd", momentum=0.9)
        >>> model(torch.randn(4, 8)).square().mean().backward()
        >>> opt.step()
        >>> 0.0 <= opt.sparsity(1e-3) <= 1.0
        True
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 0.1,
        order: float = 9.0,
        adapt_exp: float = 2.0,
        eps: float = 0.0,
        weight_decay: float = 1e-4,
        base: str = "sgd",
        momentum: float = 0.9,
        betas: tuple[float, float] = (0.9, 0.999),
        adam_eps: float = 1e-8,
        *,
        maximize: bool = False,
        exclude: ExcludeRule = "1d",
        foreach: bool | None = None,
        nonfinite: str = "raise",
    ) -> None:
        if exclude is not None and not callable(exclude):
            check_choice("exclude", exclude, ("1d",))
        if foreach is not None:
            check_type("foreach", foreach, bool)
        self._exclude: Callable[[torch.Tensor], bool] | None = (
            _exclude_1d if exclude == "1d" else exclude  # type: ignore[assignment]
        )
        self.foreach = foreach
        self.nonfinite = check_nonfinite_policy(nonfinite)
        self.skipped_steps = 0
        defaults = {
            "lr": lr,
            "order": order,
            "adapt_exp": adapt_exp,
            "eps": eps,
            "weight_decay": weight_decay,
            "base": base,
            "momentum": momentum,
            "betas": betas,
            "adam_eps": adam_eps,
            "maximize": maximize,
            "rewa": True,
        }
        self._validate(defaults, "")
        super().__init__(params, defaults)

    @staticmethod
    def _validate(group: dict[str, Any], where: str) -> None:
        check_lr(group["lr"], f"{where}lr")
        order = check_positive(f"{where}order", group["order"])
        adapt_exp = check_nonnegative(f"{where}adapt_exp", group["adapt_exp"])
        check_nonnegative(f"{where}eps", group["eps"])
        check_nonnegative(f"{where}weight_decay", group["weight_decay"])
        check_choice(f"{where}base", group["base"], BASES)
        check_in_range(f"{where}momentum", group["momentum"], 0.0, 1.0, high_inclusive=False)
        group["betas"] = check_betas(f"{where}betas", group["betas"])
        check_nonnegative(f"{where}adam_eps", group["adam_eps"])
        check_type(f"{where}maximize", group["maximize"], bool)
        check_type(f"{where}rewa", group["rewa"], bool)
        if group["rewa"] and adapt_exp >= order - 1.0 and adapt_exp > 0.0:
            warnings.warn(
                f"{where}adapt_exp: M = {adapt_exp} >= order - 1 = {order - 1.0}; the ReWA README "
                "recommends 0 <= M < K - 1",
                stacklevel=4,
            )

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group (validated); parameters that ``exclude`` selects go to a plain group right after it."""
        group = dict(param_group)
        params = group["params"]
        params = [params] if isinstance(params, torch.Tensor) else list(params)
        # named_parameters() gives (name, tensor) pairs: split on the tensors, keep each name with its tensor
        tensors = [q[1] if isinstance(q, tuple) else q for q in params]
        for key, value in self.defaults.items():
            group.setdefault(key, value)
        self._validate(group, f"param_groups[{len(self.param_groups)}].")
        if group["rewa"] and any(isinstance(q, torch.Tensor) and q.is_complex() for q in tensors):
            raise ValueError(
                "params: ReWA does not support complex parameters (its reparameterisation |x|^(1/K) is "
                "defined for real weights); put them in a group with 'rewa': False or another optimizer"
            )
        kept, moved = params, []
        if group["rewa"] and self._exclude is not None:
            excluded = [self._exclude(q) for q in tensors]
            kept = [q for q, e in zip(params, excluded, strict=True) if not e]
            moved = [q for q, e in zip(params, excluded, strict=True) if e]
        if group["rewa"] and group["adapt_exp"] > 0.0:
            for p in (q[1] if isinstance(q, tuple) else q for q in kept):
                if p.numel() > 0 and not bool(p.detach().any()):
                    warnings.warn(
                        "params: a ReWA parameter is all zero and adapt_exp > 0, so it can never move; "
                        "exclude it (exclude=...) or put it in a group with 'rewa': False",
                        stacklevel=3,
                    )
                    break
        if kept or not moved:
            super().add_param_group({**group, "params": kept})
        if moved:
            super().add_param_group({**group, "params": moved, "rewa": False, "weight_decay": 0.0})

    config_attrs = ("_exclude", "foreach", "nonfinite", "skipped_steps")

    def lp_equivalent(self, group: int = 0) -> dict[str, float]:
        r"""The :math:`\ell_p` problem whose stationary points are the ``eps = 0`` SGD fixed points.

        Returns ``{"p": (K + 1 - M) / K, "lambda": weight_decay / p}`` for param group ``group``: a fixed
        point of Algorithm 1 with :math:`\varepsilon = 0` is a stationary point of
        :math:`f(x) + \lambda\sum_i |x_i|^p` (our derivation, see the module docstring). Exact for the SGD
        base with ``eps = 0``; a guide otherwise.
        """
        g = self.param_groups[group]
        p = (g["order"] + 1.0 - g["adapt_exp"]) / g["order"]
        return {"p": p, "lambda": g["weight_decay"] / p if p > 0 else math.inf}

    @torch.no_grad()
    def sparsity(self, threshold: float = 1e-4) -> float:
        """Fraction of the ReWA groups' weights with ``|x| <= threshold`` (0.0 when there are none)."""
        threshold = check_nonnegative("threshold", threshold)
        small, total = 0, 0
        for group in self.param_groups:
            if not group["rewa"]:
                continue
            for p in group["params"]:
                small += int((p.detach().abs() <= threshold).sum())
                total += p.numel()
        return small / total if total else 0.0

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:  # type: ignore[override]
        """One ReWA step over every group; returns the closure's loss (evaluated under grad), or ``None``."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        work = self._groups_with_grads()
        if not should_step(type(self).__name__, [p.grad for _, ps in work for p in ps], self.nonfinite):
            self.skipped_steps += 1
            return loss
        for group, params in work:
            if self.foreach is False:
                for p in params:
                    self._step_tensor(group, p)
            else:
                self._step_foreach(group, params)
        return loss

    # -- per-tensor path --------------------------------------------------------------------------
    def _step_tensor(self, group: dict[str, Any], p: torch.Tensor) -> None:
        lr = float(group["lr"])
        kappa = group["weight_decay"]
        rewa = group["rewa"]
        order = group["order"]
        g = -p.grad if group["maximize"] else p.grad
        y = to_hidden(p, order) if rewa else p.clone()
        s = _scale(y, order, group["adapt_exp"], group["eps"]) if rewa else None
        d = g.mul(s) if s is not None else g.clone()
        state = self.state[p]
        if group["base"] == "sgd":
            if kappa != 0.0:
                d.add_(y, alpha=kappa)
            mu = group["momentum"]
            if mu != 0.0:
                buf = state.get("momentum_buffer")
                if buf is None:
                    state["momentum_buffer"] = buf = d.clone()
                else:
                    buf.mul_(mu).add_(d)
                d = buf
            y.add_(d, alpha=-lr)
        else:
            beta1, beta2 = group["betas"]
            if not state:
                state["step"] = 0
                state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            state["step"] += 1
            t = state["step"]
            y.mul_(1.0 - lr * kappa)
            m, v = state["exp_avg"], state["exp_avg_sq"]
            m.lerp_(d, 1.0 - beta1)
            v.mul_(beta2).addcmul_(d, d, value=1.0 - beta2)
            bc1 = 1.0 - beta1**t
            bc2_sqrt = math.sqrt(1.0 - beta2**t)
            denom = (v.sqrt() / bc2_sqrt).add_(group["adam_eps"])
            y.addcdiv_(m, denom, value=-lr / bc1)
        if lr != 0.0:  # with lr = 0 the state moves but x does not (x -> y -> x is not bit-exact)
            p.copy_(from_hidden(y, order) if rewa else y)

    # -- foreach path ------------------------------------------------------------------------------
    def _step_foreach(self, group: dict[str, Any], params: list[torch.Tensor]) -> None:
        lr = float(group["lr"])
        kappa = group["weight_decay"]
        rewa = group["rewa"]
        order = group["order"]
        grads = [p.grad for p in params]
        if group["maximize"]:
            grads = torch._foreach_neg(grads)
        ys = foreach_sign_power(params, 1.0 / order) if rewa else [p.clone() for p in params]
        s = _foreach_scale(ys, order, group["adapt_exp"], group["eps"]) if rewa else None
        ds = torch._foreach_mul(grads, s) if s is not None else [g.clone() for g in grads]
        if group["base"] == "sgd":
            if kappa != 0.0:
                torch._foreach_add_(ds, ys, alpha=kappa)
            mu = group["momentum"]
            if mu != 0.0:
                bufs, fresh = [], []
                for p, d in zip(params, ds, strict=True):
                    buf = self.state[p].get("momentum_buffer")
                    if buf is None:
                        self.state[p]["momentum_buffer"] = buf = d.clone()
                        fresh.append(True)
                    else:
                        fresh.append(False)
                    bufs.append(buf)
                old = [b for b, f in zip(bufs, fresh, strict=True) if not f]
                if old:
                    torch._foreach_mul_(old, mu)
                    torch._foreach_add_(old, [d for d, f in zip(ds, fresh, strict=True) if not f])
                ds = bufs
            torch._foreach_add_(ys, ds, alpha=-lr)
        else:
            beta1, beta2 = group["betas"]
            ms, vs, bc1s, bc2s = [], [], [], []
            for p in params:
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["step"] += 1
                ms.append(state["exp_avg"])
                vs.append(state["exp_avg_sq"])
                bc1s.append(1.0 - beta1 ** state["step"])
                bc2s.append(math.sqrt(1.0 - beta2 ** state["step"]))
            torch._foreach_mul_(ys, 1.0 - lr * kappa)
            torch._foreach_lerp_(ms, ds, 1.0 - beta1)
            torch._foreach_mul_(vs, beta2)
            torch._foreach_addcmul_(vs, ds, ds, value=1.0 - beta2)
            denom = torch._foreach_sqrt(vs)
            torch._foreach_div_(denom, bc2s)
            torch._foreach_add_(denom, group["adam_eps"])
            torch._foreach_addcdiv_(ys, ms, denom, [-lr / b for b in bc1s])
        if lr != 0.0:  # with lr = 0 the state moves but x does not (x -> y -> x is not bit-exact)
            torch._foreach_copy_(params, foreach_sign_power(ys, order) if rewa else ys)
