r"""Laptop-scale bilevel tasks: per-feature regularisation tuning of a well-specified logistic model.

:func:`logistic_regularization_task` draws ``x ~ N(0, Σ)`` with ``Σ_ij = ρ^{|i−j|}``, labels from a true
logistic model with a sparse ``θ*``, and states the bilevel problem

.. math::

    g(v, θ) = \frac1n \sum_i \ell(θ; x_i, y_i) + \tfrac12 \sum_j e^{v_j} θ_j^2,\qquad
    f(v, θ) = \frac1{n_\text{val}} \sum_i \ell(θ; x^\text{val}_i, y^\text{val}_i),

with ``ℓ`` the logistic negative log-likelihood (the model is well specified, so the Fisher matches the
Hessian at the optimum). The per-sample gradients are analytic (``(σ(xᵀθ) − y) x``). The task also gives the
exact inner solution by Newton's method (:meth:`LogisticTask.theta_star`, to ~1e-12 in the gradient norm)
and the value function ``Φ(v) = f(v, θ*(v))``.

:func:`hyper_cleaning_task` is data hyper-cleaning on scikit-learn's bundled digits (40 % of the training
labels corrupted, one weight ``σ(v_i)`` per training sample, multinomial logistic regression with 650
parameters and a fixed ridge), the spec's full-scale task.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from optarium.bilevel.problem import Batch, BilevelProblem

__all__ = ["CleaningTask", "LogisticTask", "hyper_cleaning_task", "logistic_regularization_task"]


def _nll(theta: torch.Tensor, X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    z = X @ theta
    return torch.nn.functional.softplus(z) - y * z


@dataclass(frozen=True)
class LogisticTask:
    """A drawn per-feature regularisation task: data splits, the bilevel problem and exact oracles."""

    problem: BilevelProblem
    train: Batch
    val: Batch
    test: Batch
    theta_true: torch.Tensor

    def theta_star(
        self, v: torch.Tensor, theta0: torch.Tensor | None = None, tol: float = 1e-12
    ) -> torch.Tensor:
        """The exact inner solution ``θ*(v)`` by damped Newton steps (at most 50), from ``theta0``."""
        X, y = self.train
        n, d = X.shape
        lam = torch.exp(v.detach()).to(X)
        th = torch.zeros(d, dtype=X.dtype, device=X.device) if theta0 is None else theta0.detach().clone()
        for _ in range(50):
            p = torch.sigmoid(X @ th)
            grad = X.T @ (p - y) / n + lam * th
            if float(grad.norm()) <= tol:
                break
            H = (X * (p * (1 - p)).unsqueeze(1)).T @ X / n + torch.diag(lam)
            th = th - torch.linalg.solve(H, grad)
        return th

    def value(self, v: torch.Tensor, theta0: torch.Tensor | None = None) -> float:
        """``Φ(v) = f(v, θ*(v))`` (the validation NLL at the exact inner solution)."""
        X, y = self.val
        return float(_nll(self.theta_star(v, theta0), X, y).mean())

    def test_loss(self, theta: torch.Tensor) -> float:
        """The test NLL of ``θ``."""
        X, y = self.test
        return float(_nll(theta, X, y).mean())


def logistic_regularization_task(
    seed: int,
    *,
    d: int = 50,
    n_train: int = 2000,
    n_val: int = 1000,
    n_test: int = 5000,
    nonzeros: int = 10,
    rho: float = 0.5,
    dtype: torch.dtype = torch.float64,
) -> LogisticTask:
    """Draw the task of ``seed`` (the nhgd spec's quick problem with its defaults)."""
    if d < 1 or nonzeros < 0 or nonzeros > d:
        raise ValueError(f"nonzeros: must be in [0, d = {d}], got {nonzeros}")
    g = torch.Generator().manual_seed(7919 * (seed + 1))
    idx = torch.arange(d, dtype=torch.float64)
    cov = rho ** (idx[:, None] - idx[None, :]).abs()
    L = torch.linalg.cholesky(cov)
    theta = torch.zeros(d, dtype=torch.float64)
    support = torch.randperm(d, generator=g)[:nonzeros]
    theta[support] = 2.0 * torch.randn(nonzeros, generator=g, dtype=torch.float64)

    def draw(n: int) -> Batch:
        X = torch.randn(n, d, generator=g, dtype=torch.float64) @ L.T
        y = (torch.rand(n, generator=g, dtype=torch.float64) < torch.sigmoid(X @ theta)).to(torch.float64)
        return X.to(dtype), y.to(dtype)

    train, val, test = draw(n_train), draw(n_val), draw(n_test)

    def inner(v: torch.Tensor, th: torch.Tensor, batch: Batch) -> torch.Tensor:
        return _nll(th, batch[0], batch[1])

    def outer(v: torch.Tensor, th: torch.Tensor, batch: Batch) -> torch.Tensor:
        return _nll(th, batch[0], batch[1]).mean()

    def reg(v: torch.Tensor, th: torch.Tensor) -> torch.Tensor:
        return 0.5 * (torch.exp(v) * th * th).sum()

    def psg(v: torch.Tensor, th: torch.Tensor, batch: Batch) -> torch.Tensor:
        X, y = batch
        return (torch.sigmoid(X @ th) - y).unsqueeze(1) * X

    problem = BilevelProblem(
        inner,
        outer,
        reg,
        per_sample_grad=psg,
        regularizer_hessian_fn=lambda v, th: torch.diag(torch.exp(v)).to(th),
    )
    return LogisticTask(problem, train, val, test, theta.to(dtype))


@dataclass(frozen=True)
class CleaningTask:
    """Data hyper-cleaning on scikit-learn's digits: one weight ``σ(v_i)`` per training sample.

    ``train``/``val``/``test`` batches are ``(X, y, idx)`` with ``X`` the 64 pixels plus a bias column;
    ``corrupted`` flags the training samples whose label was replaced. The inner variable is the flat
    ``65 × 10`` weight matrix of a multinomial logistic regression.
    """

    problem: BilevelProblem
    train: Batch
    val: Batch
    test: Batch
    corrupted: torch.Tensor
    ridge: float

    def accuracy(self, theta: torch.Tensor, batch: Batch | None = None) -> float:
        """Accuracy of ``θ`` on ``batch`` (default the test split)."""
        X, y, _ = self.test if batch is None else batch
        return float(((X @ theta.view(X.shape[1], -1)).argmax(1) == y).to(torch.float64).mean())

    def fit(self, weights: torch.Tensor, batch: Batch | None = None, iters: int = 200) -> torch.Tensor:
        """``argmin_θ mean_i w_i CE_i + ½ ridge ‖θ‖²`` on ``batch`` (default the training split) by L-BFGS."""
        X, y, _ = self.train if batch is None else batch
        th = torch.zeros(X.shape[1] * 10, dtype=X.dtype, requires_grad=True)
        opt = torch.optim.LBFGS(
            [th],
            lr=1.0,
            max_iter=iters,
            tolerance_grad=1e-10,
            tolerance_change=1e-14,
            line_search_fn="strong_wolfe",
        )

        def closure() -> torch.Tensor:
            opt.zero_grad()
            ce = torch.nn.functional.cross_entropy(X @ th.view(X.shape[1], 10), y, reduction="none")
            loss = (weights * ce).mean() + 0.5 * self.ridge * (th * th).sum()
            loss.backward()
            return loss

        opt.step(closure)
        return th.detach()


def hyper_cleaning_task(
    seed: int,
    *,
    n_train: int = 1000,
    n_val: int = 300,
    corrupt: float = 0.4,
    ridge: float = 1e-3,
    dtype: torch.dtype = torch.float64,
) -> CleaningTask:
    """Draw the digits hyper-cleaning task of ``seed`` (the nhgd spec's full scale).

    A seeded permutation of the 1797 digits gives ``n_train`` training, ``n_val`` clean validation and the
    rest test samples; a fraction ``corrupt`` of the training labels is replaced by a uniformly drawn *other*
    class. Inner: ``mean_i σ(v_i) CE_i + ½ ridge ‖θ‖²`` (the ridge makes ``θ*(v)`` unique); outer: validation
    cross-entropy.
    """
    from optarium.problems.datasets import load_digits

    if not 0.0 <= corrupt < 1.0:
        raise ValueError(f"corrupt: must be in [0, 1), got {corrupt!r}")
    x, labels = load_digits()
    n = x.shape[0]
    if n_train + n_val >= n:
        raise ValueError(f"n_train: n_train + n_val must be below {n}")
    g = torch.Generator().manual_seed(104_729 * (seed + 1))
    perm = torch.randperm(n, generator=g)
    X = torch.cat([x.to(dtype), torch.ones(n, 1, dtype=dtype)], 1)[perm]
    y = labels[perm].clone()
    tr, va, te = slice(0, n_train), slice(n_train, n_train + n_val), slice(n_train + n_val, n)
    y_train = y[tr].clone()
    flip = torch.randperm(n_train, generator=g)[: round(corrupt * n_train)]
    shift = torch.randint(1, 10, (flip.numel(),), generator=g)
    y_train[flip] = (y_train[flip] + shift) % 10
    corrupted = torch.zeros(n_train, dtype=torch.bool)
    corrupted[flip] = True
    p = X.shape[1]

    def ce(th: torch.Tensor, batch: Batch) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(batch[0] @ th.view(p, 10), batch[1], reduction="none")

    def psg(v: torch.Tensor, th: torch.Tensor, batch: Batch) -> torch.Tensor:
        Xb, yb = batch[0], batch[1]
        r = torch.softmax(Xb @ th.view(p, 10), 1)
        r[torch.arange(Xb.shape[0]), yb] -= 1.0
        return (Xb.unsqueeze(2) * r.unsqueeze(1)).reshape(Xb.shape[0], p * 10)

    problem = BilevelProblem(
        lambda v, th, b: ce(th, b),
        lambda v, th, b: ce(th, b).mean(),
        lambda v, th: 0.5 * ridge * (th * th).sum(),
        per_sample_grad=psg,
        sample_weight=lambda v, b: torch.sigmoid(v[b[2]]),
        regularizer_hessian_fn=lambda v, th: ridge * torch.eye(th.numel(), dtype=th.dtype, device=th.device),
    )

    def split(s: slice, labels_: torch.Tensor) -> Batch:
        Xs = X[s]
        return Xs, labels_, torch.arange(Xs.shape[0])

    return CleaningTask(problem, split(tr, y_train), split(va, y[va]), split(te, y[te]), corrupted, ridge)
