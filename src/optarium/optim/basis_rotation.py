r"""Basis-rotated AdamW for stale gradients, and an exact one-process simulator of pipeline staleness.

Reference: Hyunji Jung, Sungbin Shin, Namhoon Lee, "Mitigating Staleness in Asynchronous Pipeline
Parallelism via Basis Rotation", ICML 2026, arXiv:2602.03515. Construction of the rotated optimizer: Vyas et
al. 2024, SOAP (Adam in Shampoo's eigenbasis), which the paper's "rotate the optimizer's coordinate system to
align with the Hessian eigenbasis" matches.

What is the paper's and what is reconstructed (spec ``shared/papers/basis-rotation.md``): the diagnosis
(coordinate-wise Adam under a misaligned Hessian eigenbasis makes delayed updates point the wrong way) and
the fix (Adam in a rotated basis) are the paper's; the concrete update below is the SOAP-style construction
the spec suggests, with the official code's switches (``geometry`` bilateral/unilateral, ``source`` "2nd"
/"1st", power-iteration + QR refresh with the second moment permuted, ``eps_placement="official"``) as a
reading of the authors' repository describes them. The delay model (stage ``s`` of ``P`` sees delay
``P - s``) and the misalignment measure are the spec's suggestions.

Update rule of :class:`RotatedAdamW` for a 2-D parameter :math:`W\in\mathbb R^{m\times n}` with gradient
:math:`G` at step :math:`t` (``source="2nd"``):

.. math::
    G' = Q_L^\top G Q_R,\quad m \leftarrow \beta_1 m + (1-\beta_1) G,\quad
    v' \leftarrow \beta_2 v' + (1-\beta_2) G'^{\odot 2},\\
    W \leftarrow (1-\eta\lambda) W - \eta\, Q_L\Big(\frac{(Q_L^\top m Q_R)/(1-\beta_1^t)}
    {\sqrt{v'/(1-\beta_2^t)}+\epsilon}\Big) Q_R^\top,\\
    L \leftarrow \beta_s L + (1-\beta_s) G G^\top,\quad R \leftarrow \beta_s R + (1-\beta_s) G^\top G,

and every ``precondition_frequency`` steps :math:`Q_L, Q_R` are refreshed from :math:`L, R` (``refresh=
"eigh"``: eigenvectors, descending eigenvalues, :math:`v'` kept as is; ``"power_qr"``: one power-iteration
step :math:`L Q_L` followed by QR, the columns and :math:`v'` permuted to descending estimated eigenvalues).
The first step is a cold start: :math:`L, R` are initialised with the first gradient and the basis is their
eigenbasis. The momentum is kept in the rotated basis, :math:`m' \leftarrow \beta_1 m' + (1-\beta_1) G'`
(state ``exp_avg``), and re-projected whenever :math:`Q` changes (rotate out with the old basis, in with the
new, in ``basis_dtype``), as SOAP keeps it; in exact arithmetic this equals the formula above (the official
code's momentum in the original coordinates, projected every step), with two matrix products fewer per step.
A state saved by an earlier version (``exp_avg`` in the original coordinates, no ``momentum_rotated`` flag) is
rotated in at its first step.
``source="1st"`` takes the basis from the SVD of the one-step look-ahead momentum
:math:`\beta_1 m + (1-\beta_1) G`; ``source="oracle"`` uses fixed bases given through ``bases``. ``L``,
``R`` and ``Q`` are kept in ``basis_dtype`` (float64 by default: float32 ``eigh`` loses orthogonality).
1-D tensors (and tensors of more than two dimensions) take the plain AdamW path; a side longer than
``max_precond_dim`` is not rotated (unit basis on that side); ``geometry="unilateral"`` rotates only the
shorter side.

``eps_placement``: ``"torch"`` (default) adds :math:`\epsilon` after bias correction, as
``torch.optim.AdamW``; ``"official"`` adds it before (step size :math:`\eta\sqrt{1-\beta_2^t}/(1-\beta_1^t)`,
denominator :math:`\sqrt{v'}+\epsilon`), as the authors' code and both SOAP peers do.

Agreement with ``pytorch_optimizer.SOAP`` 4.1.0 (``tests/optim/test_basis_rotation.py``): with
``first_step="skip"`` (SOAP's first call only initialises the statistics and the basis), ``eps_placement=
"official"``, ``refresh="power_qr"``, ``weight_decay=0`` and no dimension above either ``max_precond_dim``,
the two runs agree to 1e-12 in float64 until the first refresh; from the first refresh on they agree only to
float32 rounding, because the peer computes its QR in float32 (ours in ``basis_dtype``). Where the
definitions differ: the peer decays weights after the update (``p -= lr * wd * p_new``; ours is torch's
decay before the update); the peer's default first call moves nothing (ours, ``first_step="update"``,
updates at once); the peer has no "1st"/"oracle" sources, no unilateral geometry and no eigh refresh (it
uses eigh only at the cold start). ``heavyball.SOAP`` 3.2.1 differs further: state stored in float32
(``storage_dtype``), dimensions merged by default (``merge_dims=True``), ``max_precond_dim=2048``, a
default refresh every 2 steps, and a compile-first chained implementation; it is compared on step time only
(``benchmarks/optim_step.py --only soap``).

:class:`AsyncPipelineSimulator` simulates asynchronous pipeline parallelism with weight stashing in one
process: the parameters are split into ``P`` consecutive stages (a partition of the model's units in forward
order); stage ``s`` (1-based) sees weights ``tau_s`` steps old (``delays="linear"``: ``tau_s = P - s``, the
PipeDream 1F1B schedule's distance to the last stage). One step: build the stale model from a ring buffer of
per-stage snapshots (forward and backward use the same snapshot), run one forward/backward on the batch,
write each stage's gradient into the *current* parameters' ``.grad`` and step that stage's optimizer. With
all delays 0 it is ordinary training, bit for bit.

The paper's staleness baselines are stage-optimizer factories for the simulator (:func:`staleness_factory`):
GPipe (no delay) and PipeDream (AdamW on stale weights), PipeDream-LR (:func:`pipedream_lr_scale`; the spec's
rule, the paper's was not read), the Nesterov correction of Ajanthan et al. 2025 (NAdamW with
:math:`\beta_1 = 0.99`, the practical form of the authors' public run script) and PipeMare of Yang et al.
2021 (:class:`PipeMareStage`: learning-rate rescheduling and weight prediction, our reading of the paper's
rules). Each is exactly its plain optimizer at delay 0.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import torch
from torch.func import functional_call

from optarium._core.validation import (
    check_betas,
    check_choice,
    check_in_range,
    check_int,
    check_nonnegative,
    check_type,
)
from optarium.optim._dropin import DropInOptimizer, check_lr
from optarium.optim._nonfinite import check_nonfinite_policy, should_step

__all__ = [
    "BASIS_SOURCES",
    "EPS_PLACEMENTS",
    "FIRST_STEPS",
    "GEOMETRIES",
    "PIPEDREAM_LR_RULES",
    "REFRESHES",
    "STALENESS_BASELINES",
    "AsyncPipelineSimulator",
    "PipeMareStage",
    "RotatedAdamW",
    "basis_alignment",
    "linear_delays",
    "partition_units",
    "pipedream_lr_scale",
    "pipemare_lr_scale",
    "staleness_factory",
]

GEOMETRIES: tuple[str, ...] = ("bilateral", "unilateral")
BASIS_SOURCES: tuple[str, ...] = ("2nd", "1st", "oracle")
REFRESHES: tuple[str, ...] = ("eigh", "power_qr")
EPS_PLACEMENTS: tuple[str, ...] = ("torch", "official")
FIRST_STEPS: tuple[str, ...] = ("update", "skip")


def basis_alignment(hessian: torch.Tensor, basis: torch.Tensor | None = None) -> float:
    r"""The alignment :math:`a(Q) = \|\mathrm{diag}(Q^\top H Q)\|_F / \|Q^\top H Q\|_F` (1 = aligned).

    Args:
        hessian: a symmetric ``d x d`` matrix (e.g. a block Hessian built from HVPs).
        basis: an orthogonal ``d x d`` matrix (``None``: the coordinate basis).
    """
    check_type("hessian", hessian, torch.Tensor)
    if hessian.dim() != 2 or hessian.shape[0] != hessian.shape[1]:
        raise ValueError(f"hessian: must be a square matrix, got shape {tuple(hessian.shape)}")
    h = hessian.to(torch.float64)
    if basis is not None:
        check_type("basis", basis, torch.Tensor)
        if tuple(basis.shape) != tuple(h.shape):
            raise ValueError(f"basis: must have shape {tuple(h.shape)}, got {tuple(basis.shape)}")
        q = basis.to(torch.float64)
        h = q.T @ h @ q
    total = float(torch.linalg.matrix_norm(h))
    if total == 0.0:
        return 1.0
    return float(torch.linalg.vector_norm(torch.diagonal(h))) / total


def _eigh_desc(mat: torch.Tensor) -> torch.Tensor:
    """Eigenvectors of a symmetric matrix, columns in descending eigenvalue order."""
    _, q = torch.linalg.eigh(mat)
    return torch.flip(q, dims=[1])


def _check_group(group: Mapping[str, Any], where: str = "") -> None:
    check_lr(group["lr"], f"{where}lr")
    check_betas(f"{where}betas", group["betas"])
    check_in_range(f"{where}shampoo_beta", group["shampoo_beta"], 0.0, 1.0, high_inclusive=False)
    check_nonnegative(f"{where}eps", group["eps"])
    check_nonnegative(f"{where}weight_decay", group["weight_decay"])
    check_int(f"{where}precondition_frequency", group["precondition_frequency"], minimum=1)
    check_int(f"{where}max_precond_dim", group["max_precond_dim"], minimum=1)


class RotatedAdamW(DropInOptimizer):
    """AdamW in a rotated basis (SOAP-style basis rotation, arXiv:2602.03515); see the module docstring.

    Args:
        params: parameters or param groups (real floating tensors; complex parameters are refused).
        lr: learning rate (default 3e-3, the official default).
        betas: Adam's (beta1, beta2), each in [0, 1) (default (0.9, 0.95)).
        shampoo_beta: EMA coefficient of ``L`` and ``R`` in [0, 1) (default 0.95).
        precondition_frequency: refresh the basis every this many steps (>= 1; default 10).
        max_precond_dim: a side longer than this is not rotated (default 1024).
        eps: denominator term (default 1e-8).
        weight_decay: decoupled weight decay, torch's order (decay, then update) (default 0).
        geometry: ``"bilateral"`` (both sides) or ``"unilateral"`` (the shorter side only).
        source: ``"2nd"`` (EMA of ``G G^T`` and ``G^T G``), ``"1st"`` (SVD of the look-ahead momentum) or
            ``"oracle"`` (fixed bases from ``bases``; a 2-D parameter absent from it is not rotated).
        refresh: ``"eigh"`` or ``"power_qr"`` (source "2nd" only).
        eps_placement: ``"torch"`` (after bias correction) or ``"official"`` (before).
        basis_dtype: dtype of ``L``, ``R`` and ``Q`` (default float64).
        bases: for ``source="oracle"``: ``{param: (Q_L or None, Q_R or None)}``.
        first_step: ``"update"`` (default) or ``"skip"`` (SOAP's first call only initialises the basis).
        rotation_dtype: ``"basis"`` (default): the per-step products (rotations, ``G G^T``) run in
            ``basis_dtype`` (float64 arithmetic for float32 parameters); ``"param"``: they run in the
            parameter's dtype with the basis rounded to it, while ``L``, ``R``, ``Q`` and every refresh
            (eigh, QR) stay in ``basis_dtype`` (the peers' cost; see ``benchmarks/optim_step.py --only
            soap``). The two are identical for float64 parameters. In float32 neither tracks a float64
            run closely on small problems: rounded gradient components in rotated directions where
            ``v'`` is tiny are normalised to O(1) steps by Adam (measured on a 3 x 3 least-squares
            parameter, 20 steps, lr 1e-2: max deviation from float64 0.04 ("param") and 1.1 ("basis")).
        foreach: accepted for drop-in compatibility; the update is per tensor either way (the rotations are
            matrix products of different shapes), so both settings give identical results.
        nonfinite: ``"raise"`` (default), ``"skip"`` or ``"off"`` (the optim family's shared policy).

    Example:
        >>> import torch
        >>> model = torch.nn.Linear(4, 3)
        >>> opt = RotatedAdamW(model.parameters(), lr=3e-3)
        >>> model(torch.randn(8, 4)).square().mean().backward()
        >>> opt.step()
    """

    config_attrs = (
        "geometry",
        "source",
        "refresh",
        "eps_placement",
        "basis_dtype",
        "first_step",
        "rotation_dtype",
        "foreach",
        "nonfinite",
        "skipped_steps",
    )

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 3e-3,
        betas: tuple[float, float] = (0.9, 0.95),
        shampoo_beta: float = 0.95,
        precondition_frequency: int = 10,
        max_precond_dim: int = 1024,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        *,
        geometry: str = "bilateral",
        source: str = "2nd",
        refresh: str = "eigh",
        eps_placement: str = "torch",
        basis_dtype: torch.dtype = torch.float64,
        bases: Mapping[torch.Tensor, tuple[torch.Tensor | None, torch.Tensor | None]] | None = None,
        first_step: str = "update",
        rotation_dtype: str = "basis",
        foreach: bool | None = None,
        nonfinite: str = "raise",
    ) -> None:
        defaults = {
            "lr": lr,
            "betas": tuple(betas) if isinstance(betas, Sequence) and not isinstance(betas, str) else betas,
            "shampoo_beta": shampoo_beta,
            "precondition_frequency": precondition_frequency,
            "max_precond_dim": max_precond_dim,
            "eps": eps,
            "weight_decay": weight_decay,
        }
        _check_group(defaults)
        self.geometry = check_choice("geometry", geometry, GEOMETRIES)
        self.source = check_choice("source", source, BASIS_SOURCES)
        self.refresh = check_choice("refresh", refresh, REFRESHES)
        self.eps_placement = check_choice("eps_placement", eps_placement, EPS_PLACEMENTS)
        self.first_step = check_choice("first_step", first_step, FIRST_STEPS)
        self.rotation_dtype = check_choice("rotation_dtype", rotation_dtype, ("param", "basis"))
        check_type("basis_dtype", basis_dtype, torch.dtype)
        if not basis_dtype.is_floating_point:
            raise ValueError(f"basis_dtype: must be a floating dtype, got {basis_dtype}")
        self.basis_dtype = basis_dtype
        if foreach is not None:
            check_type("foreach", foreach, bool)
        self.foreach = foreach
        self.nonfinite = check_nonfinite_policy(nonfinite)
        self.skipped_steps = 0
        if bases is not None and source != "oracle":
            raise ValueError("bases: only used with source='oracle'")
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                if p.is_complex() or not p.is_floating_point():
                    raise ValueError("params: RotatedAdamW takes real floating parameters only")
        self._bases: dict[int, tuple[torch.Tensor | None, torch.Tensor | None]] = {}
        if bases is not None:
            ids = {id(p) for g in self.param_groups for p in g["params"]}
            for p, pair in bases.items():
                if id(p) not in ids:
                    raise ValueError("bases: a key is not one of the optimizer's parameters")
                if p.dim() != 2:
                    raise ValueError("bases: oracle bases apply to 2-D parameters only")
                if not isinstance(pair, tuple | list) or len(pair) != 2:
                    raise ValueError("bases: each value must be a pair (Q_L or None, Q_R or None)")
                ql, qr = pair
                for q, n, side in ((ql, p.shape[0], "Q_L"), (qr, p.shape[1], "Q_R")):
                    if q is not None and tuple(q.shape) != (n, n):
                        raise ValueError(f"bases: {side} must have shape ({n}, {n}), got {tuple(q.shape)}")
                self._bases[id(p)] = (
                    None if ql is None else ql.detach().to(device=p.device, dtype=basis_dtype).clone(),
                    None if qr is None else qr.detach().to(device=p.device, dtype=basis_dtype).clone(),
                )

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group (its settings are validated; missing ones take the defaults)."""
        super().add_param_group(param_group)
        _check_group(self.param_groups[-1], "param_group.")

    # ---- rotations -------------------------------------------------------------------------------------
    def _sides(self, shape: torch.Size, group: Mapping[str, Any]) -> tuple[bool, bool]:
        m, n = shape
        cap = group["max_precond_dim"]
        left, right = m <= cap, n <= cap
        if self.geometry == "unilateral":
            if left and right:
                left, right = (True, False) if m <= n else (False, True)
        return left, right

    @staticmethod
    def _rot_in(x: torch.Tensor, ql: torch.Tensor | None, qr: torch.Tensor | None) -> torch.Tensor:
        if ql is None and qr is None:
            return x
        y = x.to(ql.dtype if ql is not None else qr.dtype)  # type: ignore[union-attr]
        if ql is not None:
            y = ql.T @ y
        if qr is not None:
            y = y @ qr
        return y.to(x.dtype)

    @staticmethod
    def _rot_out(x: torch.Tensor, ql: torch.Tensor | None, qr: torch.Tensor | None) -> torch.Tensor:
        if ql is None and qr is None:
            return x
        y = x.to(ql.dtype if ql is not None else qr.dtype)  # type: ignore[union-attr]
        if ql is not None:
            y = ql @ y
        if qr is not None:
            y = y @ qr.T
        return y.to(x.dtype)

    def _cold_start(
        self, p: torch.Tensor, g: torch.Tensor, st: dict[str, Any], group: Mapping[str, Any]
    ) -> None:
        st["step"] = 0
        st["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        st["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        st["L"] = st["R"] = st["Q_L"] = st["Q_R"] = None
        st["momentum_rotated"] = True  # exp_avg is kept in the rotated basis (zeros: the same in any basis)
        if p.dim() != 2:
            return
        if self.source == "oracle":
            st["Q_L"], st["Q_R"] = self._bases.get(id(p), (None, None))
            return
        left, right = self._sides(p.shape, group)
        gb = g.to(self.basis_dtype)
        if self.source == "2nd":
            w = 1.0 - group["shampoo_beta"]
            if left:
                st["L"] = w * (gb @ gb.T)
                st["Q_L"] = _eigh_desc(st["L"])
            if right:
                st["R"] = w * (gb.T @ gb)
                st["Q_R"] = _eigh_desc(st["R"])
        else:
            u, _, vh = torch.linalg.svd(gb, full_matrices=True)
            st["Q_L"] = u if left else None
            st["Q_R"] = vh.T.contiguous() if right else None

    def _refresh(
        self, p: torch.Tensor, g: torch.Tensor, st: dict[str, Any], group: Mapping[str, Any]
    ) -> None:
        old_l, old_r = st["Q_L"], st["Q_R"]
        self._new_basis(p, g, st, group)
        # re-project the rotated momentum: rotate out with the old basis, in with the new (in basis_dtype)
        m = st["exp_avg"]
        y = m.to(self.basis_dtype)
        if old_l is not None:
            y = (st["Q_L"].T @ old_l) @ y
        if old_r is not None:
            y = y @ (old_r.T @ st["Q_R"])
        m.copy_(y)

    def _new_basis(
        self, p: torch.Tensor, g: torch.Tensor, st: dict[str, Any], group: Mapping[str, Any]
    ) -> None:
        if self.source == "1st":
            b1 = group["betas"][0]
            m_orig = self._rot_out(st["exp_avg"].to(self.basis_dtype), st["Q_L"], st["Q_R"])
            look = b1 * m_orig + (1.0 - b1) * g.to(self.basis_dtype)
            u, _, vh = torch.linalg.svd(look, full_matrices=True)
            if st["Q_L"] is not None:
                st["Q_L"] = u
            if st["Q_R"] is not None:
                st["Q_R"] = vh.T.contiguous()
            return
        for side, key_s, key_q in ((0, "L", "Q_L"), (1, "R", "Q_R")):
            stat = st[key_s]
            if stat is None:
                continue
            if self.refresh == "eigh":
                st[key_q] = _eigh_desc(stat)
            else:
                q = st[key_q]
                prod = stat @ q
                est = (q * prod).sum(dim=0)
                order = torch.argsort(est, descending=True)
                st["exp_avg_sq"] = st["exp_avg_sq"].index_select(side, order.to(p.device))
                st[key_q] = torch.linalg.qr(prod.index_select(1, order)).Q

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:  # type: ignore[override]
        """One optimizer step (``closure``, if given, is evaluated first under ``torch.enable_grad()``)."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        grads = [p.grad for g in self.param_groups for p in g["params"] if p.grad is not None]
        if any(gr.is_sparse for gr in grads):
            raise ValueError("params: RotatedAdamW does not support sparse gradients")
        if not should_step(type(self).__name__, grads, self.nonfinite):
            self.skipped_steps += 1
            return loss
        for group in self.param_groups:
            b1, b2 = group["betas"]
            lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
            bs, freq = group["shampoo_beta"], group["precondition_frequency"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad
                st = self.state[p]
                fresh = False
                if not st:
                    self._cold_start(p, g, st, group)
                    fresh = True
                    if self.first_step == "skip":
                        continue
                st["step"] += 1
                t = st["step"]
                ql, qr = st["Q_L"], st["Q_R"]
                if self.rotation_dtype == "param":
                    # the per-step products in the parameter's dtype; the basis itself stays in basis_dtype
                    ql = None if ql is None else ql.to(p.dtype)
                    qr = None if qr is None else qr.to(p.dtype)
                if wd != 0:
                    p.mul_(1.0 - lr * wd)
                rotated = ql is not None or qr is not None
                if rotated and not st.get("momentum_rotated", False):
                    # a state saved when exp_avg was kept in the original coordinates: rotate it in once
                    st["exp_avg"] = self._rot_in(st["exp_avg"], st["Q_L"], st["Q_R"])
                st["momentum_rotated"] = True
                m, v = st["exp_avg"], st["exp_avg_sq"]
                g_rot = self._rot_in(g, ql, qr)
                # the momentum lives in the rotated basis (re-projected at each refresh), as SOAP keeps it:
                # equal in exact arithmetic to rotating an original-coordinate momentum every step, with two
                # matrix products fewer per step
                m.mul_(b1).add_(g_rot, alpha=1.0 - b1)
                v.mul_(b2).addcmul_(g_rot, g_rot, value=1.0 - b2)
                bc1 = 1.0 - b1**t
                bc2 = 1.0 - b2**t
                if self.eps_placement == "torch":
                    denom = (v.sqrt() / math.sqrt(bc2)).add_(eps)
                    step_size = lr / bc1
                else:
                    denom = v.sqrt().add_(eps)
                    step_size = lr * math.sqrt(bc2) / bc1
                if not rotated:
                    p.addcdiv_(m, denom, value=-step_size)
                else:
                    upd = self._rot_out(m / denom, ql, qr)
                    p.add_(upd, alpha=-step_size)
                if p.dim() != 2 or self.source == "oracle":
                    continue
                if self.source == "2nd" and not fresh:
                    gb = g if self.rotation_dtype == "param" else g.to(self.basis_dtype)
                    if st["L"] is not None:
                        st["L"].mul_(bs).add_((gb @ gb.T).to(self.basis_dtype), alpha=1.0 - bs)
                    if st["R"] is not None:
                        st["R"].mul_(bs).add_((gb.T @ gb).to(self.basis_dtype), alpha=1.0 - bs)
                if (ql is not None or qr is not None) and t % freq == 0:
                    self._refresh(p, g, st, group)
        return loss


# ---- pipeline staleness ---------------------------------------------------------------------------------
def linear_delays(stages: int) -> list[int]:
    """PipeDream 1F1B delays: stage ``s`` (1-based, 1 = closest to the input) of ``P`` sees ``P - s``."""
    stages = check_int("stages", stages, minimum=1)
    return [stages - s for s in range(1, stages + 1)]


def partition_units(n_units: int, stages: int) -> list[range]:
    """Split ``n_units`` consecutive units into ``stages`` contiguous, as-even-as-possible blocks.

    The first ``n_units % stages`` blocks get one unit more. ``stages > n_units`` raises ``ValueError``.
    """
    n_units = check_int("n_units", n_units, minimum=1)
    stages = check_int("stages", stages, minimum=1)
    if stages > n_units:
        raise ValueError(f"stages: more stages ({stages}) than units ({n_units})")
    base, extra = divmod(n_units, stages)
    out, start = [], 0
    for s in range(stages):
        size = base + (1 if s < extra else 0)
        out.append(range(start, start + size))
        start += size
    return out


def _default_units(model: torch.nn.Module) -> list[list[str]]:
    """Top-level children with parameters, in registration order (tied parameters: first owner)."""
    seen: set[int] = set()
    id_to_name = {id(p): n for n, p in model.named_parameters()}
    units: list[list[str]] = []
    for _, child in model.named_children():
        names = []
        for p in child.parameters():
            if id(p) not in seen:
                seen.add(id(p))
                names.append(id_to_name[id(p)])
        if names:
            units.append(names)
    rest = [n for n, p in model.named_parameters() if id(p) not in seen]
    if rest:
        units.append(rest)
    return units


class AsyncPipelineSimulator:
    """Exact one-process simulation of asynchronous pipeline staleness with weight stashing.

    Args:
        model: the full model (an ``nn.Module``).
        stages: number of pipeline stages ``P >= 1``.
        delays: ``"linear"`` (``tau_s = P - s``) or a sequence of ``P`` integers ``>= 0``.
        optimizer_factory: ``factory(params) -> Optimizer``, called once per stage with that stage's
            parameters (so stage-wise settings, e.g. PipeDream-LR, can depend on the stage:
            ``factory(params, stage=s, delay=tau)`` is used if the factory accepts those keywords).
        units: the model's units in forward order, each a list of parameter names (default: top-level
            children holding parameters, a tied parameter belonging to its first owner, i.e. stage 1).

    A stage optimizer that has a method ``forward_weights(p)`` (e.g. :class:`PipeMareStage`) supplies the
    weights stored in that stage's snapshots (weight prediction); otherwise the snapshots are the weights.
    :func:`staleness_factory` builds the factories of the paper's baselines (GPipe, PipeDream, PipeDream-LR,
    Nesterov correction, PipeMare) and of the rotated optimizer.

    Example:
        >>> import torch
        >>> model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
        >>> sim = AsyncPipelineSimulator(model, 2, optimizer_factory=lambda ps: torch.optim.SGD(ps, lr=0.1))
        >>> x, y = torch.randn(8, 3), torch.randn(8, 1)
        >>> loss = sim.step((x, y), torch.nn.functional.mse_loss)
    """

    def __init__(
        self,
        model: torch.nn.Module,
        stages: int,
        delays: str | Sequence[int] = "linear",
        *,
        optimizer_factory: Callable[..., torch.optim.Optimizer],
        units: Sequence[Sequence[str]] | None = None,
    ) -> None:
        check_type("model", model, torch.nn.Module)
        stages = check_int("stages", stages, minimum=1)
        if not callable(optimizer_factory):
            raise TypeError("optimizer_factory: must be callable")
        names = dict(model.named_parameters())
        if units is None:
            unit_names = _default_units(model)
        else:
            unit_names = [list(u) for u in units]
            flat = [n for u in unit_names for n in u]
            unknown = [n for n in flat if n not in names]
            if unknown:
                raise ValueError(f"units: unknown parameter names {unknown[:3]}")
            if len(set(flat)) != len(flat) or set(flat) != set(names):
                raise ValueError("units: must partition the model's parameters (each name exactly once)")
        if not unit_names:
            raise ValueError("model: has no parameters")
        blocks = partition_units(len(unit_names), stages)
        if isinstance(delays, str):
            check_choice("delays", delays, ("linear",))
            taus = linear_delays(stages)
        else:
            taus = [check_int(f"delays[{i}]", d, minimum=0) for i, d in enumerate(delays)]
            if len(taus) != stages:
                raise ValueError(f"delays: must have {stages} entries (one per stage), got {len(taus)}")
        self.model = model
        self.delays: list[int] = taus
        self.stage_names: list[list[str]] = [[n for u in b for n in unit_names[u]] for b in blocks]
        self._params = names
        self.optimizers: list[Any] = []
        for s, stage in enumerate(self.stage_names):
            ps = [names[n] for n in stage]
            try:
                opt = optimizer_factory(ps, stage=s + 1, delay=taus[s])
            except TypeError:
                opt = optimizer_factory(ps)
            self.optimizers.append(opt)
        self._buffers: list[deque[dict[str, torch.Tensor]]] = [
            deque([self._snapshot(s)], maxlen=tau + 1) for s, tau in enumerate(taus)
        ]
        self.steps = 0

    def _snapshot(self, s: int) -> dict[str, torch.Tensor]:
        predict = getattr(self.optimizers[s], "forward_weights", None)
        if callable(predict):
            return {n: predict(self._params[n]) for n in self.stage_names[s]}
        return {n: self._params[n].detach().clone() for n in self.stage_names[s]}

    def stale_parameters(self) -> dict[str, torch.Tensor]:
        """The weights the next step's forward/backward uses (stage ``s``: snapshot ``max(t - tau_s, 0)``)."""
        out: dict[str, torch.Tensor] = {}
        for stage, tau, buf in zip(self.stage_names, self.delays, self._buffers, strict=True):
            if tau == 0:
                out.update({n: self._params[n] for n in stage})
            else:
                out.update(buf[0])
        return out

    def step(
        self,
        batch: tuple[Any, Any],
        loss_fn: Callable[[Any, Any], torch.Tensor],
        *,
        max_grad_norm: float | None = None,
    ) -> float:
        """One pipeline step on ``batch = (inputs, targets)``: stale fwd/bwd, per-stage updates; the loss.

        ``max_grad_norm``: clip the global norm of the (stale) gradient over all stages to this value before
        the stage updates (``torch.nn.utils.clip_grad_norm_``; ``None``: no clipping).
        """
        if not isinstance(batch, tuple | list) or len(batch) != 2:
            raise ValueError("batch: must be a pair (inputs, targets)")
        if max_grad_norm is not None:
            check_in_range("max_grad_norm", max_grad_norm, 0.0, math.inf, low_inclusive=False)
        stale = self.stale_parameters()
        leaves = {n: (t if t.requires_grad else t.detach().requires_grad_(True)) for n, t in stale.items()}
        current = {n: self._params[n] for n in leaves}
        for opt in self.optimizers:
            opt.zero_grad(set_to_none=True)
        with torch.enable_grad():
            if all(leaves[n] is current[n] for n in leaves):
                loss = loss_fn(self.model(batch[0]), batch[1])
                loss.backward()
            else:
                loss = loss_fn(functional_call(self.model, leaves, (batch[0],)), batch[1])
                grads = torch.autograd.grad(loss, list(leaves.values()), allow_unused=True)
                for n, gr in zip(leaves, grads, strict=True):
                    current[n].grad = None if gr is None else gr.detach()
        if max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(list(current.values()), max_grad_norm)
        for opt in self.optimizers:
            opt.step()
        for s, buf in enumerate(self._buffers):
            if buf.maxlen and buf.maxlen > 1:
                buf.append(self._snapshot(s))
        self.steps += 1
        return float(loss.detach())


