r"""Natural hypergradient descent (NHGD): the empirical Fisher as the Hessian surrogate of the lower problem.

Paper: Kong, Chen, Zhang, Mou, "Natural Hypergradient Descent: Algorithm Design, Convergence Analysis, and
Parallel Implementation", arXiv:2602.10905 (2026). **From the paper** (abstract, problem notation, TL;DR): the
implicit hypergradient ``∇Φ = ∇_v f − ∇²_{vθ} g · H^{-1} ∇_θ f``; for a lower problem that
is a (well-specified) negative log-likelihood the Hessian at the optimum equals the Fisher information, so
``H^{-1}`` is replaced by the inverse of the *empirical Fisher* ``F̂ = (1/n) Σ ∇ℓ_i ∇ℓ_iᵀ``, built from the
per-sample gradients that inner SGD computes anyway, *during* the inner loop ("optimize-and-approximate",
in parallel).
**Reconstructed** (the algorithm box, step sizes and the inverse-update formula were not found;
/work/shared/papers/nhgd.md):

1. per outer step ``k``: warm-started inner SGD ``θ_{t+1} = θ_t − α (mean_i w_i G_t[i] + ∇_θ R)``
   on minibatches ``B_t`` of ``b`` samples, where ``G_t`` is the ``b × d`` per-sample gradient matrix;
2. a running Fisher ``F_{t+1} = (1 − ρ_t) F_t + (ρ_t / b) G_tᵀ W G_t`` from ``F_0 = δ I`` with
   ``ρ_t = 1/(t+2)`` (plain average over the trajectory) or a constant ``ρ`` (EMA); ``W = diag(w_i)`` for
   sample weights (the weighted empirical Fisher);
3. one solve ``(F_T + δ I + ∇²_θθ R) w = ∇_θ f`` by Cholesky (``fisher="full"``; elementwise for
   ``fisher="diag"``, which keeps O(d) state), then the mixed term ``∇_v ⟨∇_θ g(v, θ_T), w⟩`` by one exact
   reverse pass on the training data and ``h = ∇_v f − mixed``;
4. an outer optimizer step on ``v`` (Adam by default).

``fisher="exact"`` replaces ``F_T`` by the exact Hessian of the training loss at ``θ_T`` (exact AID: the
oracle / limit case). ``fisher="kfac"`` (per-layer Kronecker factors) is optional in the spec and
not provided.

``parallel="process"`` runs step 2 in a second worker process (``torch.multiprocessing`` spawn context, one
thread each): the main process sends ``G_t`` (and the weights) through a queue after computing them and goes
on with SGD; after step ``T`` it waits for ``F_T``. ``parallel="none"`` (default) runs the same update inline
and is deterministic; both give the same ``F_T`` up to float rounding (the same operations in the same order).

**Caveat.** ``F̂ ≈ H`` only near the inner optimum of a (close to) well-specified NLL model, and ``ℓ`` must be
the NLL *with its scale*: for Gaussian regression ``ℓ = (y − xᵀθ)²/(2σ²)`` with the true σ; with
``½(y − xᵀθ)²`` one gets ``F̂ ≈ σ² H`` and the solve is wrong unless σ = 1. With heteroscedastic noise or a
wrong assumed σ the surrogate degrades (``tests/bilevel/test_nhgd.py`` measures this). Label noise in
*logistic* regression is
not such a case (flipped labels are still a logistic model).

Also here: :func:`empirical_fisher`, :func:`woodbury_update` (the inverse kept by the Woodbury identity, for
``b ≪ d`` without regulariser), :func:`fisher_solve` (``hypergradient(..., method="fisher")`` at one point)
and :class:`RunningFisher`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import torch

from optarium._core.result import Result
from optarium._core.solver import SolverCase
from optarium._core.validation import check_choice, check_in_range, check_int, check_positive
from optarium.bilevel.hypergradients import inner_sgd, outer_loop, ridge_problem
from optarium.bilevel.problem import Batch, BilevelProblem, WorkCounter, check_batch

__all__ = [
    "FISHER_MODES",
    "NHGD",
    "RunningFisher",
    "empirical_fisher",
    "fisher_solve",
    "natural_hypergradient",
    "solver_cases",
    "woodbury_update",
]

#: The curvature surrogates of :class:`NHGD`.
FISHER_MODES: tuple[str, ...] = ("full", "diag", "exact")


def empirical_fisher(
    G: torch.Tensor, weights: torch.Tensor | None = None, *, diag: bool = False
) -> torch.Tensor:
    """``(1/b) Gᵀ W G`` for per-sample gradients ``G`` (``b × d``) and optional weights ``w``
    (``W = diag(w)``).

    With ``diag=True`` only the diagonal ``(1/b) Σ_i w_i G_i²`` (a ``d`` vector). ``FloatingPointError`` for
    non-finite ``G``.
    """
    if not isinstance(G, torch.Tensor) or G.dim() != 2:
        raise ValueError("G: expected a (b, d) tensor of per-sample gradients")
    if not bool(torch.isfinite(G).all()):
        raise FloatingPointError("G: non-finite per-sample gradients (NaN or inf)")
    b = G.shape[0]
    if weights is not None and tuple(weights.shape) != (b,):
        raise ValueError(f"weights: expected shape ({b},), got {tuple(weights.shape)}")
    if diag:
        sq = G * G
        return (sq if weights is None else weights.unsqueeze(1) * sq).sum(0) / b
    Gw = G if weights is None else weights.unsqueeze(1) * G
    return (Gw.T @ G) / b


def _fisher_update(
    F: torch.Tensor, G: torch.Tensor, weights: torch.Tensor | None, rho: float, diag: bool
) -> torch.Tensor:
    """``(1 − ρ) F + ρ · empirical_fisher(G, w)`` in place (returns ``F``)."""
    F.mul_(1.0 - rho).add_(empirical_fisher(G, weights, diag=diag), alpha=rho)
    return F


def woodbury_update(P: torch.Tensor, G: torch.Tensor, rho: float) -> torch.Tensor:
    """The inverse of ``(1 − ρ) F + (ρ/b) GᵀG`` from ``P = F^{-1}`` by the Woodbury identity (symmetrised).

    With ``A^{-1} = P/(1 − ρ)`` and ``U = sqrt(ρ/b) Gᵀ``: ``A^{-1} − A^{-1} U (I_b + Uᵀ A^{-1} U)^{-1} Uᵀ
    A^{-1}``;
    cost O(b d² + b³), worth it only for ``b ≪ d`` and no regulariser.
    """
    rho = check_in_range("rho", rho, 0.0, 1.0, low_inclusive=False, high_inclusive=False)
    b = G.shape[0]
    Ainv = P / (1.0 - rho)
    U = math.sqrt(rho / b) * G.T
    AU = Ainv @ U
    core = torch.eye(b, dtype=P.dtype, device=P.device) + U.T @ AU
    out = Ainv - AU @ torch.linalg.solve(core, AU.T)
    return 0.5 * (out + out.T)


class RunningFisher:
    """The running empirical Fisher of one inner loop: ``F_0 = δ I``, then :meth:`update` per inner step.

    Args:
        d: the inner dimension.
        diag: keep only the diagonal (O(d) state) instead of the dense ``d × d`` matrix.
        damping: ``δ > 0`` (the initial ``F_0 = δ I``).
        averaging: ``"running"`` (``ρ_t = 1/(t+2)``) or ``("ema", ρ)`` with ``0 < ρ < 1``.
    """

    def __init__(
        self,
        d: int,
        *,
        diag: bool = False,
        damping: float = 1e-3,
        averaging: str | tuple[str, float] = "running",
        dtype: torch.dtype = torch.float64,
        device: Any = "cpu",
    ) -> None:
        self.d = check_int("d", d, minimum=1)
        self.diag = bool(diag)
        self.damping = check_positive("damping", damping)
        self.ema = _check_averaging(averaging)
        self.t = 0
        self.flops = 0.0
        if self.diag:
            self.F = torch.full((self.d,), self.damping, dtype=dtype, device=device)
        else:
            self.F = self.damping * torch.eye(self.d, dtype=dtype, device=device)

    def rho(self, t: int) -> float:
        """The averaging weight of step ``t``."""
        return 1.0 / (t + 2) if self.ema is None else self.ema

    def update(self, G: torch.Tensor, weights: torch.Tensor | None = None) -> None:
        """Fold the per-sample gradients of one inner step into ``F``."""
        if G.dim() != 2 or G.shape[1] != self.d:
            raise ValueError(f"G: expected shape (b, {self.d}), got {tuple(G.shape)}")
        _fisher_update(
            self.F, G.to(self.F), None if weights is None else weights.to(self.F), self.rho(self.t), self.diag
        )
        self.flops += G.shape[0] * self.d * (1 if self.diag else self.d)
        self.t += 1

    def state_shapes(self) -> list[tuple[int, ...]]:
        """The shapes of the tensors this object keeps (``[(d,)]`` in diag mode)."""
        return [tuple(self.F.shape)]


def _check_averaging(averaging: Any) -> float | None:
    if averaging == "running":
        return None
    if isinstance(averaging, (tuple, list)) and len(averaging) == 2 and averaging[0] == "ema":
        return check_in_range("averaging", averaging[1], 0.0, 1.0, low_inclusive=False, high_inclusive=False)
    raise ValueError(f"averaging: expected 'running' or ('ema', rho), got {averaging!r}")


def _solve_curvature(
    F: torch.Tensor,
    rhs: torch.Tensor,
    damping: float,
    reg_hessian: torch.Tensor | None,
    counter: WorkCounter | None,
) -> torch.Tensor:
    """``(F + δ I + R'') w = rhs``: one Cholesky solve (dense ``F``) or elementwise (diagonal ``F``)."""
    if F.dim() == 1:
        diag = F + damping
        if reg_hessian is not None:
            diag = diag + torch.diagonal(reg_hessian)
        if counter is not None:
            counter.add("diag_solves")
        return rhs / diag
    M = F + damping * torch.eye(F.shape[0], dtype=F.dtype, device=F.device)
    if reg_hessian is not None:
        M = M + reg_hessian
    if counter is not None:
        counter.add("factorizations")
    L, info = torch.linalg.cholesky_ex(M)
    if int(info) != 0:
        raise FloatingPointError("damping: the curvature F + δI + R'' is not positive definite")
    return torch.cholesky_solve(rhs.unsqueeze(-1), L).squeeze(-1)


def fisher_solve(
    problem: BilevelProblem,
    v: torch.Tensor,
    theta: torch.Tensor,
    batch: Batch,
    rhs: torch.Tensor,
    *,
    damping: float = 1e-3,
    diag: bool = False,
    counter: WorkCounter | None = None,
) -> torch.Tensor:
    """``w = (F̂ + δ I + ∇²_θθ R)^{-1} rhs`` with the empirical Fisher of ``batch`` at ``(v, θ)``."""
    batch = check_batch("batch", batch)
    G = problem.per_sample_grads(v, theta, batch, counter)
    F = empirical_fisher(G, problem.sample_weights(v.detach(), batch), diag=diag)
    return _solve_curvature(F, rhs, damping, problem.regularizer_hessian(v, theta), counter)


def natural_hypergradient(
    problem: BilevelProblem,
    v: torch.Tensor,
    theta: torch.Tensor,
    fisher: torch.Tensor,
    train_batch: Batch,
    val_batch: Batch,
    *,
    damping: float = 1e-3,
    counter: WorkCounter | None = None,
) -> torch.Tensor:
    """``h = ∇_v f − ∇²_{vθ} g · (F + δ I + ∇²R)^{-1} ∇_θ f`` for a given Fisher ``F`` (dense or diagonal).

    The mixed term is exact (one reverse pass on ``train_batch``).
    """
    damping = check_positive("damping", damping)
    grad_v, grad_t = problem.outer_grads(v, theta, check_batch("val_batch", val_batch), counter)
    w = _solve_curvature(fisher.to(grad_t), grad_t, damping, problem.regularizer_hessian(v, theta), counter)
    return problem.hypergradient_from(v, theta, check_batch("train_batch", train_batch), w, grad_v, counter)


# ------------------------------------------------------------------------------------- parallel worker
def _fisher_worker(inbox: Any, outbox: Any) -> None:
    """Second process of ``parallel="process"``: folds the ``G_t`` it receives into a running Fisher."""
    torch.set_num_threads(1)
    fisher: RunningFisher | None = None
    while True:
        msg = inbox.get()
        kind = msg[0]
        if kind == "reset":
            _, d, diag, damping, averaging, dtype = msg
            fisher = RunningFisher(d, diag=diag, damping=damping, averaging=averaging, dtype=dtype)
        elif kind == "update":
            assert fisher is not None
            fisher.update(msg[1], msg[2])
        elif kind == "get":
            assert fisher is not None
            outbox.put((fisher.F.clone(), fisher.flops))
        else:
            break


class _ProcessFisher:
    """The main-process side of the Fisher worker (start, reset, send, collect, stop)."""

    def __init__(self) -> None:
        import torch.multiprocessing as mp

        ctx = mp.get_context("spawn")
        self.inbox, self.outbox = ctx.Queue(), ctx.Queue()
        self.proc = ctx.Process(target=_fisher_worker, args=(self.inbox, self.outbox), daemon=True)
        self.proc.start()

    def reset(self, d: int, diag: bool, damping: float, averaging: Any, dtype: torch.dtype) -> None:
        self.inbox.put(("reset", d, diag, damping, averaging, dtype))

    def update(self, G: torch.Tensor, weights: torch.Tensor | None) -> None:
        self.inbox.put(("update", G.cpu(), None if weights is None else weights.cpu()))

    def collect(self, timeout: float = 600.0) -> tuple[torch.Tensor, float]:
        self.inbox.put(("get",))
        F, flops = self.outbox.get(timeout=timeout)
        return F, float(flops)

    def close(self) -> None:
        try:
            self.inbox.put(("stop",))
            self.proc.join(timeout=10)
        finally:
            if self.proc.is_alive():
                self.proc.terminate()
                self.proc.join(timeout=5)


# ------------------------------------------------------------------------------------------------ solver
class NHGD:
    """Natural hypergradient descent on a :class:`~optarium.bilevel.problem.BilevelProblem`.

    Args:
        problem: the bilevel problem (``inner_loss_per_sample`` must be the NLL with its scale; see the
            module docstring's caveat).
        inner_lr: inner SGD step ``α``.
        inner_steps: inner steps ``T`` per outer step (warm-started from the previous ``θ_T``).
        batch_size: inner minibatch ``b``.
        fisher: ``"full"`` (dense running Fisher, one Cholesky per outer step), ``"diag"`` (diagonal, O(d)
            state) or ``"exact"`` (the exact training Hessian at ``θ_T``: exact AID, the limit case).
        damping: ``δ > 0`` (``F_0 = δ I`` and the floor added at the solve).
        relative_damping: multiply ``damping`` at the solve by ``tr(F_T)``, the running mean squared
            per-sample gradient norm (the spec's ``δ = 1e-3 · mean ‖∇ℓ_i‖²``).
        averaging: ``"running"`` (``ρ_t = 1/(t+2)``) or ``("ema", ρ)``.
        parallel: ``"none"`` (inline, deterministic) or ``"process"`` (the Fisher in a second process).
        outer_optimizer: ``params -> torch.optim.Optimizer`` for ``v`` (default Adam with ``outer_lr``).
        outer_lr: the default Adam's step.
    """

    def __init__(
        self,
        problem: BilevelProblem,
        *,
        inner_lr: float = 0.1,
        inner_steps: int = 100,
        batch_size: int = 64,
        fisher: str = "full",
        damping: float = 1e-3,
        relative_damping: bool = False,
        averaging: str | tuple[str, float] = "running",
        parallel: str = "none",
        outer_optimizer: Callable[[list[torch.Tensor]], torch.optim.Optimizer] | None = None,
        outer_lr: float = 0.1,
    ) -> None:
        if not isinstance(problem, BilevelProblem):
            raise TypeError(f"problem: expected a BilevelProblem, got {type(problem).__name__}")
        self.problem = problem
        self.inner_lr = check_positive("inner_lr", inner_lr)
        self.inner_steps = check_int("inner_steps", inner_steps, minimum=0)
        self.batch_size = check_int("batch_size", batch_size, minimum=1)
        if fisher == "kfac":
            raise ValueError("fisher: 'kfac' (optional in the spec) is not provided; use 'full' or 'diag'")
        self.fisher = check_choice("fisher", fisher, FISHER_MODES)
        self.damping = check_positive("damping", damping)
        self.relative_damping = bool(relative_damping)
        _check_averaging(averaging)
        self.averaging = averaging
        self.parallel = check_choice("parallel", parallel, ("none", "process"))
        if outer_optimizer is not None and not callable(outer_optimizer):
            raise TypeError("outer_optimizer: must be callable (params -> torch.optim.Optimizer)")
        self.outer_optimizer = outer_optimizer
        self.outer_lr = check_positive("outer_lr", outer_lr)

    def hypergradient_step(
        self,
        v: torch.Tensor,
        theta: torch.Tensor,
        train_data: Batch,
        val_data: Batch,
        generator: torch.Generator,
        counter: WorkCounter,
        worker: _ProcessFisher | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, float]]:
        """One outer step's work: inner SGD with the running Fisher, then the natural hypergradient.

        Returns ``(h, θ_T, info)`` with ``info`` holding the damping used and the Fisher flops.
        """
        problem, d = self.problem, theta.numel()
        diag = self.fisher == "diag"
        counter.phase = "inner"
        fisher: RunningFisher | None = None
        if self.fisher == "exact":
            on_step = None
        elif worker is not None:
            worker.reset(d, diag, self.damping, self.averaging, theta.dtype)

            def on_step(t: int, G: torch.Tensor, w: torch.Tensor | None, batch: Batch) -> None:
                worker.update(G, w)
        else:
            fisher = RunningFisher(
                d,
                diag=diag,
                damping=self.damping,
                averaging=self.averaging,
                dtype=theta.dtype,
                device=theta.device,
            )

            def on_step(t: int, G: torch.Tensor, w: torch.Tensor | None, batch: Batch) -> None:
                assert fisher is not None
                fisher.update(G, w)

        th = inner_sgd(
            problem,
            v,
            theta,
            train_data,
            steps=self.inner_steps,
            lr=self.inner_lr,
            batch_size=self.batch_size,
            generator=generator,
            counter=counter,
            on_step=on_step,
        )
        counter.phase = "post"
        if self.fisher == "exact":
            F = problem.inner_hessian(v, th, train_data)
            flops = 0.0
            grad_v, grad_t = problem.outer_grads(v, th, val_data, counter)
            delta = self.damping
            M = F + delta * torch.eye(d, dtype=F.dtype, device=F.device)
            counter.add("factorizations")
            w = torch.linalg.solve(M, grad_t)
            h = problem.hypergradient_from(v, th, train_data, w, grad_v, counter)
            return h, th, {"damping": delta, "fisher_flops": flops}
        if worker is not None:
            counter.phase = "post"
            F, flops = worker.collect()
            F = F.to(device=th.device, dtype=th.dtype)
        else:
            assert fisher is not None
            F, flops = fisher.F, fisher.flops
        counter.phase = "inner"
        counter.add("fisher_flops", flops)
        counter.phase = "post"
        delta = self.damping
        if self.relative_damping:
            trace = float(F.sum()) if F.dim() == 1 else float(torch.diagonal(F).sum())
            delta = self.damping * max(trace, 1e-12)
        reg = problem.regularizer_hessian(v, th)
        grad_v, grad_t = problem.outer_grads(v, th, val_data, counter)
        w = _solve_curvature(F, grad_t, delta, reg, counter)
        h = problem.hypergradient_from(v, th, train_data, w, grad_v, counter)
        self._last_state_shapes = [tuple(F.shape)]
        return h, th, {"damping": delta, "fisher_flops": flops}

    def run(
        self,
        v0: torch.Tensor,
        theta0: torch.Tensor,
        train_data: Batch,
        val_data: Batch,
        *,
        outer_steps: int = 50,
        seed: int = 0,
        tol: float | None = None,
        record_every: int = 1,
        time_limit_s: float | None = None,
        evaluate: Callable[[torch.Tensor, torch.Tensor], Mapping[str, Any]] | None = None,
    ) -> Result:
        """``outer_steps`` NHGD steps from ``(v0, θ0)``; a :class:`~optarium._core.Result` with ``x = v``.

        History: ``objective`` (``f(v, θ)`` on ``val_data``), ``hypergrad_norm``, ``hypergrad_seconds``,
        ``damping`` and whatever ``evaluate`` returns; extras: ``theta``, the counted ``work`` (phases
        ``inner`` and ``post``), ``fisher_state_shapes`` (the shapes of the curvature state kept).
        """
        train_data = check_batch("train_data", train_data)
        val_data = check_batch("val_data", val_data)
        gen = torch.Generator().manual_seed(int(seed))
        counter = WorkCounter()
        self._last_state_shapes: list[tuple[int, ...]] = []
        worker = _ProcessFisher() if self.parallel == "process" and self.fisher != "exact" else None

        def step(v: torch.Tensor, theta: torch.Tensor, k: int) -> tuple[Any, ...]:
            h, th, info = self.hypergradient_step(v, theta, train_data, val_data, gen, counter, worker)
            return h, th, {"damping": info["damping"]}

        try:
            return outer_loop(
                self.problem,
                v0,
                theta0,
                val_data,
                step,
                outer_steps=outer_steps,
                outer_optimizer=self.outer_optimizer,
                outer_lr=self.outer_lr,
                tol=tol,
                record_every=record_every,
                time_limit_s=time_limit_s,
                evaluate=evaluate,
                counter=counter,
                extras=lambda: {"fisher": self.fisher, "fisher_state_shapes": list(self._last_state_shapes)},
                step_metrics=("damping",),
            )
        finally:
            if worker is not None:
                worker.close()


# ------------------------------------------------------------------------------------------ solver cases
def _case_solve(fisher: str) -> Callable[..., Result]:
    def solve(*, dtype: torch.dtype, device: Any, seed: int, **overrides: Any) -> Result:
        problem, train, val = ridge_problem(dtype, device, 0, n=100, n_val=50, d=3, noise=1.0)
        v0 = torch.zeros(3, dtype=dtype, device=device)
        th0 = torch.zeros(3, dtype=dtype, device=device)
        outer_steps = overrides.pop("outer_steps", 10)
        tol = overrides.pop("tol", None)
        time_limit_s = overrides.pop("time_limit_s", None)
        kw: dict[str, Any] = {
            "inner_lr": 0.3,
            "inner_steps": 5,
            "batch_size": 100,
            "fisher": fisher,
            "damping": 1e-6,
            "outer_optimizer": lambda p: torch.optim.SGD(p, lr=2.0),
        }
        kw.update(overrides)
        return NHGD(problem, **kw).run(
            v0, th0, train, val, outer_steps=outer_steps, seed=seed, tol=tol, time_limit_s=time_limit_s
        )

    return solve


def _case_grad_norm(res: Result) -> float:
    """‖∇Φ(v)‖ of the exact ridge value function (closed form) at the result's v."""
    _, train, val = ridge_problem(torch.float64, "cpu", 0, n=100, n_val=50, d=3, noise=1.0)
    X, y = train
    Xv, yv = val
    v = res.x.detach().double().cpu().requires_grad_(True)
    n = X.shape[0]
    theta = torch.linalg.solve(X.T @ X / n + torch.diag(torch.exp(v)), X.T @ y / n)
    (g,) = torch.autograd.grad(0.5 * ((yv - Xv @ theta) ** 2).mean(), v)
    return float(g.norm())


def solver_cases() -> list[SolverCase]:
    """NHGD (full, diag, exact) on a 3-feature ridge problem with unit noise (Fisher = Hessian in
    expectation). Optimality: the exact ``‖∇Φ(v)‖`` (the Fisher's finite-sample error leaves a small bias)."""
    cases = []
    for fisher in FISHER_MODES:
        cases.append(
            SolverCase(
                name=f"nhgd-{fisher}",
                solve=_case_solve(fisher),
                statuses={
                    "converged": {"tol": 2e-2, "outer_steps": 2000},
                    "max_iter": {"outer_steps": 3},
                    "diverged": {"inner_lr": 1e30},
                    "timeout": {"time_limit_s": 0.0},
                },
                max_iter=3,
                tolerance_holds=lambda r: r.history.last("hypergrad_norm") <= 2e-2,
                optimality=_case_grad_norm,
                optimality_tol=5e-2 if fisher != "diag" else 1e-1,
                invalid=[
                    ({"inner_lr": -1.0}, "inner_lr"),
                    ({"damping": 0.0}, "damping"),
                    ({"fisher": "bad"}, "fisher"),
                    ({"batch_size": 0}, "batch_size"),
                ],
                determinism={"batch_size": 20},
                stochastic=True,
                timing_metrics=("hypergrad_seconds",),
            )
        )
    return cases
