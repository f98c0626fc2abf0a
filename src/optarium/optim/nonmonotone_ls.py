r"""Adaptive large-step gradient descent: a nonmonotone (Zhang–Hager) line search and AdGD.

Reference: Leonardo Galli, Curtis Fox, Wiebke Bartolomaeus, Mark Schmidt, Holger Rauhut, "Flatland: The
Adventures of Gradient Descent with Large Step Sizes", ICML 2026, arXiv:2606.06722 (PMLR v306, galli26a).

**What is the paper's and what is reconstructed.** The paper's text beyond its abstract could not be read here
(the arXiv abstract, the first page of the PMLR PDF and a paper-notes summary were found; its algorithm
section was not). From those: the adaptive step comes from an *equality-type non-monotone line search*, GD
with it runs at the edge of stability (EoS, :math:`\eta_k S(x_k) > 2`, :math:`S = \lambda_{\max}(\nabla^2 f)`)
from the start, sharpness is driven to a global minimum (the summary writes it :math:`2/K`), and a
*self-stabilisation constraint* rescues runs that reach flat regions too early. The exact step-size rule, the
paper's definition of "large" and its exact constraint were **not** found, so :class:`NonmonotoneLineSearchGD`
is **reconstructed** from the authors' earlier work (PoNoS, Galli et al., NeurIPS 2023: a Polyak initial
step and the Zhang–Hager nonmonotone line search with :math:`c = 0.5`, :math:`c_p = 0.1`, backtracking
factor 0.5, :math:`\xi = 1`, :math:`\eta_{\max} = 10`, :math:`\eta_{\min} = 10^{-6}`, :math:`f^* = 0`; and the
NeurIPS 2024 workshop paper "Nonmonotone Line Searches Operate at the Edge of Stability"), with
"equality-type" read as *the largest step on the first acceptable interval* (the root of the acceptance
condition, found by bisection). The step-size cap ``eta_cap_schedule`` is our reading of the
self-stabilisation constraint. :class:`AdGD` is Malitsky & Mishchenko's rule (ICML 2020), our addition
for comparison.

Zhang–Hager reference (Zhang & Hager, SIAM J. Optim. 14, 2004). With :math:`f_k = f(x_k)`:

.. math::
    Q_0 = 1,\ C_0 = f_0;\qquad Q_k = \xi Q_{k-1} + 1,\quad C_k = \frac{\xi Q_{k-1} C_{k-1} + f_k}{Q_k},

so :math:`\xi = 0` gives :math:`C_k = f_k` (monotone Armijo) and :math:`\xi = 1` the mean of all past losses;
always :math:`\min_{j\le k} f_j \le C_k \le \max_{j\le k} f_j`. A trial step :math:`\eta` is accepted when

.. math::
    \psi(\eta) = f(x_k - \eta g_k) - C_k + c\,\eta\,\|g_k\|^2 \le 0,\qquad g_k = \nabla f(x_k).

The search (``mode``):

- ``"backtracking"``: :math:`\eta = \eta_{\text{init}}, \beta\eta_{\text{init}}, \beta^2\eta_{\text{init}},
  \dots` until accepted (the first acceptable trial; PoNoS with ``xi=1``, Armijo with ``xi=0``);
- ``"equality"`` (reconstructed): if :math:`\eta_{\text{init}}` is rejected, backtrack by :math:`\beta` until
  a trial is accepted (the last rejected trial brackets the root); if it is accepted, expand by ``growth``
  until a trial is rejected or the upper bound is reached (then the bound is returned); then bisect the
  bracket [accepted, rejected] and return its accepted end, i.e. :math:`\eta \le \eta^*` with
  :math:`\psi(\eta^*) = 0`, to the bracket's width;
- ``"none"``: take :math:`\eta_{\text{init}}` as it is (no search: the Polyak or Barzilai–Borwein baseline).

Initial trial (``init``): ``"polyak"`` :math:`(f_k - f^*)/(c_p\|g_k\|^2)`; ``"previous"``
:math:`\text{growth}\cdot\eta_{k-1}` (Polyak at the first step); ``"bb"`` the Barzilai–Borwein step
:math:`\langle s, s\rangle / \langle s, y\rangle` with :math:`s = x_k - x_{k-1}`, :math:`y = g_k - g_{k-1}`
(Polyak at the first step, :math:`\eta_{\max}` when :math:`\langle s, y\rangle \le 0`). Every trial lies in
:math:`[\eta_{\min}, \eta_{\text{hi}}]`, :math:`\eta_{\text{hi}} = \min(\eta_{\max}, \text{cap}(k))` where
``eta_cap_schedule(k)`` gives the cap at step :math:`k` (0-based; ``None``: no cap).

Costs and counters: a step calls the closure once with gradients (forward and backward) and then at most
``max_evals`` times under ``torch.no_grad()`` (forward only); the closure must call ``backward`` only when
``torch.is_grad_enabled()``. :attr:`NonmonotoneLineSearchGD.state_counters` holds the exact totals.

Non-finite values: a NaN or inf gradient or loss at :math:`x_k` follows the family's ``nonfinite`` policy
(:mod:`optarium.optim._nonfinite`: raise before anything is touched, or skip and count in
``skipped_steps``); a NaN or inf trial loss is a rejection (:math:`\psi > 0`, shrink), counted in
``state_counters["nonfinite_trials"]``, so a NaN step is never accepted. When no trial is accepted, the step
is :math:`\eta_{\min}` if the search reached it and its loss was finite, else (a NaN there, or ``max_evals``
spent before reaching it) no step at all (:math:`\eta = 0`); such steps are counted in
``state_counters["search_failures"]``.

The step size is global (norms over all parameters of all groups); the search settings must be the same in
every group. Every group's ``lr`` is overwritten by :math:`\eta_k` after a step (as for the Polyak step of
:class:`~optarium.optim.SAMPolyak`), so logging ``param_groups[0]["lr"]`` logs the step; an LR scheduler can
be attached but does not change the step. There is no ``maximize`` and no momentum.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch

from optarium._core.validation import (
    check_choice,
    check_finite,
    check_in_range,
    check_int,
    check_positive,
    check_type,
)
from optarium.optim._dropin import DropInOptimizer, check_lr
from optarium.optim._nonfinite import check_nonfinite_policy, should_step

__all__ = ["LINE_SEARCH_INITS", "LINE_SEARCH_MODES", "AdGD", "NonmonotoneLineSearchGD"]

#: The searches of :class:`NonmonotoneLineSearchGD`.
LINE_SEARCH_MODES: tuple[str, ...] = ("equality", "backtracking", "none")
#: The initial trial steps of :class:`NonmonotoneLineSearchGD`.
LINE_SEARCH_INITS: tuple[str, ...] = ("polyak", "previous", "bb")

_HALF = (torch.float16, torch.bfloat16)
_SEARCH_KEYS = (
    "c",
    "xi",
    "mode",
    "init",
    "c_p",
    "f_star",
    "growth",
    "backtrack",
    "eta_min",
    "eta_max",
    "max_evals",
    "bisect_rtol",
)
#: Key of the optimizer-wide state (not attached to a parameter; torch's state_dict keeps it as is).
_NM_KEY = "nonmonotone_ls"
_ADGD_KEY = "adgd"


def _check_search(group: dict[str, Any], where: str = "") -> None:
    group["c"] = check_in_range(f"{where}c", group["c"], 0.0, 1.0, low_inclusive=False, high_inclusive=False)
    group["xi"] = check_in_range(f"{where}xi", group["xi"], 0.0, 1.0)
    group["mode"] = check_choice(f"{where}mode", group["mode"], LINE_SEARCH_MODES)
    group["init"] = check_choice(f"{where}init", group["init"], LINE_SEARCH_INITS)
    group["c_p"] = check_positive(f"{where}c_p", group["c_p"])
    group["f_star"] = check_finite(f"{where}f_star", group["f_star"])
    group["growth"] = check_in_range(f"{where}growth", group["growth"], 1.0, math.inf, low_inclusive=False)
    if not math.isfinite(group["growth"]):
        raise ValueError(f"{where}growth: must be finite and > 1, got {group['growth']!r}")
    group["backtrack"] = check_in_range(
        f"{where}backtrack", group["backtrack"], 0.0, 1.0, low_inclusive=False, high_inclusive=False
    )
    group["eta_min"] = check_positive(f"{where}eta_min", group["eta_min"])
    group["eta_max"] = check_positive(f"{where}eta_max", group["eta_max"])
    if group["eta_max"] < group["eta_min"]:
        raise ValueError(
            f"{where}eta_max: must be >= eta_min = {group['eta_min']!r}, got {group['eta_max']!r}"
        )
    group["max_evals"] = check_int(f"{where}max_evals", group["max_evals"], minimum=1)
    group["bisect_rtol"] = check_in_range(f"{where}bisect_rtol", group["bisect_rtol"], 0.0, 1.0)


def _scalar_loss(loss: Any) -> float:
    """The closure's loss as a Python float (a one-element loss of any shape is fine)."""
    if loss is None:
        raise ValueError("closure: must return the loss, got None")
    value = torch.as_tensor(loss.detach() if isinstance(loss, torch.Tensor) else loss)
    if value.numel() != 1:
        raise ValueError(f"closure: must return a scalar loss, got shape {tuple(value.shape)}")
    if value.is_complex():
        raise ValueError("closure: must return a real loss, got a complex one")
    return float(value.reshape(()))


