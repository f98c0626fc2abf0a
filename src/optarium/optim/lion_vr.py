r"""Lion and variance-reduced Lion (Lion-VR) as ``torch.optim.Optimizer`` subclasses.

References:

- Lion: Xiangning Chen, Chen Liang, Da Huang, Esteban Real, Kaiyuan Wang, Yao Liu, Hieu Pham, Xuanyi Dong,
  Thang Luong, Cho-Jui Hsieh, Yifeng Lu, Quoc V. Le, "Symbolic Discovery of Optimization Algorithms",
  NeurIPS 2023, arXiv:2302.06675.
- Lion-VR: Wei Jiang, Mao Xu, Wenhao Yang, Yibo Wang, Zechao Li, Lijun Zhang, "Convergence Analysis of the
  Lion Optimizer in Centralized and Distributed Settings", ICML 2026, arXiv:2508.12327 (v1 by Wei Jiang and
  Lijun Zhang). The paper proves :math:`O(d^{1/2}T^{-1/4})` stationarity for Lion and
  :math:`O(d^{1/2}T^{-1/3})` for its variance-reduced variant under average smoothness.

Update rules. With :math:`g_t = \nabla f(x_t;\xi_t)` (negated under ``maximize``), step size :math:`\eta`,
betas :math:`(\beta_1, \beta_2)` and weight decay :math:`\lambda`, **Lion** is

.. math::
    c_t = \beta_1 m_{t-1} + (1-\beta_1) g_t,\qquad
    x_{t+1} = x_t - \eta\big(\operatorname{sign}(c_t) + \lambda x_t\big),\qquad
    m_t = \beta_2 m_{t-1} + (1-\beta_2) g_t,

with :math:`m_{-1} = 0`. **Lion-VR** evaluates the same sample :math:`\xi_t` at the current and at the
previous iterate, :math:`h_t = \nabla f(x_{t-1};\xi_t)`, and corrects the momentum STORM-style
(:math:`\gamma` = ``correction``, 1 in the paper):

.. math::
    u_t = m_{t-1} + \gamma (g_t - h_t),\quad
    c_t = \beta_1 u_t + (1-\beta_1) g_t,\quad
    x_{t+1} = x_t - \eta\big(\operatorname{sign}(c_t) + \lambda x_t\big),\quad
    m_t = \beta_2 u_t + (1-\beta_2) g_t.

:math:`h_t = g_t` (or :math:`\gamma = 0`) is Lion exactly, bit for bit; :math:`\beta_1 = \beta_2` is
sign-STORM (SSVR, Jiang et al., NeurIPS 2024, arXiv:2406.00489). Defaults follow Lion: ``lr=1e-4``,
``betas=(0.9, 0.99)``, ``weight_decay=0`` (for Lion use an lr 3-10x smaller and a weight decay 3-10x larger
than for AdamW). Weight decay is the coupled-in-the-step form above, the same as ``lion-pytorch``'s default
(``decoupled_weight_decay=False``): the parameter is first scaled by :math:`1-\eta\lambda`, then moved by
:math:`-\eta\,\operatorname{sign}(c_t)`, in that order and with that arithmetic (so both agree bitwise).

What was found and what is ours. Lion's rule and defaults are the paper's (Chen et al.). The exact pseudo-code
of Lion-VR could not be read; the form above is the STORM-type estimator that "variance reduction with
average smoothness" names (the spec's suggested form). Our conventions where the paper is silent:

- Step 0 (no :math:`x_{-1}`): :math:`h_0 := g_0`, so the first step is a plain Lion step and evaluates the
  closure once. The same holds for any parameter's first step (one that has no state yet).
- ``correction`` (:math:`\gamma \ge 0`, default 1): an extension that scales :math:`g_t - h_t`; 0 turns the
  correction off, and then the second evaluation is skipped.
- A parameter whose gradient is ``None`` at :math:`x_{t-1}` but not at :math:`x_t` gets :math:`h_t = 0` (it
  did not take part in that evaluation; torch's usual reading of a missing gradient).

Cost of a Lion-VR step (the API). ``LionVR.step(closure)`` calls the closure **twice** (only once at step 0):
first at :math:`x_t` (its loss is returned and ``param.grad`` holds :math:`g_t` afterwards), then with the
parameters temporarily set to the stored :math:`x_{t-1}` (restored bitwise afterwards). So a step costs two
forward+backward passes plus three parameter-sized copies (on a 10.5M-parameter model on one CPU thread the
optimizer's own work is about 2x a Lion step, before the extra forward+backward). The state is two
parameter-sized buffers (``exp_avg`` and ``prev_param``, as much as AdamW), plus one recycled scratch buffer
of the parameters' size that holds :math:`x_t` during the second evaluation (not state, not saved). ``K``
steps cost ``2K - 1`` gradient evaluations; compare Lion-VR with Lion at equal evaluations, not equal steps.
The closure must evaluate **the same batch** each time it is called within one step: draw the batch outside
the closure. With ``same_randomness=True``
(default) the torch random state (CPU, and the CUDA devices of the parameters) is rewound to its value before
the first call while the second call runs, so dropout masks and batches sampled with torch's RNG inside the
closure are the same at both points; the state afterwards is what the first call left.

The update itself is :func:`lion_update_`, a function of tensor lists, so a distributed version can average
:math:`g_t` and :math:`h_t` across workers and call it unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch

from optarium._core.validation import check_betas, check_nonnegative, check_type
from optarium.optim._dropin import DropInOptimizer, check_lr
from optarium.optim._nonfinite import check_nonfinite_policy, should_step

__all__ = ["Lion", "LionVR", "lion_update_"]


#: On the CPU the foreach path works through chunks of at most this many elements, so that its temporaries
#: are small blocks the allocator reuses (whole-model temporaries cost a page fault per page every step).
_CPU_CHUNK = 1 << 20


def _chunks(tensors: Sequence[torch.Tensor]) -> list[list[int]]:
    """Indices grouped by (device, dtype) (foreach kernels need one of each); CPU groups split into chunks."""
    groups: dict[tuple[torch.device, torch.dtype], list[list[int]]] = {}
    sizes: dict[tuple[torch.device, torch.dtype], int] = {}
    for i, t in enumerate(tensors):
        key = (t.device, t.dtype)
        chunks = groups.setdefault(key, [[]])
        if t.device.type == "cpu" and chunks[-1] and sizes[key] + t.numel() > _CPU_CHUNK:
            chunks.append([])
            sizes[key] = 0
        chunks[-1].append(i)
        sizes[key] = sizes.get(key, 0) + t.numel()
    return [c for chunks in groups.values() for c in chunks]


def _scratch_like(
    buffers: dict[tuple[torch.device, torch.dtype], torch.Tensor], t: torch.Tensor
) -> torch.Tensor:
    """A temporary shaped like ``t`` carved from one reused flat buffer per (device, dtype)."""
    if not t.is_contiguous():
        return torch.empty_like(t)
    return buffers[(t.device, t.dtype)][: t.numel()].view_as(t)


@torch.no_grad()
def lion_update_(
    params: Sequence[torch.Tensor],
    grads: Sequence[torch.Tensor],
    exp_avgs: Sequence[torch.Tensor],
    *,
    lr: float,
    beta1: float,
    beta2: float,
    weight_decay: float = 0.0,
    prev_grads: Sequence[torch.Tensor] | None = None,
    correction: float = 1.0,
    maximize: bool = False,
    foreach: bool | None = None,
) -> None:
    r"""One Lion (``prev_grads=None``) or Lion-VR step on tensor lists, in place on params and exp_avgs.

    The arithmetic is ``lion_pytorch.Lion``'s (multiply, then add with ``alpha``), so with the same inputs
    both give the same bits. Both paths here (foreach and per-tensor) give the same bits too.

    Args:
        params: the parameters :math:`x_t` (updated in place to :math:`x_{t+1}`).
        grads: :math:`g_t`, gradients at :math:`x_t`, one per parameter.
        exp_avgs: the momentum buffers :math:`m_{t-1}` (updated in place to :math:`m_t`).
        lr, beta1, beta2, weight_decay: :math:`\eta, \beta_1, \beta_2, \lambda` (not validated here).
        prev_grads: :math:`h_t`, gradients at :math:`x_{t-1}` on the same sample; ``None`` for Lion. An entry
            that *is* the corresponding ``grads`` entry means :math:`h_t = g_t` for that parameter.
        correction: :math:`\gamma`, the weight of :math:`g_t - h_t` (Lion-VR only).
        maximize: ascend instead of descend (gradients are negated).
        foreach: ``True``: ``torch._foreach_*`` kernels over each (device, dtype) list (chunked on the CPU);
            ``False``: a per-tensor loop whose temporary lives in one reused buffer; ``None`` (default):
            foreach when every parameter is on CUDA, as torch's own optimizers choose.
    """
    if not params:
        return
    if foreach is None:
        foreach = all(p.device.type == "cuda" for p in params)
    if not foreach:
        sizes: dict[tuple[torch.device, torch.dtype], int] = {}
        for p in params:
            key = (p.device, p.dtype)
            sizes[key] = max(sizes.get(key, 0), p.numel())
        buffers = {key: torch.empty(n, device=key[0], dtype=key[1]) for key, n in sizes.items()}
        for i, (p, g, m) in enumerate(zip(params, grads, exp_avgs, strict=True)):
            if maximize:
                g = torch.neg(g)
            if prev_grads is not None and prev_grads[i] is not grads[i]:
                h = torch.neg(prev_grads[i]) if maximize else prev_grads[i]
                m.add_(g - h, alpha=correction)
            c = torch.mul(m, beta1, out=_scratch_like(buffers, m))
            c.add_(g, alpha=1.0 - beta1).sign_()
            if weight_decay != 0:
                p.mul_(1.0 - lr * weight_decay)
            p.add_(c, alpha=-lr)
            m.mul_(beta2).add_(g, alpha=1.0 - beta2)
        return
    for idx in _chunks(params):
        ps = [params[i] for i in idx]
        gs = [grads[i] for i in idx]
        ms = [exp_avgs[i] for i in idx]
        if maximize:
            gs = torch._foreach_neg(gs)
        if prev_grads is not None:
            vr = [k for k, i in enumerate(idx) if prev_grads[i] is not grads[i]]
            if vr:
                hs = [prev_grads[idx[k]] for k in vr]
                if maximize:
                    hs = torch._foreach_neg(hs)
                diff = torch._foreach_sub([gs[k] for k in vr], hs)
                torch._foreach_add_([ms[k] for k in vr], diff, alpha=correction)
                del diff, hs
        c = torch._foreach_mul(ms, beta1)
        torch._foreach_add_(c, gs, alpha=1.0 - beta1)
        torch._foreach_sign_(c)
        if weight_decay != 0:
            torch._foreach_mul_(ps, 1.0 - lr * weight_decay)
        torch._foreach_add_(ps, c, alpha=-lr)
        del c
        torch._foreach_mul_(ms, beta2)
        torch._foreach_add_(ms, gs, alpha=1.0 - beta2)


def _check_group(group: dict[str, Any], where: str) -> None:
    check_lr(group["lr"], f"{where}lr")
    group["betas"] = check_betas(f"{where}betas", group["betas"])
    check_nonnegative(f"{where}weight_decay", group["weight_decay"])
    if "correction" in group:
        check_nonnegative(f"{where}correction", group["correction"])
    check_type(f"{where}maximize", group["maximize"], bool)


class _LionBase(DropInOptimizer):
    """Shared constructor, validation and state handling of :class:`Lion` and :class:`LionVR`."""

    def __init__(
        self, params: Iterable[Any], defaults: dict[str, Any], foreach: bool | None, nonfinite: str
    ) -> None:
        if foreach is not None:
            check_type("foreach", foreach, bool)
        self.foreach = foreach
        self.nonfinite = check_nonfinite_policy(nonfinite)
        self.skipped_steps = 0
        self._spare: dict[torch.Tensor, torch.Tensor] = {}
        _check_group(dict(defaults), "")
        super().__init__(params, defaults)

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._spare = {}  # a reusable scratch cache, not state: never pickled

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a param group; its own hyperparameters are validated like the constructor's."""
        super().add_param_group(param_group)
        _check_group(self.param_groups[-1], "param_group: ")

    def _collect(self) -> list[tuple[dict[str, Any], list[torch.Tensor]]]:
        """(group, params with a gradient) per group; sparse gradients are rejected."""
        out = []
        for group in self.param_groups:
            ps = [p for p in group["params"] if p.grad is not None]
            for p in ps:
                if p.grad.is_sparse:
                    raise ValueError(f"grad: {type(self).__name__} does not support sparse gradients")
                if p.is_complex():
                    raise ValueError(f"params: {type(self).__name__} does not support complex parameters")
            out.append((group, ps))
        return out

    def _exp_avgs(self, ps: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        out = []
        for p in ps:
            state = self.state[p]
            if "exp_avg" not in state:
                state["step"] = 0
                state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            out.append(state["exp_avg"])
        return out


class Lion(_LionBase):
    r"""Lion (Chen et al., 2023): :math:`x \leftarrow x - \eta(\operatorname{sign}(c) + \lambda x)`.

    See the module docstring for the update rule. Matches ``lion_pytorch.Lion`` (0.2.5,
    ``decoupled_weight_decay=False``) bit for bit in float64.

    Args:
        params: parameters or param groups (each group may set ``lr``, ``betas``, ``weight_decay``,
            ``maximize``).
        lr: step size :math:`\eta \ge 0` (default 1e-4).
        betas: :math:`(\beta_1, \beta_2)`, each in [0, 1) (default (0.9, 0.99)).
        weight_decay: :math:`\lambda \ge 0` (default 0); the step scales the parameters by
            :math:`1 - \eta\lambda`.
        maximize: ascend the objective.
        foreach: ``torch._foreach_*`` kernels, a per-tensor loop (``False``), or ``None`` (default): foreach
            on CUDA, per-tensor on the CPU (see :func:`lion_update_`); identical results.
        nonfinite: ``"raise"`` (default), ``"skip"`` or ``"off"`` a step with NaN/inf gradients
            (:mod:`optarium.optim._nonfinite`).

    State per parameter: ``exp_avg`` (:math:`m`) and ``step`` (an int).

    Example:
        >>> import torch
        >>> model = torch.nn.Linear(4, 2)
        >>> opt = Lion(model.parameters(), lr=1e-4, weight_decay=1.0)
        >>> model(torch.randn(8, 4)).square().mean().backward()
        >>> opt.step()
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-4,
        betas: tuple[float, float] = (0.9, 0.99),
        weight_decay: float = 0.0,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        nonfinite: str = "raise",
    ) -> None:
        defaults = {"lr": lr, "betas": betas, "weight_decay": weight_decay, "maximize": maximize}
        super().__init__(params, defaults, foreach, nonfinite)

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:  # type: ignore[override]
        """One Lion step from ``param.grad``; ``closure`` (optional) is evaluated first, its loss returned."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        groups = self._collect()
        if not should_step(type(self).__name__, [p.grad for _, ps in groups for p in ps], self.nonfinite):
            self.skipped_steps += 1
            return loss
        for group, ps in groups:
            if not ps:
                continue
            ms = self._exp_avgs(ps)
            beta1, beta2 = group["betas"]
            lion_update_(
                ps,
                [p.grad for p in ps],
                ms,
                lr=group["lr"],
                beta1=beta1,
                beta2=beta2,
                weight_decay=group["weight_decay"],
                maximize=group["maximize"],
                foreach=self.foreach,
            )
            for p in ps:
                self.state[p]["step"] += 1
        return loss


class LionVR(_LionBase):
    r"""Lion-VR (Jiang et al., ICML 2026): Lion with a STORM-corrected momentum; needs ``step(closure)``.

    See the module docstring for the rule and the conventions. Each ``step(closure)`` evaluates the closure
    at :math:`x_t` (loss returned, ``param.grad`` = :math:`g_t` afterwards) and, from the second step on,
    again at the stored :math:`x_{t-1}` (parameters restored bitwise afterwards): **two forward+backward
    passes per step** (one at step 0), three parameter-sized copies, two state buffers per parameter.

    Args:
        params: parameters or param groups (each may set ``lr``, ``betas``, ``weight_decay``, ``correction``,
            ``maximize``).
        lr: step size :math:`\eta \ge 0` (default 1e-4).
        betas: :math:`(\beta_1, \beta_2)`, each in [0, 1) (default (0.9, 0.99)).
        weight_decay: :math:`\lambda \ge 0` (default 0).
        correction: :math:`\gamma \ge 0`, the weight of :math:`g_t - h_t` (default 1, the paper's); 0 is Lion
            and skips the second evaluation.
        maximize: ascend the objective.
        same_randomness: rewind torch's RNG for the second evaluation so both see the same random draws
            (default True).
        foreach: ``torch._foreach_*`` kernels, a per-tensor loop (``False``), or ``None`` (default): foreach
            on CUDA, per-tensor on the CPU (see :func:`lion_update_`); identical results.
        nonfinite: ``"raise"`` (default), ``"skip"`` or ``"off"``; checked on :math:`g_t` before the
            second evaluation and on :math:`h_t` after it.

    State per parameter: ``exp_avg`` (:math:`m`), ``prev_param`` (:math:`x_{t-1}`; groups with
    ``correction > 0``) and ``step``.

    Example:
        >>> import torch
        >>> model = torch.nn.Linear(4, 1)
        >>> opt = LionVR(model.parameters(), lr=1e-3)
        >>> xb, yb = torch.randn(8, 4), torch.randn(8, 1)  # one batch per step, drawn outside the closure
        >>> def closure():
        ...     opt.zero_grad()
        ...     loss = (model(xb) - yb).square().mean()
        ...     loss.backward()
        ...     return loss
        >>> loss = opt.step(closure)
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-4,
        betas: tuple[float, float] = (0.9, 0.99),
        weight_decay: float = 0.0,
        *,
        correction: float = 1.0,
        maximize: bool = False,
        same_randomness: bool = True,
        foreach: bool | None = None,
        nonfinite: str = "raise",
    ) -> None:
        check_type("same_randomness", same_randomness, bool)
        self.same_randomness = same_randomness
        defaults = {
            "lr": lr,
            "betas": betas,
            "weight_decay": weight_decay,
            "correction": correction,
            "maximize": maximize,
        }
        super().__init__(params, defaults, foreach, nonfinite)

    config_attrs = ("same_randomness", "foreach", "nonfinite", "skipped_steps")

    def _rng_devices(self) -> list[int]:
        return sorted(
            {p.device.index or 0 for g in self.param_groups for p in g["params"] if p.device.type == "cuda"}
        )

    def step(self, closure: Callable[[], Any] | None = None) -> Any:  # type: ignore[override]
        """Evaluate ``closure`` at :math:`x_t` and at :math:`x_{t-1}`, then take one Lion-VR step.

        Returns the closure's loss at :math:`x_t`. Raises ``RuntimeError`` without a closure.
        """
        if closure is None:
            raise ValueError(
                "closure: LionVR.step needs a closure: it re-evaluates the loss on the same batch at the "
                "previous iterate (pass step(closure); the closure zeroes grads, computes the loss and "
                "backprops)"
            )
        devices = self._rng_devices()
        rng = None
        if self.same_randomness:
            rng = (torch.get_rng_state(), [torch.cuda.get_rng_state(d) for d in devices])
        with torch.enable_grad():
            loss = closure()
        groups = self._collect()
        if not should_step(type(self).__name__, [p.grad for _, ps in groups for p in ps], self.nonfinite):
            self.skipped_steps += 1
            return loss
        with torch.no_grad():
            grads = {p: p.grad for _, ps in groups for p in ps}
            # Parameters that take the corrected step: a group with correction > 0 and a stored x_{t-1}.
            vr = [p for g, ps in groups if g["correction"] != 0 for p in ps if "prev_param" in self.state[p]]
            prev_grads: dict[torch.Tensor, torch.Tensor] = {}
            current: list[torch.Tensor] = []
            if vr:
                # x_t goes into recycled buffers (last step's x_{t-1}): no allocation in the steady state.
                current = []
                for p in vr:
                    buf = self._spare.pop(p, None)
                    if buf is None or buf.shape != p.shape or buf.dtype != p.dtype or buf.device != p.device:
                        buf = torch.empty_like(p, memory_format=torch.preserve_format)
                    current.append(buf)
                torch._foreach_copy_(current, [p.detach() for p in vr])
                for p in grads:
                    p.grad = None  # the second backward must not write into (or add to) g_t
                try:
                    torch._foreach_copy_([p.detach() for p in vr], [self.state[p]["prev_param"] for p in vr])
                    with torch.random.fork_rng(devices=devices, enabled=rng is not None):
                        if rng is not None:
                            torch.set_rng_state(rng[0])
                            for d, s in zip(devices, rng[1], strict=True):
                                torch.cuda.set_rng_state(s, d)
                        with torch.enable_grad():
                            closure()
                    for p in vr:
                        prev_grads[p] = p.grad if p.grad is not None else torch.zeros_like(p)
                finally:
                    torch._foreach_copy_([p.detach() for p in vr], current)
                    for p, g in grads.items():
                        p.grad = g
                if not should_step(type(self).__name__, list(prev_grads.values()), self.nonfinite):
                    self.skipped_steps += 1
                    return loss
            saved = dict(zip(vr, current, strict=True))
            for group, ps in groups:
                # A parameter with state but no gradient does not move: its x_{t-1} is its current value.
                have = set(ps)
                for p in group["params"]:
                    if p not in have and "prev_param" in self.state.get(p, {}):
                        self.state[p]["prev_param"].copy_(p.detach())
                if not ps:
                    continue
                keep_prev = group["correction"] != 0
                if keep_prev:
                    for p in ps:
                        if p not in saved:  # first corrected step of p: remember x_t before it moves
                            saved[p] = p.detach().clone(memory_format=torch.preserve_format)
                ms = self._exp_avgs(ps)
                gs = [grads[p] for p in ps]
                beta1, beta2 = group["betas"]
                lion_update_(
                    ps,
                    gs,
                    ms,
                    lr=group["lr"],
                    beta1=beta1,
                    beta2=beta2,
                    weight_decay=group["weight_decay"],
                    prev_grads=[prev_grads.get(p, g) for p, g in zip(ps, gs, strict=True)]
                    if keep_prev
                    else None,
                    correction=group["correction"],
                    maximize=group["maximize"],
                    foreach=self.foreach,
                )
                for p in ps:
                    state = self.state[p]
                    state["step"] += 1
                    if keep_prev:
                        old = state.get("prev_param")
                        if old is not None and old is not saved[p]:
                            self._spare[p] = old
                        state["prev_param"] = saved[p]
                    else:
                        state.pop("prev_param", None)
        return loss