# ---- staleness baselines ----------------------------------------------------------------------------------
#: Names accepted by :func:`staleness_factory` (GPipe: no staleness; the rest: asynchronous, stale weights).
STALENESS_BASELINES: tuple[str, ...] = (
    "gpipe",
    "pipedream",
    "pipedream_lr",
    "nesterov",
    "pipemare",
    "rotated",
)
PIPEDREAM_LR_RULES: tuple[str, ...] = ("sqrt", "linear")


def pipedream_lr_scale(delay: int, rule: str = "sqrt") -> float:
    r"""PipeDream-LR's stage-wise learning-rate factor for a stage of delay ``tau``.

    ``rule="sqrt"``: :math:`1/\sqrt{1+\tau}` (the spec's choice: the basis-rotation paper's rule was not
    read); ``"linear"``: :math:`1/(1+\tau)`. Delay 0 gives exactly 1.
    """
    delay = check_int("delay", delay, minimum=0)
    rule = check_choice("rule", rule, PIPEDREAM_LR_RULES)
    if delay == 0:
        return 1.0
    return 1.0 / math.sqrt(1.0 + delay) if rule == "sqrt" else 1.0 / (1.0 + delay)


def pipemare_lr_scale(step: int, delay: int, warmup_steps: int) -> float:
    r"""PipeMare's learning-rate rescheduling factor :math:`\tau^{-p_k}`, :math:`p_k = \max(0, 1 - k/K)`.

    At step ``k`` (0-based) a stage of delay ``tau`` starts at ``lr / tau`` and warms up geometrically to
    ``lr`` over ``K = warmup_steps`` steps (Yang et al. 2021, "T1"; the exponent schedule is our reading of
    it). Delays 0 and 1 and ``K = 0`` give exactly 1.
    """
    step = check_int("step", step, minimum=0)
    delay = check_int("delay", delay, minimum=0)
    warmup_steps = check_int("warmup_steps", warmup_steps, minimum=0)
    if delay <= 1 or warmup_steps == 0 or step >= warmup_steps:
        return 1.0
    return float(delay) ** -(1.0 - step / warmup_steps)