def _sq_norm(tensors: list[torch.Tensor]) -> float:
    """Sum of squared norms over tensors (complex as pairs of reals), accumulated in float64 on one device.

    The same arithmetic on the foreach and per-tensor paths (the search is discontinuous in its inputs).
    """
    if not tensors:
        return 0.0
    norms = [
        torch.linalg.vector_norm(t, dtype=torch.float32 if t.dtype in _HALF else None).to(torch.float64)
        for t in tensors
    ]
    device = norms[0].device
    return float(torch.stack([n.to(device) for n in norms]).square().sum())


def _dot(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    """Real inner product over tensors (complex as pairs of reals), in float64."""
    total = 0.0
    for x, y in zip(a, b, strict=True):
        x = torch.view_as_real(x) if x.is_complex() else x
        y = torch.view_as_real(y) if y.is_complex() else y
        total += float(torch.dot(x.reshape(-1).to(torch.float64), y.reshape(-1).to(torch.float64)))
    return total


class NonmonotoneLineSearchGD(DropInOptimizer):
    r"""Gradient descent with a nonmonotone (Zhang–Hager) line search: equality-type, backtracking or none.

    The equality-type search is a **reconstruction** of the rule of Galli et al. (ICML 2026), whose exact rule
    could not be read; see the module docstring for the rule, what is the paper's and what is ours.

    Args:
        params: parameters or param-group dicts (the search settings must be the same in every group).
        c: sufficient-decrease constant :math:`c \in (0, 1)` (default 0.5, PoNoS).
        xi: Zhang–Hager weight :math:`\xi \in [0, 1]`: 0 is monotone Armijo, 1 the running mean (default 1).
        mode: ``"equality"`` (default), ``"backtracking"`` or ``"none"``.
        init: initial trial ``"polyak"`` (default), ``"previous"`` or ``"bb"``.
        c_p: the Polyak constant :math:`c_p > 0`: :math:`\eta_{\text{init}} = (f - f^*)/(c_p\|g\|^2)`
            (default 0.1, PoNoS; 1 is Polyak's step).
        f_star: a lower bound on the loss for the Polyak step (default 0); a Polyak value below ``eta_min``
            (e.g. a loss below ``f_star``) is clipped to ``eta_min``.
        growth: factor > 1 of the expansion (equality search) and of ``init="previous"`` (default 2).
        backtrack: shrink factor :math:`\beta \in (0, 1)` (default 0.5).
        eta_min: smallest trial :math:`\eta_{\min} > 0` (default 1e-6).
        eta_max: largest trial :math:`\eta_{\max} \ge \eta_{\min}` (default 10).
        eta_cap_schedule: ``None`` (default) or a function of the step index :math:`k` (0-based) returning a
            cap on :math:`\eta_k` (a number > 0 or ``None`` for no cap): our self-stabilisation constraint,
            e.g. ``lambda k: 1.05**k / S0``. Kept by ``copy.deepcopy``; a lambda does not pickle.
        max_evals: most trial evaluations (forward passes under ``torch.no_grad()``) per step (default 30).
            Keep it above :math:`\log_{1/\beta}(\eta_{\max}/\eta_{\min})` (about 24 at the defaults) so that a
            backtracking can always reach ``eta_min``.
        bisect_rtol: the equality search stops bisecting once the bracket's width is at most
            ``bisect_rtol`` times its accepted end (default 0: bisect until ``max_evals`` is spent).
        foreach: use ``torch._foreach_*`` kernels for the trial points (default ``None``: yes).
        nonfinite: ``"raise"`` (default), ``"skip"`` or ``"off"`` for a NaN/inf gradient or loss at
            :math:`x_k`; see :mod:`optarium.optim._nonfinite`.

    Attributes:
        skipped_steps: steps skipped under ``nonfinite="skip"``.

    Example:
        >>> import torch
        >>> model = torch.nn.Linear(4, 1)
        >>> x, y = torch.randn(32, 4), torch.randn(32, 1)
        >>> opt = NonmonotoneLineSearchGD(model.parameters(), c=0.5, xi=1.0, mode="equality")
        >>> def closure():
        ...     loss = torch.nn.functional.mse_loss(model(x), y)
        ...     if torch.is_grad_enabled():
        ...         opt.zero_grad()
        ...         loss.backward()
        ...     return loss
        >>> loss = opt.step(closure)
        >>> eta = opt.last_step_size
        >>> opt.state_counters["backward"]
        1
    """

    config_attrs = ("foreach", "nonfinite", "skipped_steps", "eta_cap_schedule")

    def __init__(
        self,
        params: Iterable[Any],
        c: float = 0.5,
        xi: float = 1.0,
        mode: str = "equality",
        init: str = "polyak",
        c_p: float = 0.1,
        f_star: float = 0.0,
        growth: float = 2.0,
        backtrack: float = 0.5,
        eta_min: float = 1e-6,
        eta_max: float = 10.0,
        eta_cap_schedule: Callable[[int], float | None] | None = None,
        max_evals: int = 30,
        bisect_rtol: float = 0.0,
        *,
        foreach: bool | None = None,
        nonfinite: str = "raise",
    ) -> None:
        defaults: dict[str, Any] = {
            "c": c,
            "xi": xi,
            "mode": mode,
            "init": init,
            "c_p": c_p,
            "f_star": f_star,
            "growth": growth,
            "backtrack": backtrack,
            "eta_min": eta_min,
            "eta_max": eta_max,
            "max_evals": max_evals,
            "bisect_rtol": bisect_rtol,
        }
        _check_search(defaults)
        defaults["lr"] = 0.0  # overwritten by eta_k after every step
        if eta_cap_schedule is not None and not callable(eta_cap_schedule):
            raise TypeError(
                f"eta_cap_schedule: expected None or a function of the step index, got "
                f"{type(eta_cap_schedule).__name__}"
            )
        if foreach is not None:
            check_type("foreach", foreach, bool)
        self.foreach = foreach
        self.nonfinite = check_nonfinite_policy(nonfinite)
        self.skipped_steps = 0
        self.eta_cap_schedule = eta_cap_schedule
        super().__init__(params, defaults)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group; its search settings are validated and must equal the first group's."""
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        _check_search(group)
        first = self.param_groups[0]
        for key in _SEARCH_KEYS:
            if group[key] != first[key]:
                raise ValueError(
                    f"{key}: the line search is global, so {key} must be the same in every param group, got "
                    f"{group[key]!r} and {first[key]!r}"
                )

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load groups and state; every loaded group's search settings are validated."""
        for i, group in enumerate(state_dict["param_groups"]):
            _check_search({k: group.get(k, self.defaults[k]) for k in _SEARCH_KEYS}, f"param_groups[{i}].")
        super().load_state_dict(state_dict)

    # -- read-outs ----------------------------------------------------------------------------------------

    def _global(self) -> dict[str, Any]:
        state = self.state.get(_NM_KEY)
        if state is None:
            state = {
                "k": 0,
                "C": math.nan,
                "Q": 0.0,
                "eta": math.nan,
                "forward": 0,
                "backward": 0,
                "nonfinite_trials": 0,
                "search_failures": 0,
                "last_evals": 0,
            }
        return dict(state)

    @property
    def state_counters(self) -> dict[str, int]:
        """Exact totals: ``forward`` (closure calls), ``backward`` (calls with gradients), ``steps`` (steps
        taken), ``nonfinite_trials`` (NaN/inf trial losses), ``search_failures`` and ``last_evals`` (trial
        evaluations of the last step)."""
        s = self._global()
        return {
            "forward": s["forward"],
            "backward": s["backward"],
            "steps": s["k"],
            "nonfinite_trials": s["nonfinite_trials"],
            "search_failures": s["search_failures"],
            "last_evals": s["last_evals"],
        }

    @property
    def last_step_size(self) -> float:
        """:math:`\\eta_k` of the last step (NaN before the first step; 0 for a step that did not move)."""
        return float(self._global()["eta"])

    @property
    def reference(self) -> float:
        """The Zhang–Hager reference :math:`C_k` used by the last step (NaN before the first step)."""
        return float(self._global()["C"])

    # -- the step -----------------------------------------------------------------------------------------

    def _move(
        self, params: list[torch.Tensor], saved: list[torch.Tensor], grads: list[torch.Tensor], eta: float
    ) -> None:
        """Set the parameters to ``saved - eta * grads`` (the same arithmetic on both paths)."""
        if self.foreach is False:
            for p, x, g in zip(params, saved, grads, strict=True):
                p.copy_(x)
                p.add_(g, alpha=-eta)
        else:
            torch._foreach_copy_(params, saved)
            torch._foreach_add_(params, grads, alpha=-eta)

    def step(  # type: ignore[override]
        self, closure: Callable[[], Any] | None = None, *, reference: float | None = None
    ) -> Any:
        """One step: the gradient at :math:`x_k`, the search along :math:`-g_k`, the move.

        Args:
            closure: re-evaluates the loss on the same (full) batch and returns it; calls ``backward`` only
                when ``torch.is_grad_enabled()``. Called once with gradients (after
                ``zero_grad(set_to_none=True)``) and up to ``max_evals`` times under ``torch.no_grad()``.
                Required.
            reference: a reference value :math:`C` for this step's acceptance test instead of the
                Zhang–Hager :math:`C_k` (which is still updated); for tests and custom references.

        Returns:
            The closure's loss at :math:`x_k` (the first evaluation). :math:`\\eta_k` is in
            :attr:`last_step_size` and every group's ``lr``.
        """
        if closure is None:
            raise ValueError(
                f"closure: {type(self).__name__}.step() requires a closure that re-evaluates the loss "
                "(forward; backward only when torch.is_grad_enabled()) and returns it"
            )
        if reference is not None:
            reference = check_finite("reference", reference)
        st = self._global()
        self.zero_grad(set_to_none=True)
        with torch.enable_grad():
            loss = closure()
        st["forward"] += 1
        st["backward"] += 1
        f_k = _scalar_loss(loss)

        params = [p for g in self.param_groups for p in g["params"] if p.grad is not None]
        if any(p.grad.is_sparse for p in params):
            raise ValueError(f"grad: {type(self).__name__} does not support sparse gradients")
        if not params:
            self.state[_NM_KEY] = st
            return loss
        grads = [p.grad for p in params]
        gnorm2 = _sq_norm(grads)
        if not (math.isfinite(gnorm2) and math.isfinite(f_k)):
            checked = [*grads, torch.tensor([f_k], dtype=torch.float64, device=grads[0].device)]
            if not should_step(type(self).__name__, checked, self.nonfinite):
                self.skipped_steps += 1
                self.state[_NM_KEY] = st
                return loss

        hp = self.param_groups[0]
        k = st["k"]
        # Zhang-Hager reference C_k from C_{k-1} and f_k (a non-finite f_k, under nonfinite="off", is skipped)
        if math.isfinite(f_k):
            if k == 0 or not math.isfinite(st["C"]):
                st["Q"], st["C"] = 1.0, f_k
            else:
                q_new = hp["xi"] * st["Q"] + 1.0
                st["C"] = (hp["xi"] * st["Q"] * st["C"] + f_k) / q_new
                st["Q"] = q_new
        C = st["C"] if reference is None else reference

        eta_hi = hp["eta_max"]
        if self.eta_cap_schedule is not None:
            cap = self.eta_cap_schedule(k)
            if cap is not None:
                cap = check_positive("eta_cap_schedule", cap, allow_inf=True)
                eta_hi = max(hp["eta_min"], min(eta_hi, cap))
        eta_lo = hp["eta_min"]

        with torch.no_grad():
            eta0 = self._initial(hp, st, params, grads, f_k, gnorm2)
            eta0 = min(max(eta0, eta_lo), eta_hi) if math.isfinite(eta0) else eta_hi
            saved = [p.detach().clone() for p in params]
            if gnorm2 == 0.0 or not math.isfinite(gnorm2):
                eta = 0.0  # a stationary point (or nonfinite="off" met a NaN): nothing to search
                evals = 0
                if not math.isfinite(gnorm2):
                    st["search_failures"] += 1
            elif hp["mode"] == "none":
                eta, evals = eta0, 0
            else:
                eta, evals, n_bad, failed = self._search(
                    closure, hp, params, saved, grads, eta0, eta_lo, eta_hi, C, gnorm2
                )
                st["nonfinite_trials"] += n_bad
                st["search_failures"] += int(failed)
            if hp["init"] == "bb":
                for p, x, g in zip(params, saved, grads, strict=True):
                    ps = self.state[p]
                    ps["prev_x"] = x
                    ps["prev_grad"] = g.detach().clone()
            if eta > 0.0:
                self._move(params, saved, grads, eta)
            elif self.foreach is False:
                for p, x in zip(params, saved, strict=True):
                    p.copy_(x)
            else:
                torch._foreach_copy_(params, saved)
            del saved
        st["forward"] += evals
        st["last_evals"] = evals
        st["eta"] = eta
        st["k"] = k + 1
        self.state[_NM_KEY] = st
        for group in self.param_groups:
            group["lr"] = eta
        return loss

    def _initial(
        self,
        hp: dict[str, Any],
        st: dict[str, Any],
        params: list[torch.Tensor],
        grads: list[torch.Tensor],
        f_k: float,
        gnorm2: float,
    ) -> float:
        polyak = (f_k - hp["f_star"]) / (hp["c_p"] * gnorm2) if gnorm2 > 0 else math.inf
        if hp["init"] == "polyak" or st["k"] == 0 or not math.isfinite(st["eta"]):
            return polyak
        if hp["init"] == "previous":
            return hp["growth"] * st["eta"] if st["eta"] > 0 else polyak
        prev = [self.state[p].get("prev_x") for p in params]
        prev_g = [self.state[p].get("prev_grad") for p in params]
        if any(v is None for v in prev) or any(v is None for v in prev_g):
            return polyak
        s = [p.detach() - x for p, x in zip(params, prev, strict=True)]
        y = [g - h for g, h in zip(grads, prev_g, strict=True)]
        sy = _dot(s, y)
        if not (sy > 0 and math.isfinite(sy)):
            return hp["eta_max"]
        return _sq_norm(s) / sy

    def _search(
        self,
        closure: Callable[[], Any],
        hp: dict[str, Any],
        params: list[torch.Tensor],
        saved: list[torch.Tensor],
        grads: list[torch.Tensor],
        eta0: float,
        eta_lo: float,
        eta_hi: float,
        C: float,
        gnorm2: float,
    ) -> tuple[float, int, int, bool]:
        """(eta, trial evaluations, non-finite trials, failed) of one search from ``eta0``."""
        c, beta, growth, budget = hp["c"], hp["backtrack"], hp["growth"], hp["max_evals"]
        evals = 0
        n_bad = 0

        def accepted(eta: float) -> tuple[bool, bool]:
            nonlocal evals, n_bad
            self._move(params, saved, grads, eta)
            value = _scalar_loss(closure())
            evals += 1
            if not math.isfinite(value):
                n_bad += 1
                return False, False
            return value - C + c * eta * gnorm2 <= 0.0, True

        eta = eta0
        ok, finite = accepted(eta)
        if not ok:
            # backtrack: the last rejected trial brackets the acceptable one
            while True:
                rejected = eta
                if eta <= eta_lo or evals >= budget:
                    # nothing acceptable: eta_min if its loss was finite, else no step
                    if eta <= eta_lo and finite:
                        return eta_lo, evals, n_bad, True
                    return 0.0, evals, n_bad, True
                eta = max(eta * beta, eta_lo)
                ok, finite = accepted(eta)
                if ok:
                    break
            if hp["mode"] == "backtracking":
                return eta, evals, n_bad, False
            lo, hi = eta, rejected
        else:
            if hp["mode"] == "backtracking":
                return eta, evals, n_bad, False
            # expand while accepted, up to the upper bound
            lo = eta
            hi = math.nan
            while lo < eta_hi and evals < budget:
                trial = min(lo * growth, eta_hi)
                ok, _ = accepted(trial)
                if ok:
                    lo = trial
                else:
                    hi = trial
                    break
            if not math.isfinite(hi):
                return lo, evals, n_bad, False
        # bisect [lo accepted, hi rejected]; return the accepted end
        while evals < budget and hi - lo > hp["bisect_rtol"] * lo:
            mid = 0.5 * (lo + hi)
            if not lo < mid < hi:
                break
            ok, _ = accepted(mid)
            if ok:
                lo = mid
            else:
                hi = mid
        return lo, evals, n_bad, False


class AdGD(DropInOptimizer):
    r"""Adaptive gradient descent without descent (Malitsky & Mishchenko, ICML 2020, Algorithm 1).

    .. math::
        \eta_k = \min\Big\{\sqrt{1 + \theta_{k-1}}\,\eta_{k-1},\ \frac{\|x_k - x_{k-1}\|}{a\,\|\nabla f(x_k)
        - \nabla f(x_{k-1})\|}\Big\},\qquad \theta_k = \eta_k/\eta_{k-1},\qquad x_{k+1} = x_k - \eta_k
        \nabla f(x_k),

    with :math:`\theta_0 = +\infty` and the first step :math:`x_1 = x_0 - \eta_0 \nabla f(x_0)`,
    :math:`\eta_0` each group's ``lr``. :math:`a = 2` is the paper's rule
    (:math:`\eta \le 1/(2L_{\text{loc}})`); the spec's "large-step" variant takes :math:`a < 2` (e.g. 0.5,
    :math:`\eta \approx 2/L_{\text{loc}}`). Norms run
    over all parameters of the groups with ``lr > 0``; a group with ``lr = 0`` is frozen (torch's rule). A
    zero gradient difference gives no curvature information: then :math:`\eta_k = \eta_{k-1}` (growing it
    by :math:`\sqrt{1+\theta}` at a stationary point would overflow). ``eta_max`` caps every step.

    Args:
        params: parameters or param-group dicts.
        lr: the first step :math:`\eta_0 \ge 0` (default 1e-6; later steps are adaptive and ignore it).
        a: the constant :math:`a > 0` of the local curvature bound (default 2, the paper's).
        eta_max: cap on :math:`\eta_k` (default ``inf``).
        foreach: use ``torch._foreach_*`` kernels (default ``None``: yes).
        nonfinite: ``"raise"`` (default), ``"skip"`` or ``"off"`` for NaN/inf gradients.

    ``step(closure=None)``: with a closure it is called once (forward and backward, after
    ``zero_grad(set_to_none=True)``); without one the gradients already in ``.grad`` are used.
    :attr:`state_counters` counts the gradients consumed (``forward`` = ``backward`` = one per step taken
    or skipped) and :attr:`last_step_size` is :math:`\eta_k`.

    Example:
        >>> import torch
        >>> w = torch.zeros(3, requires_grad=True)
        >>> opt = AdGD([w], lr=1e-6)
        >>> for _ in range(50):
        ...     opt.zero_grad()
        ...     ((w - 1.0) ** 2).sum().backward()
        ...     _ = opt.step()
        >>> bool((w - 1.0).abs().max() < 1e-6)
        True
    """

    config_attrs = ("foreach", "nonfinite", "skipped_steps")

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-6,
        a: float = 2.0,
        eta_max: float = math.inf,
        *,
        foreach: bool | None = None,
        nonfinite: str = "raise",
    ) -> None:
        defaults = {
            "lr": check_lr(lr),
            "a": check_positive("a", a),
            "eta_max": check_positive("eta_max", eta_max, allow_inf=True),
        }
        if foreach is not None:
            check_type("foreach", foreach, bool)
        self.foreach = foreach
        self.nonfinite = check_nonfinite_policy(nonfinite)
        self.skipped_steps = 0
        super().__init__(params, defaults)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group; its ``lr`` is validated, and ``a`` and ``eta_max`` must equal the first group's."""
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        group["lr"] = check_lr(group["lr"])
        group["a"] = check_positive("a", group["a"])
        group["eta_max"] = check_positive("eta_max", group["eta_max"], allow_inf=True)
        for key in ("a", "eta_max"):
            if group[key] != self.param_groups[0][key]:
                raise ValueError(f"{key}: the step size is global, so {key} must be the same in every group")

    def _global(self) -> dict[str, Any]:
        state = self.state.get(_ADGD_KEY)
        if state is None:
            state = {"k": 0, "eta": math.nan, "theta": math.inf, "forward": 0, "backward": 0}
        return dict(state)

    @property
    def state_counters(self) -> dict[str, int]:
        """``forward`` and ``backward``: gradients consumed; ``steps``: steps taken."""
        s = self._global()
        return {"forward": s["forward"], "backward": s["backward"], "steps": s["k"]}

    @property
    def last_step_size(self) -> float:
        """:math:`\\eta_k` of the last step (NaN before the first step)."""
        return float(self._global()["eta"])

    def step(self, closure: Callable[[], Any] | None = None) -> Any:  # type: ignore[override]
        """One AdGD step from the gradients at :math:`x_k` (computed by ``closure`` if given).

        Returns the closure's loss, or ``None`` without a closure.
        """
        loss = None
        if closure is not None:
            self.zero_grad(set_to_none=True)
            with torch.enable_grad():
                loss = closure()
        st = self._global()
        st["forward"] += 1
        st["backward"] += 1
        groups = [
            (g, [p for p in g["params"] if p.grad is not None])
            for g in self.param_groups
            if float(g["lr"]) > 0
        ]
        groups = [(g, ps) for g, ps in groups if ps]
        params = [p for _, ps in groups for p in ps]
        if any(p.grad.is_sparse for p in params):
            raise ValueError(f"grad: {type(self).__name__} does not support sparse gradients")
        if not params:
            self.state[_ADGD_KEY] = st
            return loss
        grads = [p.grad for p in params]
        gnorm2 = _sq_norm(grads)
        if not math.isfinite(gnorm2) and not should_step(type(self).__name__, grads, self.nonfinite):
            self.skipped_steps += 1
            self.state[_ADGD_KEY] = st
            return loss
        a, cap = self.param_groups[0]["a"], self.param_groups[0]["eta_max"]
        with torch.no_grad():
            first = st["k"] == 0 or any("prev_x" not in self.state[p] for p in params)
            if first:
                etas = {id(g): min(float(g["lr"]), cap) for g, _ in groups}
                eta = etas[id(groups[0][0])]
                theta = math.inf
            else:
                s = [p.detach() - self.state[p]["prev_x"] for p in params]
                y = [g - self.state[p]["prev_grad"] for p, g in zip(params, grads, strict=True)]
                ds, dy = math.sqrt(_sq_norm(s)), math.sqrt(_sq_norm(y))
                prev = st["eta"]
                if dy > 0 and math.isfinite(ds / dy):
                    grow = math.inf if math.isinf(st["theta"]) else math.sqrt(1.0 + st["theta"]) * prev
                    eta = min(grow, ds / (a * dy), cap)
                else:
                    eta = min(prev, cap)  # no curvature information (zero gradient difference): keep eta
                theta = eta / prev if prev > 0 else math.inf
                etas = {id(g): eta for g, _ in groups}
            for p, g in zip(params, grads, strict=True):
                ps = self.state[p]
                ps["prev_x"] = p.detach().clone()
                ps["prev_grad"] = g.detach().clone()
            for group, ps in groups:
                gs = [p.grad for p in ps]
                step = etas[id(group)]
                if self.foreach is False:
                    for p, g in zip(ps, gs, strict=True):
                        p.add_(g, alpha=-step)
                else:
                    torch._foreach_add_(ps, gs, alpha=-step)
        st["eta"], st["theta"], st["k"] = eta, theta, st["k"] + 1
        self.state[_ADGD_KEY] = st
        return loss
