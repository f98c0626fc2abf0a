r"""Hypergradient estimators as reusable parts, and the outer loops built from them.

For :math:`\Phi(v) = f(v, \theta^*(v))` the implicit function theorem gives

.. math::

    \nabla\Phi(v) = \nabla_v f - \nabla^2_{v\theta} g \; w, \qquad H w = \nabla_\theta f,\quad
    H = \nabla^2_{\theta\theta} g(v, \theta^*),

evaluated at an approximate inner solution :math:`\theta_T`. The estimators differ in how they get ``w``
(or avoid it):

- **AID** (approximate implicit differentiation): ``w`` by :func:`conjugate_gradient` on Hessian-vector
  products (Pedregosa 2016; Grazzi et al. 2020), by a :func:`neumann_series` (Lorraine et al. 2020), or
  exactly by a dense solve (``method="exact"``; an oracle for small ``d``): :func:`hypergradient`;
- **stocBiO** (Ji, Yang, Liang 2021): the Neumann series with an independent minibatch per Hessian-vector
  product: :func:`stocbio_hypergradient`;
- **ITD** (iterative differentiation, Franceschi et al. 2017): reverse-mode differentiation through ``T``
  inner SGD steps, and its truncation to the last ``K`` steps (Shaban et al. 2019):
  :func:`unrolled_hypergradient`;
- **SOBA** (Dagréou et al. 2022): one joint step of ``θ``, of the linear-system iterate ``z ≈ w`` and of
  ``v`` per iteration, no inner loop: :func:`soba_step` and the solver :func:`soba`;
- **Fisher** (natural hypergradient, :mod:`optarium.bilevel.nhgd`): ``w`` from the empirical Fisher.

:func:`inner_sgd` is the warm-started stochastic inner solver all double-loop methods share (minibatches drawn
with a ``torch.Generator``; an ``on_step`` hook sees each step's per-sample gradients, which the natural
hypergradient accumulates). :func:`outer_loop` is the shared outer loop (any ``torch.optim`` optimizer on
``v``, a :class:`~optarium._core.SolverLoop` recording the upper objective, the hypergradient norm and its
seconds) and :func:`bilevel_solve` runs it with any estimator above; both return a
:class:`~optarium._core.Result` with ``x = v``.

Sign convention: ``w ≈ H^{-1} ∇_θ f`` and ``h = ∇_v f − ∇²_{vθ} g · w`` throughout (SOBA's ``z`` is ``w``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from optarium._core.result import Result
from optarium._core.solver import SolverCase, SolverLoop
from optarium._core.validation import check_choice, check_int, check_nonnegative, check_positive
from optarium.bilevel.problem import (
    Batch,
    BilevelProblem,
    WorkCounter,
    batch_size,
    check_batch,
    sample_batch,
)

__all__ = [
    "ESTIMATORS",
    "bilevel_solve",
    "conjugate_gradient",
    "hypergradient",
    "inner_sgd",
    "neumann_series",
    "outer_loop",
    "ridge_problem",
    "soba",
    "soba_step",
    "solver_cases",
    "stocbio_hypergradient",
    "unrolled_hypergradient",
]

#: The estimators :func:`bilevel_solve` accepts.
ESTIMATORS: tuple[str, ...] = ("cg", "neumann", "exact", "stocbio", "itd")

Matvec = Callable[[torch.Tensor], torch.Tensor]


# ------------------------------------------------------------------------------------- linear systems
def conjugate_gradient(
    matvec: Matvec, b: torch.Tensor, *, steps: int, tol: float = 0.0, x0: torch.Tensor | None = None
) -> torch.Tensor:
    """At most ``steps`` conjugate-gradient iterations for ``A x = b`` with ``A`` symmetric positive definite.

    Stops early once ``‖r‖ ≤ tol · ‖b‖``. Starts from ``x0`` (zeros if ``None``). Hestenes-Stiefel
    recursion; ``matvec`` is called once per iteration (plus once for a non-zero ``x0``).
    """
    steps = check_int("steps", steps, minimum=0)
    tol = check_nonnegative("tol", tol)
    x = torch.zeros_like(b) if x0 is None else x0.clone()
    r = b - matvec(x) if x0 is not None else b.clone()
    p = r.clone()
    rs = r @ r
    stop = (tol * torch.linalg.vector_norm(b)) ** 2
    for _ in range(steps):
        if rs <= stop or rs == 0:
            break
        Ap = matvec(p)
        alpha = rs / (p @ Ap)
        x = x + alpha * p
        r = r - alpha * Ap
        rs_new = r @ r
        p = r + (rs_new / rs) * p
        rs = rs_new
    return x


def neumann_series(
    matvec: Matvec | Sequence[Matvec], b: torch.Tensor, *, steps: int, eta: float
) -> torch.Tensor:
    r"""The truncated Neumann series :math:`\eta \sum_{j=0}^{K} (I - \eta A)^j b \approx A^{-1} b`.

    ``K = steps`` products. ``matvec`` is one operator, or a sequence of ``steps`` operators (one per term,
    stocBiO's independent minibatch Hessians: term ``j`` uses the product of the first ``j`` of them). The
    series converges when ``0 < η < 2 / λ_max(A)``; its error decays as ``(1 - η λ_min)^{K+1}``.
    """
    steps = check_int("steps", steps, minimum=0)
    eta = check_positive("eta", eta)
    if not callable(matvec):
        ops = list(matvec)
        if len(ops) < steps:
            raise ValueError(f"matvec: {len(ops)} operators for {steps} steps")
    else:
        ops = [matvec] * steps
    p = b.clone()
    acc = b.clone()
    for j in range(steps):
        p = p - eta * ops[j](p)
        acc = acc + p
    return eta * acc


# ---------------------------------------------------------------------------------------- estimators
def _solve_dense(H: torch.Tensor, rhs: torch.Tensor, counter: WorkCounter | None) -> torch.Tensor:
    if counter is not None:
        counter.add("factorizations")
    L, info = torch.linalg.cholesky_ex(H)
    if int(info) == 0:
        return torch.cholesky_solve(rhs.unsqueeze(-1), L).squeeze(-1)
    return torch.linalg.solve(H, rhs)


def hypergradient(
    problem: BilevelProblem,
    v: torch.Tensor,
    theta: torch.Tensor,
    train_batch: Batch,
    val_batch: Batch,
    *,
    method: str = "cg",
    steps: int = 10,
    eta: float | None = None,
    damping: float = 0.0,
    tol: float = 0.0,
    counter: WorkCounter | None = None,
    return_w: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """The implicit hypergradient at ``(v, θ)`` with ``w`` from ``method``.

    Args:
        method: ``"cg"`` (``steps`` CG iterations on HVPs over ``train_batch``), ``"neumann"`` (``steps``
            Neumann terms with step ``eta``; default ``eta = 1 / λ_max`` estimated by 20 power iterations,
            counted), ``"exact"`` (dense Hessian and Cholesky solve; small ``d``), or ``"fisher"`` (the
            empirical Fisher of ``train_batch`` plus the exact regulariser Hessian, one Cholesky solve; see
            :func:`optarium.bilevel.nhgd.natural_hypergradient`).
        damping: ``δ ≥ 0`` added to the curvature (``H + δ I``).
        tol: CG's relative residual tolerance.
        counter: counts the work (HVPs, mixed backwards, factorisations).
        return_w: also return ``w``.

    Returns ``h`` with ``v``'s shape (and ``w``).
    """
    method = check_choice("method", method, ("cg", "neumann", "exact", "fisher"))
    steps = check_int("steps", steps, minimum=0)
    damping = check_nonnegative("damping", damping)
    train_batch, val_batch = check_batch("train_batch", train_batch), check_batch("val_batch", val_batch)
    grad_v, grad_t = problem.outer_grads(v, theta, val_batch, counter)
    if method == "fisher":
        from optarium.bilevel.nhgd import fisher_solve

        w = fisher_solve(problem, v, theta, train_batch, grad_t, damping=damping, counter=counter)
    elif method == "exact":
        H = problem.inner_hessian(v, theta, train_batch)
        H = H + damping * torch.eye(H.shape[0], dtype=H.dtype, device=H.device)
        w = _solve_dense(H, grad_t, counter)
    else:
        hvp = problem.hvp_operator(v, theta, train_batch, counter)

        def op(x: torch.Tensor) -> torch.Tensor:
            return hvp(x) + damping * x

        if method == "cg":
            w = conjugate_gradient(op, grad_t, steps=steps, tol=tol)
        else:
            step = _default_eta(op, grad_t) if eta is None else check_positive("eta", eta)
            w = neumann_series(op, grad_t, steps=steps, eta=step)
    h = problem.hypergradient_from(v, theta, train_batch, w, grad_v, counter)
    return (h, w) if return_w else h


def _default_eta(op: Matvec, like: torch.Tensor, iters: int = 20) -> float:
    """``1 / λ_max`` of the operator by power iteration from a fixed start (deterministic)."""
    x = torch.ones_like(like)
    lam = 1.0
    for _ in range(iters):
        y = op(x)
        lam = float(torch.linalg.vector_norm(y) / torch.linalg.vector_norm(x).clamp_min(1e-300))
        x = y / max(lam, 1e-300)
    return 1.0 / max(lam, 1e-300)


def stocbio_hypergradient(
    problem: BilevelProblem,
    v: torch.Tensor,
    theta: torch.Tensor,
    hvp_batches: Sequence[Batch],
    val_batch: Batch,
    *,
    eta: float,
    mixed_batch: Batch | None = None,
    counter: WorkCounter | None = None,
) -> torch.Tensor:
    """stocBiO's hypergradient: a Neumann series whose ``j``-th product uses minibatch ``hvp_batches[j]``.

    ``w = η Σ_{q=0}^{Q} Π_{j<q} (I − η H_j) ∇_θ f`` with ``Q = len(hvp_batches)`` (Ji et al. 2021, Alg. 2);
    the mixed term uses ``mixed_batch`` (default the first HVP batch).
    """
    if not hvp_batches:
        raise ValueError("hvp_batches: need at least one minibatch")
    eta = check_positive("eta", eta)
    grad_v, grad_t = problem.outer_grads(v, theta, check_batch("val_batch", val_batch), counter)
    ops = [problem.hvp_operator(v, theta, check_batch("hvp_batches", b), counter) for b in hvp_batches]
    w = neumann_series(ops, grad_t, steps=len(ops), eta=eta)
    mb = hvp_batches[0] if mixed_batch is None else check_batch("mixed_batch", mixed_batch)
    return problem.hypergradient_from(v, theta, mb, w, grad_v, counter)


def unrolled_hypergradient(
    problem: BilevelProblem,
    v: torch.Tensor,
    theta0: torch.Tensor,
    batches: Sequence[Batch],
    val_batch: Batch,
    *,
    lr: float,
    truncate: int | None = None,
    counter: WorkCounter | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """ITD: ``d f(v, θ_T(v)) / dv`` through ``T = len(batches)`` inner SGD steps ``θ ← θ − lr ∇_θ g``.

    Reverse-mode autograd through the whole loop (memory O(T d)); with ``truncate = K`` only the last ``K``
    steps are differentiated (``θ_{T−K}`` is treated as a constant; Shaban et al. 2019). Returns
    ``(h, θ_T)``, both detached.
    """
    lr = check_positive("lr", lr)
    T = len(batches)
    K = T if truncate is None else check_int("truncate", truncate, minimum=0)
    vv = v.detach().requires_grad_(True)
    th = theta0.detach()
    with torch.enable_grad():
        for t, batch in enumerate(batches):
            batch = check_batch("batches", batch)
            keep = t >= T - K
            if not keep:
                th = th - lr * problem.inner_grad(vv.detach(), th, batch, counter)
                continue
            if not th.requires_grad:
                th = th.detach().requires_grad_(True)
            (g,) = torch.autograd.grad(problem.inner_loss(vv, th, batch), th, create_graph=True)
            if counter is not None:
                counter.add("sample_grads", batch_size(batch))
            th = th - lr * g
        f = problem.outer(vv, th, check_batch("val_batch", val_batch))
        (h,) = torch.autograd.grad(f, vv, allow_unused=True) if f.requires_grad else (None,)
    if counter is not None:
        counter.add("sample_grads", batch_size(val_batch))
        counter.add("unrolled_backward_steps", K)
    h = torch.zeros_like(vv) if h is None else h
    return h.detach(), th.detach()


# ------------------------------------------------------------------------------------------ inner loop
def inner_sgd(
    problem: BilevelProblem,
    v: torch.Tensor,
    theta: torch.Tensor,
    data: Batch,
    *,
    steps: int,
    lr: float,
    batch_size: int,
    generator: torch.Generator | None = None,
    counter: WorkCounter | None = None,
    on_step: Callable[[int, torch.Tensor, torch.Tensor | None, Batch], None] | None = None,
) -> torch.Tensor:
    """``steps`` minibatch SGD steps on ``g(v, ·)`` from ``theta`` (warm start); returns ``θ_T`` (detached).

    With ``on_step`` the step computes the per-sample gradient matrix ``G`` (``problem.per_sample_grads``)
    and calls ``on_step(t, G, weights, batch)`` before the update (the step is then ``mean_i w_i G_i + ∇R``,
    the same step as the mean gradient). ``FloatingPointError`` if a gradient is not finite.
    """
    steps = check_int("steps", steps, minimum=0)
    lr = check_positive("lr", lr)
    bs = check_int("batch_size", batch_size, minimum=1)
    th = theta.detach().clone()
    vd = v.detach()
    for t in range(steps):
        batch = sample_batch(data, bs, generator)
        if on_step is None:
            grad = problem.inner_grad(vd, th, batch, counter)
        else:
            G = problem.per_sample_grads(vd, th, batch, counter)
            w = problem.sample_weights(vd, batch)
            on_step(t, G, w, batch)
            mean = G.mean(0) if w is None else (w.unsqueeze(1) * G).mean(0)
            grad = mean + problem.regularizer_grad(vd, th)
        th = th - lr * grad
        if not bool(torch.isfinite(th).all()):
            raise FloatingPointError("theta: the inner SGD iterate became non-finite (lower inner_lr)")
    return th


# ------------------------------------------------------------------------------------------ outer loop
def _check_data(name: str, data: Any) -> Batch:
    return check_batch(name, data)


def outer_loop(
    problem: BilevelProblem,
    v0: torch.Tensor,
    theta0: torch.Tensor,
    val_data: Batch,
    step: Callable[[torch.Tensor, torch.Tensor, int], tuple[Any, ...]],
    *,
    outer_steps: int,
    criterion: str = "hypergrad_norm",
    step_metrics: Sequence[str] = (),
    outer_optimizer: Callable[[list[torch.Tensor]], torch.optim.Optimizer] | None = None,
    outer_lr: float = 0.1,
    tol: float | None = None,
    record_every: int = 1,
    time_limit_s: float | None = None,
    evaluate: Callable[[torch.Tensor, torch.Tensor], Mapping[str, Any]] | None = None,
    counter: WorkCounter | None = None,
    extras: Callable[[], Mapping[str, Any]] | None = None,
) -> Result:
    """The shared outer loop: ``h, θ = step(v, θ, k)``, then one optimizer step on ``v`` with gradient ``h``.

    ``step`` may return ``(h, θ, metrics)``: the metrics (numbers, named up front in ``step_metrics``,
    ``inf`` before the first step) are recorded with the row, and ``criterion`` may name one of them (SOBA's
    joint residual) instead of ``hypergrad_norm``.

    ``outer_optimizer(params)`` builds the optimizer of ``v`` (default ``torch.optim.Adam(lr=outer_lr)``).
    Recorded each ``record_every`` steps: ``objective`` (``f(v, θ)`` on ``val_data``, untimed),
    ``hypergrad_norm`` (of the last ``h``; ``inf`` at step 0), ``hypergrad_seconds`` (the last ``step``'s
    seconds) and whatever ``evaluate(v, θ)`` returns. ``converged`` once ``hypergrad_norm ≤ tol``;
    ``diverged`` when the inner iterate or a gradient becomes non-finite (the ``FloatingPointError`` is
    caught and reported as the status). ``Result.x`` is ``v``; extras hold ``theta``, the counted work and
    ``extras()``.
    """
    outer_steps = check_int("outer_steps", outer_steps, minimum=0)
    if not isinstance(v0, torch.Tensor) or not v0.is_floating_point():
        raise TypeError("v0: expected a floating tensor")
    if not isinstance(theta0, torch.Tensor) or theta0.dim() != 1:
        raise ValueError("theta0: expected a flat 1-D floating tensor")
    if not bool(torch.isfinite(v0).all()):
        raise ValueError("v0: must be finite")
    if not bool(torch.isfinite(theta0).all()):
        raise ValueError("theta0: must be finite")
    val_data = _check_data("val_data", val_data)
    v = v0.detach().clone().requires_grad_(True)
    if outer_optimizer is None:
        lr = check_positive("outer_lr", outer_lr)
        opt = torch.optim.Adam([v], lr=lr)
    else:
        if not callable(outer_optimizer):
            raise TypeError("outer_optimizer: must be callable (params -> torch.optim.Optimizer)")
        opt = outer_optimizer([v])
    state: dict[str, Any] = {
        "theta": theta0.detach().clone(),
        "h_norm": math.inf,
        "seconds": 0.0,
        "bad": False,
        "metrics": {str(name): math.inf for name in step_metrics},
    }
    loop = SolverLoop(
        outer_steps,
        tol=tol,
        criterion=criterion,
        record_every=record_every,
        time_limit_s=time_limit_s,
        blowup=None,
        watch=("objective",),
    )

    def record(k: int) -> dict[str, Any]:
        if state["bad"]:
            return {
                "objective": math.nan,
                "hypergrad_norm": math.nan,
                "hypergrad_seconds": state["seconds"],
                **{name: math.nan for name in state["metrics"]},
            }
        with torch.no_grad():
            obj = float(problem.outer(v.detach(), state["theta"], val_data))
        row: dict[str, Any] = {
            "objective": obj,
            "hypergrad_norm": state["h_norm"],
            "hypergrad_seconds": state["seconds"],
            **state["metrics"],
        }
        if evaluate is not None:
            row.update(evaluate(v.detach(), state["theta"]))
        return row

    for k in loop.iterate(record):
        t0 = time.perf_counter()
        try:
            out_step = step(v.detach(), state["theta"], k)
        except FloatingPointError:
            state["bad"] = True
            loop.stop("diverged")
            continue
        state["seconds"] = time.perf_counter() - t0
        h, theta = out_step[0], out_step[1]
        if len(out_step) > 2:
            state["metrics"] = {str(n): float(x) for n, x in out_step[2].items()}
        if not bool(torch.isfinite(h).all()):
            state["bad"] = True
            loop.stop("diverged")
            continue
        state["theta"] = theta
        state["h_norm"] = float(torch.linalg.vector_norm(h))
        opt.zero_grad(set_to_none=True)
        v.grad = h.to(v).reshape(v.shape)
        opt.step()
    out: dict[str, Any] = {"theta": state["theta"]}
    if counter is not None:
        out["work"] = counter.as_dict()
    if extras is not None:
        out.update(extras())

    def value() -> float:
        if state["bad"]:
            return math.inf
        with torch.no_grad():
            return float(problem.outer(v.detach(), state["theta"], val_data))

    return loop.result(v.detach().clone(), value, extras=out)


def bilevel_solve(
    problem: BilevelProblem,
    v0: torch.Tensor,
    theta0: torch.Tensor,
    train_data: Batch,
    val_data: Batch,
    *,
    estimator: str = "cg",
    outer_steps: int = 50,
    inner_steps: int = 100,
    inner_lr: float = 0.1,
    batch_size: int = 64,
    hyper_steps: int = 10,
    eta: float | None = None,
    damping: float = 0.0,
    truncate: int | None = None,
    warm_start: bool = True,
    outer_optimizer: Callable[[list[torch.Tensor]], torch.optim.Optimizer] | None = None,
    outer_lr: float = 0.1,
    seed: int = 0,
    tol: float | None = None,
    record_every: int = 1,
    time_limit_s: float | None = None,
    evaluate: Callable[[torch.Tensor, torch.Tensor], Mapping[str, Any]] | None = None,
) -> Result:
    """A double-loop bilevel solver: warm-started inner SGD, then one hypergradient by ``estimator``.

    ``estimator``: ``"cg"`` / ``"neumann"`` / ``"exact"`` (AID on the full training data, ``hyper_steps``
    CG iterations or Neumann terms), ``"stocbio"`` (``hyper_steps`` Neumann terms on independent minibatches
    of ``batch_size``; ``eta`` required), ``"itd"`` (reverse-mode through the ``inner_steps`` SGD steps,
    optionally truncated to the last ``truncate``). The minibatches are drawn with a generator seeded by
    ``seed``; ``warm_start=False`` restarts every inner loop from ``theta0``. Returns the
    :func:`outer_loop` result; ``extras["work"]`` holds the counted work (phase ``inner`` and ``post``).
    """
    estimator = check_choice("estimator", estimator, ESTIMATORS)
    train_data = _check_data("train_data", train_data)
    check_int("inner_steps", inner_steps, minimum=0)
    check_positive("inner_lr", inner_lr)
    check_int("batch_size", batch_size, minimum=1)
    check_int("hyper_steps", hyper_steps, minimum=0)
    damping = check_nonnegative("damping", damping)
    if estimator == "stocbio" and eta is None:
        raise ValueError("eta: stocBiO needs the Neumann step eta")
    if eta is not None:
        check_positive("eta", eta)
    if truncate is not None:
        check_int("truncate", truncate, minimum=0)
    gen = torch.Generator().manual_seed(int(seed))
    counter = WorkCounter()
    start = theta0.detach().clone()

    def step(v: torch.Tensor, theta: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        th0 = theta if warm_start else start
        counter.phase = "inner"
        if estimator == "itd":
            batches = [sample_batch(train_data, batch_size, gen) for _ in range(inner_steps)]
            counter.phase = "post"
            h, th = unrolled_hypergradient(
                problem, v, th0, batches, val_data, lr=inner_lr, truncate=truncate, counter=counter
            )
            return h, th
        th = inner_sgd(
            problem,
            v,
            th0,
            train_data,
            steps=inner_steps,
            lr=inner_lr,
            batch_size=batch_size,
            generator=gen,
            counter=counter,
        )
        counter.phase = "post"
        if estimator == "stocbio":
            assert eta is not None
            hb = [sample_batch(train_data, batch_size, gen) for _ in range(hyper_steps)]
            if not hb:
                hb = [sample_batch(train_data, batch_size, gen)]
            h = stocbio_hypergradient(problem, v, th, hb, val_data, eta=eta, counter=counter)
        else:
            h = hypergradient(
                problem,
                v,
                th,
                train_data,
                val_data,
                method=estimator,
                steps=hyper_steps,
                eta=eta,
                damping=damping,
                counter=counter,
            )
        assert isinstance(h, torch.Tensor)
        return h, th

    return outer_loop(
        problem,
        v0,
        theta0,
        val_data,
        step,
        outer_steps=outer_steps,
        outer_optimizer=outer_optimizer,
        outer_lr=outer_lr,
        tol=tol,
        record_every=record_every,
        time_limit_s=time_limit_s,
        evaluate=evaluate,
        counter=counter,
        extras=lambda: {"estimator": estimator},
    )


# ------------------------------------------------------------------------------------------------ SOBA
def soba_step(
    problem: BilevelProblem,
    v: torch.Tensor,
    theta: torch.Tensor,
    z: torch.Tensor,
    inner_batch: Batch,
    hvp_batch: Batch,
    val_batch: Batch,
    *,
    inner_lr: float,
    z_lr: float,
    counter: WorkCounter | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One SOBA iteration (Dagréou et al. 2022) at ``(v, θ, z)``: returns ``(θ⁺, z⁺, h)``.

    ``θ⁺ = θ − inner_lr · ∇_θ g(B)``, ``z⁺ = z − z_lr · (H(B') z − ∇_θ f)``, and the outer direction
    ``h = ∇_v f − ∇²_{vθ} g(B') z``, all evaluated at the current ``(v, θ, z)`` (the caller steps ``v``
    with ``h``). ``z`` tracks ``w = H^{-1} ∇_θ f``.
    """
    inner_lr, z_lr = check_positive("inner_lr", inner_lr), check_positive("z_lr", z_lr)
    grad_v, grad_t = problem.outer_grads(v, theta, val_batch, counter)
    g = problem.inner_grad(v, theta, inner_batch, counter)
    hz = problem.hvp_operator(v, theta, hvp_batch, counter)(z)
    h = problem.hypergradient_from(v, theta, hvp_batch, z, grad_v, counter)
    return theta - inner_lr * g, z - z_lr * (hz - grad_t), h


def soba(
    problem: BilevelProblem,
    v0: torch.Tensor,
    theta0: torch.Tensor,
    train_data: Batch,
    val_data: Batch,
    *,
    steps: int = 1000,
    inner_lr: float = 0.1,
    z_lr: float | None = None,
    batch_size: int = 64,
    outer_optimizer: Callable[[list[torch.Tensor]], torch.optim.Optimizer] | None = None,
    outer_lr: float = 0.01,
    val_batch_size: int | None = None,
    seed: int = 0,
    tol: float | None = None,
    record_every: int = 1,
    time_limit_s: float | None = None,
    evaluate: Callable[[torch.Tensor, torch.Tensor], Mapping[str, Any]] | None = None,
) -> Result:
    """The single-loop SOBA solver: ``steps`` joint iterations of :func:`soba_step`, ``v`` moved each time.

    Minibatches of ``batch_size`` for the inner gradient and the HVP (independent draws) and of
    ``val_batch_size`` (default: all) for the outer gradients; ``z_lr`` defaults to ``inner_lr``. The
    ``converged`` criterion is ``soba_residual = ‖h‖ + ‖∇_θ g‖ + ‖H z − ∇_θ f‖`` (on the minibatches of the
    step) ``≤ tol``, since ``h`` alone is small while ``z`` has not moved yet.
    """
    train_data = _check_data("train_data", train_data)
    val_data = _check_data("val_data", val_data)
    check_int("steps", steps, minimum=0)
    check_positive("inner_lr", inner_lr)
    zl = inner_lr if z_lr is None else check_positive("z_lr", z_lr)
    bs = check_int("batch_size", batch_size, minimum=1)
    vbs = None if val_batch_size is None else check_int("val_batch_size", val_batch_size, minimum=1)
    gen = torch.Generator().manual_seed(int(seed))
    counter = WorkCounter()
    zs = {"z": torch.zeros_like(theta0.detach())}

    def step(v: torch.Tensor, theta: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        b1, b2 = sample_batch(train_data, bs, gen), sample_batch(train_data, bs, gen)
        vb = val_data if vbs is None else sample_batch(val_data, vbs, gen)
        th, z, h = soba_step(
            problem, v, theta, zs["z"], b1, b2, vb, inner_lr=inner_lr, z_lr=zl, counter=counter
        )
        if not (bool(torch.isfinite(th).all()) and bool(torch.isfinite(z).all())):
            raise FloatingPointError("theta: the SOBA iterate became non-finite (lower inner_lr or z_lr)")
        # the joint residual of the three updates (scaled back to gradients) at the point they were taken
        residual = (
            torch.linalg.vector_norm(h)
            + torch.linalg.vector_norm(theta - th) / inner_lr
            + torch.linalg.vector_norm(zs["z"] - z) / zl
        )
        zs["z"] = z
        return h, th, {"soba_residual": float(residual)}

    return outer_loop(
        problem,
        v0,
        theta0,
        val_data,
        step,
        outer_steps=steps,
        outer_optimizer=outer_optimizer,
        outer_lr=outer_lr,
        tol=tol,
        record_every=record_every,
        time_limit_s=time_limit_s,
        evaluate=evaluate,
        counter=counter,
        extras=lambda: {"z": zs["z"].clone()},
        criterion="soba_residual",
        step_metrics=("soba_residual",),
    )


# ------------------------------------------------------------------------------------------ solver cases
def ridge_problem(
    dtype: torch.dtype, device: Any, seed: int, n: int = 60, n_val: int = 40, d: int = 5, noise: float = 0.5
) -> tuple[BilevelProblem, Batch, Batch]:
    """A ridge-regression hyperparameter problem ``v = log λ`` (per-feature), used by the solver cases.

    Inner ``g = mean ½(y − xᵀθ)² + ½ Σ e^{v_j} θ_j²``, outer ``f = mean ½(y_val − x_valᵀθ)²``; the inner
    solution is closed form, so the exact hypergradient is too; the per-sample gradients are analytic.
    Labels ``y = xᵀθ_true + noise · N(0, 1)`` (with ``noise = 1`` the squared loss is the Gaussian NLL with
    its scale, so the Fisher matches the Hessian).
    """
    g = torch.Generator().manual_seed(4321 + seed)
    theta_true = torch.randn(d, generator=g, dtype=torch.float64)
    X = torch.randn(n, d, generator=g, dtype=torch.float64)
    y = X @ theta_true + noise * torch.randn(n, generator=g, dtype=torch.float64)
    Xv = torch.randn(n_val, d, generator=g, dtype=torch.float64)
    yv = Xv @ theta_true + noise * torch.randn(n_val, generator=g, dtype=torch.float64)

    def inner(v: torch.Tensor, th: torch.Tensor, batch: Batch) -> torch.Tensor:
        x, t = batch
        return 0.5 * (t - x @ th) ** 2

    def outer(v: torch.Tensor, th: torch.Tensor, batch: Batch) -> torch.Tensor:
        x, t = batch
        return 0.5 * ((t - x @ th) ** 2).mean()

    def reg(v: torch.Tensor, th: torch.Tensor) -> torch.Tensor:
        return 0.5 * (torch.exp(v) * th**2).sum()

    def per_sample_grad(v: torch.Tensor, th: torch.Tensor, batch: Batch) -> torch.Tensor:
        x, t = batch
        return (x @ th - t).unsqueeze(1) * x

    def to(t: torch.Tensor) -> torch.Tensor:
        return t.to(dtype=dtype, device=device)

    problem = BilevelProblem(inner, outer, reg, per_sample_grad=per_sample_grad)
    return problem, (to(X), to(y)), (to(Xv), to(yv))


def _ridge_value(v: torch.Tensor, train: Batch, val: Batch) -> torch.Tensor:
    X, y = (t.double().cpu() for t in train)
    Xv, yv = (t.double().cpu() for t in val)
    n = X.shape[0]
    theta = torch.linalg.solve(X.T @ X / n + torch.diag(torch.exp(v)), X.T @ y / n)
    return 0.5 * ((yv - Xv @ theta) ** 2).mean()


def _case_solve(estimator: str) -> Callable[..., Result]:
    def solve(*, dtype: torch.dtype, device: Any, seed: int, **overrides: Any) -> Result:
        problem, train, val = ridge_problem(dtype, device, 0, n=30, n_val=20, d=3)
        v0 = torch.zeros(3, dtype=dtype, device=device)
        th0 = torch.zeros(3, dtype=dtype, device=device)

        def sgd(params: list[torch.Tensor]) -> torch.optim.Optimizer:
            return torch.optim.SGD(params, lr=2.0)

        common: dict[str, Any] = {
            "inner_lr": 0.4,
            "batch_size": 30,
            "seed": seed,
            "tol": None,
            "outer_optimizer": sgd,
        }
        if estimator == "soba":
            kw: dict[str, Any] = {**common, "steps": 20}
            kw.update(overrides)
            return soba(problem, v0, th0, train, val, **kw)
        kw = {**common, "estimator": estimator, "outer_steps": 10, "inner_steps": 10, "hyper_steps": 8}
        if estimator == "stocbio":
            kw["eta"] = 0.4
        kw.update(overrides)
        return bilevel_solve(problem, v0, th0, train, val, **kw)

    return solve


def _case_grad_norm(res: Result) -> float:
    """‖∇Φ(v)‖ of the exact (closed-form) value function at the result's v, by autograd."""
    _, train, val = ridge_problem(torch.float64, "cpu", 0, n=30, n_val=20, d=3)
    v = res.x.detach().double().cpu().requires_grad_(True)
    (g,) = torch.autograd.grad(_ridge_value(v, train, val), v)
    return float(g.norm())


def solver_cases() -> list[SolverCase]:
    """The cases of :func:`bilevel_solve` (each estimator) and :func:`soba` on a 5-feature ridge problem.

    ``converged`` is the estimated hypergradient norm ``≤ tol``; optimality is the exact ``‖∇Φ(v)‖`` of the
    closed-form value function (small once the outer Adam steps have settled).
    """
    cases = []
    for est in ("cg", "stocbio", "itd", "soba"):  # neumann and exact: tests/bilevel
        max_key = "steps" if est == "soba" else "outer_steps"
        crit = "soba_residual" if est == "soba" else "hypergrad_norm"
        conv_tol = 2e-2
        cases.append(
            SolverCase(
                name=f"bilevel-{est}",
                solve=_case_solve(est),
                statuses={
                    "converged": {"tol": conv_tol, max_key: 2000},
                    "max_iter": {max_key: 3},
                    "diverged": {"inner_lr": 1e30},
                    "timeout": {"time_limit_s": 0.0},
                },
                max_iter=3,
                tolerance_holds=lambda r, t=conv_tol, c=crit: r.history.last(c) <= t,
                optimality=_case_grad_norm,
                optimality_tol=5e-2,
                invalid=[({"inner_lr": -1.0}, "inner_lr"), ({"batch_size": 0}, "batch_size")]
                + ([({"estimator": "bad"}, "estimator")] if est != "soba" else []),
                determinism={"batch_size": 20},
                stochastic=True,
                timing_metrics=("hypergrad_seconds",),
            )
        )
    return cases