class PipeMareStage:
    r"""PipeMare for one pipeline stage: weight prediction and learning-rate warm-up around a base optimizer.

    Reference: Bowen Yang, Jian Zhang, Jonathan Li, Christopher Ré, Christopher Aberger, Christopher De Sa,
    "PipeMare: Asynchronous Pipeline Parallel DNN Training", MLSys 2021 (arXiv:1910.05124). The paper's two
    techniques, as this class implements them (our reading of them; the paper text was not available here):

    - learning-rate rescheduling: step ``k`` runs the base optimizer with every group's ``lr`` multiplied by
      :func:`pipemare_lr_scale` ``(k, delay, warmup_steps)`` (restored after the step, so schedulers that
      set ``group["lr"]`` act as usual);
    - weight prediction: a bias-corrected EMA of the per-step weight change,
      :math:`\delta \leftarrow \gamma\delta + (1-\gamma)(w_{k+1} - w_k)`, :math:`\hat\delta =
      \delta/(1-\gamma^k)`, and :meth:`forward_weights` returns :math:`w + \tau\hat\delta`, the weights
      extrapolated to the step at which the stage's gradient will be applied. :class:`AsyncPipelineSimulator`
      stores these predicted weights in its snapshots (so the stale forward/backward runs at them). The
      bias correction is ours: with it the prediction is exact on a linear trajectory from the first step.
      In the paper the correction targets the forward/backward weight discrepancy of a pipeline without
      weight stashing; with weight stashing (the simulator's model) the same extrapolation compensates the
      whole delay, which is how the basis-rotation paper uses PipeMare as a baseline.

    At delay 0 both are the identity: the stage is its base optimizer exactly.

    Args:
        optimizer: the stage's base optimizer (e.g. ``torch.optim.AdamW`` over the stage's parameters).
        delay: the stage's delay ``tau >= 0``.
        warmup_steps: ``K >= 0`` of the learning-rate rescheduling (0: off).
        gamma: EMA coefficient of the weight change in [0, 1) (default 0.9).

    Example:
        >>> import torch
        >>> w = torch.nn.Parameter(torch.zeros(3))
        >>> stage = PipeMareStage(torch.optim.SGD([w], lr=0.1), delay=2, warmup_steps=0)
        >>> w.grad = -torch.ones(3)
        >>> stage.step()
        >>> stage.forward_weights(w)
        tensor([0.3000, 0.3000, 0.3000])
    """

    def __init__(
        self, optimizer: torch.optim.Optimizer, delay: int, *, warmup_steps: int = 0, gamma: float = 0.9
    ) -> None:
        check_type("optimizer", optimizer, torch.optim.Optimizer)
        self.optimizer = optimizer
        self.delay = check_int("delay", delay, minimum=0)
        self.warmup_steps = check_int("warmup_steps", warmup_steps, minimum=0)
        self.gamma = check_in_range("gamma", gamma, 0.0, 1.0, high_inclusive=False)
        self.steps = 0
        self.velocity: dict[int, torch.Tensor] = {}

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        """The base optimizer's param groups (shared, not copied)."""
        return self.optimizer.param_groups

    def _params(self) -> list[torch.Tensor]:
        return [p for g in self.optimizer.param_groups for p in g["params"]]

    def zero_grad(self, set_to_none: bool = True) -> None:
        """The base optimizer's ``zero_grad``."""
        self.optimizer.zero_grad(set_to_none=set_to_none)

    @torch.no_grad()
    def step(self) -> None:
        """One base step at the rescheduled learning rate; then the weight-change EMA (delay > 0 only)."""
        scale = pipemare_lr_scale(self.steps, self.delay, self.warmup_steps)
        before = [p.detach().clone() for p in self._params()] if self.delay > 0 else []
        saved = [g["lr"] for g in self.optimizer.param_groups]
        if scale != 1.0:
            for g in self.optimizer.param_groups:
                g["lr"] = g["lr"] * scale
        try:
            self.optimizer.step()
        finally:
            for g, lr in zip(self.optimizer.param_groups, saved, strict=True):
                g["lr"] = lr
        self.steps += 1
        if self.delay == 0:
            return
        for p, old in zip(self._params(), before, strict=True):
            vel = self.velocity.get(id(p))
            change = p.detach() - old
            if vel is None:
                self.velocity[id(p)] = (1.0 - self.gamma) * change
            else:
                vel.mul_(self.gamma).add_(change, alpha=1.0 - self.gamma)

    def forward_weights(self, p: torch.Tensor) -> torch.Tensor:
        r"""The predicted weights :math:`w + \tau\hat\delta` of ``p`` (a fresh tensor; ``p`` at delay 0)."""
        vel = self.velocity.get(id(p))
        if self.delay == 0 or vel is None:
            return p.detach().clone()
        return p.detach() + (self.delay / (1.0 - self.gamma**self.steps)) * vel

    def state_dict(self) -> dict[str, Any]:
        """The base optimizer's state dict plus the step count and the velocities (in parameter order)."""
        return {
            "optimizer": self.optimizer.state_dict(),
            "steps": self.steps,
            "velocity": [self.velocity.get(id(p)) for p in self._params()],
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Inverse of :meth:`state_dict`."""
        self.optimizer.load_state_dict(state["optimizer"])
        self.steps = int(state["steps"])
        self.velocity = {
            id(p): v.clone() for p, v in zip(self._params(), state["velocity"], strict=True) if v is not None
        }


def staleness_factory(
    name: str,
    lr: float,
    *,
    betas: tuple[float, float] = (0.9, 0.95),
    eps: float = 1e-8,
    weight_decay: float = 0.0,
    lr_rule: str = "sqrt",
    nesterov_beta1: float = 0.99,
    momentum_decay: float = 0.004,
    warmup_steps: int = 0,
    pipemare_gamma: float = 0.9,
    rotated_kwargs: Mapping[str, Any] | None = None,
) -> Callable[..., Any]:
    r"""An ``optimizer_factory(params, stage=s, delay=tau)`` for :class:`AsyncPipelineSimulator`.

    The staleness baselines of the basis-rotation paper (arXiv:2602.03515), each AdamW-based:

    - ``"gpipe"``: ``torch.optim.AdamW`` (run it with all delays 0: the synchronous reference);
    - ``"pipedream"``: ``torch.optim.AdamW`` on stale (weight-stashed) weights (Narayanan et al. 2019);
    - ``"pipedream_lr"``: AdamW with the stage's ``lr`` times :func:`pipedream_lr_scale` ``(tau, lr_rule)``;
    - ``"nesterov"``: Nesterov delay correction (Ajanthan et al. 2025, "Nesterov Method for Asynchronous
      Pipeline Parallel Optimization", ICML 2025, arXiv:2505.01099): ``torch.optim.NAdam`` with decoupled
      weight decay and :math:`\beta_1` = ``nesterov_beta1`` (0.99), which is how the authors' public run
      script trains their method (read in a public copy of their repository; the paper's derivation of the
      modified look-ahead was not read, so this is the practical form, not a re-derivation);
    - ``"pipemare"``: :class:`PipeMareStage` around AdamW (weight prediction + learning-rate warm-up of
      ``warmup_steps``; Yang et al. 2021);
    - ``"rotated"``: :class:`RotatedAdamW` (``rotated_kwargs`` passed on).

    At delay 0 every baseline except ``"nesterov"`` is ``torch.optim.AdamW`` with these settings exactly (the
    Nesterov baseline is ``torch.optim.NAdam``, and ``"rotated"`` is RotatedAdamW).
    """
    name = check_choice("name", name, STALENESS_BASELINES)
    check_lr(lr)
    check_betas("betas", betas)
    check_nonnegative("eps", eps)
    check_nonnegative("weight_decay", weight_decay)
    check_choice("lr_rule", lr_rule, PIPEDREAM_LR_RULES)
    check_in_range("nesterov_beta1", nesterov_beta1, 0.0, 1.0, high_inclusive=False)
    check_nonnegative("momentum_decay", momentum_decay)
    check_int("warmup_steps", warmup_steps, minimum=0)
    check_in_range("pipemare_gamma", pipemare_gamma, 0.0, 1.0, high_inclusive=False)
    extra = dict(rotated_kwargs or {})
    betas = (float(betas[0]), float(betas[1]))

    def factory(params: Iterable[torch.Tensor], stage: int = 1, delay: int = 0) -> Any:
        delay = check_int("delay", delay, minimum=0)
        ps = list(params)
        if name == "rotated":
            return RotatedAdamW(ps, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, **extra)
        if name == "nesterov":
            return torch.optim.NAdam(
                ps,
                lr=lr,
                betas=(nesterov_beta1, betas[1]),
                eps=eps,
                weight_decay=weight_decay,
                momentum_decay=momentum_decay,
                decoupled_weight_decay=True,
            )
        stage_lr = lr * pipedream_lr_scale(delay, lr_rule) if name == "pipedream_lr" else lr
        adamw = torch.optim.AdamW(ps, lr=stage_lr, betas=betas, eps=eps, weight_decay=weight_decay)
        if name == "pipemare":
            return PipeMareStage(adamw, delay, warmup_steps=warmup_steps, gamma=pipemare_gamma)
        return adamw

    return factory
