r"""Epistemic Nearest Neighbors (ENN): a K-nearest-neighbour surrogate with epistemic and aleatoric variance.

Paper: M. Bafna, S. A. Jadhav, D. Sweet, "Taking the GP Out of the Loop", ICML 2026, arXiv:2506.12818
(reference code: the authors' package ``ennbo``, repository yubo-research/enn).

Model. Targets are standardised per output column, :math:`y_z = (y - \bar y)/s_y` (population std, 1 if it is
0). For a query :math:`x` with its :math:`K` nearest training points (Euclidean; at a tie for the
:math:`K`-th place the lowest training index wins, see :meth:`ENN.neighbors`), each
neighbour is an independent noisy estimate of :math:`f(x)` with variance

.. math:: v_i = \varepsilon + c_{epi}\, \lVert x - x_i\rVert^2 + c_{ale} + \mathrm{yvar}_i / s_y^2 ,

weights :math:`w_i = 1/v_i`, :math:`\bar w_i = w_i/\sum_j w_j`, mean :math:`\mu_z = \sum_i \bar w_i y_{z,i}`,
epistemic variance :math:`\sigma^2_{epi} = 1/\sum_i w_i`, and (only with ``observation_noise=True``) the
aleatoric variance :math:`\sigma^2_{ale} = \sum_i \bar w_i (c_{ale} + \mathrm{yvar}_i/s_y^2)`. Returned:
:math:`\mu = \bar y + s_y \mu_z`,
:math:`\sigma = s_y \sqrt{\max(\sigma^2_{epi} + \sigma^2_{ale}, \varepsilon)}`.
With :math:`c_{epi} = 1, c_{ale} = 0` this is the v1 paper's inverse-squared-distance weighting.

Fitting (:func:`fit_enn_params`, the ICML version, after ``ennbo``'s fitter): ``num_fit_candidates`` pairs
:math:`(c_{epi}, c_{ale})` log-uniform in :math:`[10^{-3}, 10^3]` plus a warm-start pair (the previous best,
or the default (1, 0) at the first call: our choice, so the fit never scores below the default on its
subsample), scored by the leave-one-out Gaussian log-likelihood at ``num_fit_samples`` random training points
(``exclude_nearest=True``, observation noise on, standardised units); the argmax wins. All candidates share
one neighbour search: O(P N) search plus O(candidates P K) arithmetic.

Implementation notes (where we differ from ``ennbo``): exact brute-force K-NN in torch, in float64, in query
chunks sized so memory stays O(N * chunk) with chunk * N bounded (never N x N). Neighbours are *selected*
with the matrix-product form of the squared distance (one ``addmm`` per chunk, clamped at 0, ranked by
``topk`` on its bits read as int64, which orders non-negative doubles exactly and is faster than a float
``topk``; for wide chunks, N >= 4096, an exact two-level block-minimum selection, :func:`_smallest`) and
their distances then *recomputed* by direct differences, so a query at a training point is at distance exactly
0 (``ennbo`` works in single precision) and the posterior is differentiable in ``x`` (used by the BoTorch
adapter). Many parameter pairs are evaluated in
one batched call (:meth:`ENN.posterior_batch`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from optarium._core.validation import check_int, check_nonnegative, check_positive, check_type

__all__ = ["ENN", "ENNParams", "ENNPosterior", "fit_enn_params", "loo_log_likelihood"]

#: Elements of one (chunk x N) distance block; bounds the search's working memory (32 MiB in float64).
_BLOCK_ELEMS = 1 << 22
#: Candidate slots per row in the second stage of :func:`_smallest` (a narrow, cheap ``topk``).
_CAP = 20
#: Columns below which plain ``topk`` is as fast (measured, 1 thread) and is used.
_MIN_COLS = 4096
#: Integer views whose order equals the order of non-negative floats of the same width.
_INT_VIEW = {torch.float64: torch.int64, torch.float32: torch.int32}


def _topk_smallest(v: torch.Tensor, kk: int) -> torch.Tensor:
    """``topk`` indices of the ``kk`` smallest of each row of a non-negative float tensor. Non-negative IEEE
    floats order exactly like their bit patterns read as integers, and integer ``topk`` is faster."""
    iv = _INT_VIEW.get(v.dtype)
    keys = v if iv is None else v.view(iv)
    return torch.topk(keys, kk, dim=-1, largest=False, sorted=False).indices


def _smallest(d2: torch.Tensor, kk: int) -> torch.Tensor:
    """Column indices ``(n, kk)`` (unordered) of the ``kk`` smallest entries of each row of the non-negative
    ``d2`` (values exact; ties may be broken either way).

    Wide rows (``N >= _MIN_COLS``) use an exact two-level selection: the columns form ``nb`` strided blocks
    (column ``j`` in block ``j mod nb``) whose minima come from one cheap reduction; the ``kk`` smallest
    entries lie in the ``kk`` blocks with the smallest minima and are ``<= t``, the largest of those ``kk``
    minima (each minimum is itself a candidate, so the selected *values* are exactly the ``kk`` smallest).
    The few entries ``<= t`` of those blocks (about ``kk``) are compacted to at most ``_CAP`` per row and a
    narrow ``topk`` picks the ``kk``; rows with more (rare) fall back to ``topk`` over their blocks. Narrow
    rows use one ``topk``.
    """
    n, N = d2.shape
    nb = max(4 * kk, math.isqrt(3 * kk * N))
    if N < _MIN_COLS or kk > _CAP - 4 or N < 4 * nb:
        return _topk_smallest(d2, kk)
    B = N // nb
    M = B * nb
    rem = N - M
    mins = d2[:, :M].view(n, B, nb).amin(1)  # (n, nb)
    if rem:
        mins[:, :rem] = torch.minimum(mins[:, :rem], d2[:, M:])
    blocks = _topk_smallest(mins, kk)
    t = mins.gather(1, blocks).amax(-1, keepdim=True)
    steps = torch.arange(B + (rem > 0), device=d2.device) * nb
    cols = (blocks.unsqueeze(-1) + steps).view(n, -1)  # (n, kk * B'): every column of the kk blocks
    if rem:  # blocks j >= rem have no entry in the last row of the layout
        missing = cols >= N
        cols.clamp_(max=N - 1)
    vals = d2.gather(1, cols)
    if rem:
        vals.masked_fill_(missing, math.inf)
    # compact the entries <= t (in order) into _CAP slots; slot 0 of `slot` collects the rest
    keep = vals <= t
    pos = keep.cumsum(1)
    count = pos[:, -1].clone()
    pos.mul_(keep).clamp_(max=_CAP)
    slot = torch.zeros(n, _CAP + 1, dtype=torch.long, device=d2.device)
    slot.scatter_(1, pos, torch.arange(cols.shape[1], device=d2.device).expand(n, -1))
    slot = slot[:, 1:]
    cand = vals.gather(1, slot)
    cand.masked_fill_(torch.arange(1, _CAP + 1, device=d2.device) > count.unsqueeze(-1), math.inf)
    pick = slot.gather(1, _topk_smallest(cand, kk))
    over = torch.nonzero(count > _CAP).squeeze(-1)
    if over.numel():
        pick[over] = _topk_smallest(vals[over], kk)
    return cols.gather(1, pick)


def _smallest_lowest_index(d2: torch.Tensor, kk: int) -> torch.Tensor:
    """Column indices ``(n, kk)`` (unordered) of the ``kk`` smallest entries of each row of the non-negative
    ``d2`` with ties at the ``kk``-th value going to the lowest column index.

    :func:`_smallest` finds ``kk + 1`` entries; a row whose ``kk``-th and ``(kk + 1)``-th smallest values
    differ has a unique ``kk``-smallest set (the first ``kk`` of those). A row where they are equal (a tie at
    the boundary, e.g. duplicated training points) is settled by a stable sort of the whole row, which keeps
    equal values in index order. Ties are rare for continuous inputs, so the cost is one ``kk + 1``
    selection plus an ``(n, kk + 1)`` sort.
    """
    n, N = d2.shape
    if kk >= N:
        return torch.arange(N, device=d2.device).expand(n, N)
    sel = _smallest(d2, kk + 1)
    vals = d2.gather(1, sel)
    order = _INT_VIEW.get(vals.dtype)
    keys = vals if order is None else vals.view(order)
    srt, pos = keys.sort(-1)
    out = sel.gather(1, pos[:, :kk])
    tied = torch.nonzero(srt[:, kk] == srt[:, kk - 1]).squeeze(-1)
    if tied.numel():
        out[tied] = torch.sort(d2[tied], dim=-1, stable=True).indices[:, :kk]
    return out


@dataclass(frozen=True)
class ENNParams:
    """ENN hyperparameters: ``k`` neighbours, epistemic scale ``c_epi`` and aleatoric scale ``c_ale``.

    Both scales are in standardised-y units per squared unit-cube distance (``c_ale`` in standardised-y
    variance units).
    """

    k: int = 10
    epistemic_variance_scale: float = 1.0
    aleatoric_variance_scale: float = 0.0

    def __post_init__(self) -> None:
        check_int("k", self.k, minimum=1)
        object.__setattr__(
            self,
            "epistemic_variance_scale",
            check_nonnegative("epistemic_variance_scale", self.epistemic_variance_scale),
        )
        object.__setattr__(
            self,
            "aleatoric_variance_scale",
            check_nonnegative("aleatoric_variance_scale", self.aleatoric_variance_scale),
        )


@dataclass(frozen=True)
class ENNPosterior:
    """ENN predictions at ``n`` queries for ``m`` outputs; each tensor has shape ``(n, m)``.

    Iterating yields ``(mean, variance)``, the surrogate contract of :mod:`optarium.bo`.
    """

    mean: torch.Tensor
    stddev: torch.Tensor
    stddev_epistemic: torch.Tensor
    stddev_aleatoric: torch.Tensor
    neighbor_idx: torch.Tensor

    @property
    def variance(self) -> torch.Tensor:
        """``stddev ** 2``."""
        return self.stddev.square()

    def __iter__(self) -> Iterator[torch.Tensor]:
        return iter((self.mean, self.variance))


def _as_tensor(name: str, value: Any, dtype: torch.dtype, device: Any = None) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value.to(dtype=dtype, device=device if device is not None else value.device)
    try:
        return torch.as_tensor(value, dtype=dtype, device=device)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise TypeError(f"{name}: must be a tensor or array-like, got {type(value).__name__}") from exc


class ENN:
    """The ENN surrogate over training data ``(train_x, train_y[, train_yvar])``.

    Args:
        train_x: ``(N, d)`` inputs (the optimisers pass unit-cube coordinates).
        train_y: ``(N,)`` or ``(N, m)`` targets; each output column is modelled independently.
        train_yvar: optional per-point noise variances, same shape as ``train_y``.
        eps: the variance floor :math:`\\varepsilon` (``ennbo``: 1e-9).
        dtype: working dtype (float64 by default; ``None`` keeps ``train_x``'s floating dtype).

    Example:
        >>> x = torch.rand(50, 2, dtype=torch.float64)
        >>> enn = ENN(x, torch.sin(6 * x[:, 0]))
        >>> post = enn.posterior(torch.rand(4, 2, dtype=torch.float64), params=ENNParams(k=5))
        >>> post.mean.shape, post.stddev.shape
        (torch.Size([4, 1]), torch.Size([4, 1]))
    """

    def __init__(
        self,
        train_x: Any,
        train_y: Any,
        train_yvar: Any = None,
        *,
        eps: float = 1e-9,
        dtype: torch.dtype | None = torch.float64,
    ) -> None:
        self.eps = check_positive("eps", eps)
        if dtype is None:
            dtype = (
                train_x.dtype if isinstance(train_x, torch.Tensor) and train_x.is_floating_point() else None
            )
            dtype = dtype or torch.float64
        self.dtype = dtype
        x = _as_tensor("train_x", train_x, dtype)
        self._d = int(x.shape[-1]) if x.ndim == 2 else -1
        self.X = torch.empty(0, max(self._d, 0), dtype=dtype, device=x.device)
        self.Y = torch.empty(0, 0, dtype=dtype, device=x.device)
        self.Yvar: torch.Tensor | None = None
        self._has_yvar = train_yvar is not None
        self.add(x, train_y, train_yvar)

    # ------------------------------------------------------------------ data
    @property
    def n(self) -> int:
        """Number of training points ``N``."""
        return int(self.X.shape[0])

    @property
    def num_outputs(self) -> int:
        """Number of output columns ``m``."""
        return int(self.Y.shape[1])

    def add(self, x: Any, y: Any, yvar: Any = None) -> None:
        """Append observations (O(new points) plus an O(N m) refresh of the standardisation)."""
        x = _as_tensor("train_x", x, self.dtype, self.X.device)
        y = _as_tensor("train_y", y, self.dtype, self.X.device)
        if x.ndim != 2 or x.shape[1] < 1:
            raise ValueError(f"train_x: must have shape (N, d), got {tuple(x.shape)}")
        if self.X.shape[1] != x.shape[1]:
            if self.n > 0:
                raise ValueError(f"train_x: must have {self.X.shape[1]} columns, got {x.shape[1]}")
            self.X = self.X.new_empty(0, x.shape[1])
        if y.ndim == 1:
            y = y.unsqueeze(-1)
        if y.ndim != 2 or y.shape[0] != x.shape[0]:
            raise ValueError(
                f"train_y: must have shape ({x.shape[0]},) or ({x.shape[0]}, m), got {tuple(y.shape)}"
            )
        if self.n > 0 and y.shape[1] != self.Y.shape[1]:
            raise ValueError(f"train_y: must have {self.Y.shape[1]} columns, got {y.shape[1]}")
        if (yvar is not None) != self._has_yvar:
            raise ValueError("train_yvar: give it for every batch of data or for none")
        if not torch.isfinite(x).all():
            raise ValueError("train_x: contains NaN or inf")
        if not torch.isfinite(y).all():
            raise ValueError("train_y: contains NaN or inf")
        if yvar is not None:
            yvar = _as_tensor("train_yvar", yvar, self.dtype, self.X.device)
            yvar = yvar.unsqueeze(-1) if yvar.ndim == 1 else yvar
            if yvar.shape != y.shape:
                raise ValueError(f"train_yvar: must have shape {tuple(y.shape)}, got {tuple(yvar.shape)}")
            if not torch.isfinite(yvar).all() or (yvar < 0).any():
                raise ValueError("train_yvar: must be finite and >= 0")
            self.Yvar = yvar if self.Yvar is None else torch.cat([self.Yvar, yvar])
        self.X = torch.cat([self.X, x]) if self.n else x.clone()
        self.Y = torch.cat([self.Y, y]) if self.Y.numel() else y.clone()
        self._sqnorm = self.X.square().sum(-1)
        self._XT = torch.cat([self.X, -0.5 * self._sqnorm.unsqueeze(-1)], 1).T.contiguous()
        self._standardise()

    def _standardise(self) -> None:
        if self.n == 0:
            self.y_mean = self.Y.new_zeros(self.Y.shape[1])
            self.y_std = self.Y.new_ones(self.Y.shape[1])
        else:
            self.y_mean = self.Y.mean(0)
            std = self.Y.std(0, correction=0)
            self.y_std = torch.where(torch.isfinite(std) & (std > 0), std, torch.ones_like(std))
        self.Yz = (self.Y - self.y_mean) / self.y_std
        self.Yvar_z = None if self.Yvar is None else self.Yvar / self.y_std.square()

    def fit(self, X: Any, Y: Any, Yvar: Any = None) -> ENN:
        """Replace the training data (the surrogate contract's ``fit``; scales: :func:`fit_enn_params`)."""
        self.X = self.X.new_empty(0, self.X.shape[1])
        self.Y = self.Y.new_empty(0, 0)
        self.Yvar = None
        self._has_yvar = Yvar is not None
        self.add(X, Y, Yvar)
        return self

    # ------------------------------------------------------------------ search
    def neighbors(
        self, x: torch.Tensor, k: int, *, exclude_nearest: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Indices ``(n, k')`` and squared distances ``(n, k')`` of the nearest training points, sorted by
        distance (ties by index); ``k' = min(k, N)`` (``min(k, N - 1)`` when ``exclude_nearest``).

        Brute force in query chunks; memory O(chunk * N) with chunk * N <= 4M elements. The tie rule: the
        ``k`` (``k + 1`` with ``exclude_nearest``) neighbours are the smallest matrix-product distances, and
        at a tie for the last place (duplicated training points) the lowest training indices win
        (:func:`_smallest_lowest_index`). Their distances are then recomputed by direct differences (exact 0
        at a training point; differentiable) and the neighbours ordered by (that distance, index); with
        ``exclude_nearest`` the first of that order is dropped, so of several copies at the query the
        lowest-index one is excluded.
        """
        k = check_int("k", k, minimum=1)
        if exclude_nearest and self.n < 2:
            raise ValueError(f"exclude_nearest: needs at least 2 training points, got {self.n}")
        if self.n == 0:
            raise RuntimeError("no training data: add observations first")
        kk = min(k + int(exclude_nearest), self.n)
        chunk = max(1, _BLOCK_ELEMS // max(self.n, 1))
        xd = x.detach()
        qn = xd.square().sum(-1)
        idx_parts = []
        with torch.no_grad():
            for s in range(0, xd.shape[0], chunk):
                q = xd[s : s + chunk]
                if kk < self.n:
                    # |q|^2 - 2 [q, 1].[x_j, -|x_j|^2 / 2] in one product, clamped at 0; non-negative doubles
                    # order like their bit patterns read as int64, and integer topk is faster than float
                    q1 = torch.cat([q, q.new_ones(q.shape[0], 1)], 1)
                    d2 = torch.addmm(qn[s : s + chunk].unsqueeze(-1), q1, self._XT, alpha=-2.0)
                    idx_parts.append(_smallest_lowest_index(d2.clamp_(min=0.0), kk))
                else:
                    idx_parts.append(torch.arange(self.n, device=x.device).expand(q.shape[0], self.n))
        idx = torch.cat(idx_parts) if idx_parts else torch.empty(0, kk, dtype=torch.long, device=x.device)
        d2 = (x.unsqueeze(-2) - self.X[idx]).square().sum(-1)
        # order by (exact distance, index): sort by index first, then stably by distance
        idx, order = idx.sort(-1)
        d2 = d2.gather(-1, order)
        order = d2.detach().argsort(dim=-1, stable=True)
        idx, d2 = idx.gather(-1, order), d2.gather(-1, order)
        if exclude_nearest:
            idx, d2 = idx[:, 1:], d2[:, 1:]
        return idx, d2

    # ------------------------------------------------------------------ posterior
    def posterior_batch(
        self,
        x: torch.Tensor,
        k: int,
        epistemic_variance_scale: torch.Tensor,
        aleatoric_variance_scale: torch.Tensor,
        *,
        exclude_nearest: bool = False,
        observation_noise: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Posterior for ``P`` parameter pairs at once (one neighbour search).

        Returns standardised ``(mean_z, var_epi_z, var_ale_z)`` of shape ``(P, n, m)``, the neighbour indices
        ``(n, k')`` and squared distances ``(n, k')``.
        """
        idx, d2 = self.neighbors(x, k, exclude_nearest=exclude_nearest)
        c_epi = epistemic_variance_scale.to(self.Yz).reshape(-1, 1, 1, 1)
        c_ale = aleatoric_variance_scale.to(self.Yz).reshape(-1, 1, 1, 1)
        extra = c_ale  # (P, 1, 1, 1)
        if self.Yvar_z is not None:
            extra = extra + self.Yvar_z[idx].unsqueeze(0)  # (P, n, k, m)
        v = self.eps + c_epi * d2.unsqueeze(0).unsqueeze(-1) + extra  # (P, n, k, m)
        w = v.reciprocal()
        wsum = w.sum(-2)
        wbar = w / wsum.unsqueeze(-2)
        yz = self.Yz[idx].unsqueeze(0)  # (1, n, k, m)
        mean_z = (wbar * yz).sum(-2)
        var_epi = wsum.reciprocal()
        if observation_noise:
            var_ale = (wbar * extra.expand_as(wbar)).sum(-2)
        else:
            var_ale = torch.zeros_like(var_epi)
        return mean_z, var_epi, var_ale, idx, d2

    def posterior(
        self,
        x: Any,
        params: ENNParams | None = None,
        *,
        exclude_nearest: bool = False,
        observation_noise: bool = False,
    ) -> ENNPosterior:
        """The ENN posterior at ``x`` (shape ``(n, d)``) in the user's units of ``y``."""
        params = ENNParams() if params is None else check_type("params", params, ENNParams)
        x = _as_tensor("x", x, self.dtype, self.X.device)
        if x.ndim != 2 or x.shape[1] != self.X.shape[1]:
            raise ValueError(f"x: must have shape (n, {self.X.shape[1]}), got {tuple(x.shape)}")
        if not torch.isfinite(x).all():
            raise ValueError("x: contains NaN or inf")
        scales = self.X.new_tensor
        mean_z, var_epi, var_ale, idx, _ = self.posterior_batch(
            x,
            params.k,
            scales([params.epistemic_variance_scale]),
            scales([params.aleatoric_variance_scale]),
            exclude_nearest=exclude_nearest,
            observation_noise=observation_noise,
        )
        mean_z, var_epi, var_ale = mean_z[0], var_epi[0], var_ale[0]
        total = (var_epi + var_ale).clamp_min(self.eps)
        return ENNPosterior(
            mean=self.y_mean + self.y_std * mean_z,
            stddev=self.y_std * total.sqrt(),
            stddev_epistemic=self.y_std * var_epi.sqrt(),
            stddev_aleatoric=self.y_std * var_ale.sqrt(),
            neighbor_idx=idx,
        )


def loo_log_likelihood(
    enn: ENN,
    sample_idx: torch.Tensor,
    k: int,
    epistemic_variance_scale: torch.Tensor,
    aleatoric_variance_scale: torch.Tensor,
) -> torch.Tensor:
    """Leave-one-out Gaussian log-likelihood (standardised units, summed over points and outputs) of each
    parameter pair at the training points ``sample_idx``; shape ``(P,)``. Non-finite terms give ``-inf``."""
    mean_z, var_epi, var_ale, _, _ = enn.posterior_batch(
        enn.X[sample_idx],
        k,
        epistemic_variance_scale,
        aleatoric_variance_scale,
        exclude_nearest=True,
        observation_noise=True,
    )
    var = (var_epi + var_ale).clamp_min(enn.eps)
    resid = enn.Yz[sample_idx].unsqueeze(0) - mean_z
    ll = -0.5 * (torch.log(2 * math.pi * var) + resid.square() / var)
    ll = ll.sum((-2, -1))
    return torch.where(torch.isfinite(ll), ll, torch.full_like(ll, -math.inf))


def fit_enn_params(
    enn: ENN,
    k: int = 10,
    num_fit_candidates: int = 30,
    num_fit_samples: int = 10,
    *,
    generator: torch.Generator | None = None,
    warm_start: ENNParams | Sequence[ENNParams] | None = None,
    infer_aleatoric: bool = True,
    scale_range: tuple[float, float] = (1e-3, 1e3),
) -> ENNParams:
    """Fit ``(c_epi, c_ale)`` by subsampled leave-one-out log-likelihood (see the module docstring).

    Args:
        enn: the surrogate with its training data.
        k: number of neighbours (not fitted).
        num_fit_candidates: random log-uniform candidate pairs.
        num_fit_samples: training points ``P`` scored (without replacement; all if ``N < P``).
        generator: randomness for the candidates and the subsample.
        warm_start: extra candidate pair(s), typically the previous best; default ``ENNParams(k, 1, 0)``.
        infer_aleatoric: if False, ``c_ale`` is fixed to 0.
        scale_range: the log-uniform range of both scales.
    """
    check_type("enn", enn, ENN)
    k = check_int("k", k, minimum=1)
    num_fit_candidates = check_int("num_fit_candidates", num_fit_candidates, minimum=1)
    num_fit_samples = check_int("num_fit_samples", num_fit_samples, minimum=1)
    lo, hi = (check_positive("scale_range", float(v)) for v in scale_range)
    if lo > hi:
        raise ValueError(f"scale_range: low must be <= high, got {scale_range}")
    if enn.n < 2:
        return ENNParams(k, 1.0, 0.0)
    gen = generator if generator is not None else torch.Generator().manual_seed(0)
    dev = enn.X.device
    u = torch.rand(num_fit_candidates, 2, generator=gen, dtype=enn.dtype).to(dev)
    scales = torch.exp(math.log(lo) + (math.log(hi) - math.log(lo)) * u)
    if not infer_aleatoric:
        scales[:, 1] = 0.0
    warm = [ENNParams(k, 1.0, 0.0)] if warm_start is None else warm_start
    warm = [warm] if isinstance(warm, ENNParams) else list(warm)
    ws = enn.X.new_tensor(
        [[p.epistemic_variance_scale, p.aleatoric_variance_scale if infer_aleatoric else 0.0] for p in warm]
    )
    scales = torch.cat([ws, scales])
    p = min(num_fit_samples, enn.n)
    sample = torch.randperm(enn.n, generator=gen)[:p].to(dev)
    ll = loo_log_likelihood(enn, sample, k, scales[:, 0], scales[:, 1])
    best = int(torch.argmax(ll))
    return ENNParams(k, float(scales[best, 0]), float(scales[best, 1]))
