r"""DB-KSVD: double-batch K-SVD dictionary learning, its matching-pursuit coder and a TopK SAE baseline.

Paper: Romeo Valentin et al., "DB-KSVD: Scalable Alternating Optimization for Disentangling
High-Dimensional Embedding Spaces", arXiv:2505.18441 (ICML 2026); official code: the Julia package
``KSVD.jl`` (github RomeoV/KSVD.jl). The paper body was not read (spec ``db-ksvd.md``); the algorithm below
follows the package's documented defaults as the spec reports them, rewritten here in torch (no code copied).

**Problem.** Data :math:`Y\in\mathbb R^{m\times N}` (columns are samples; the public API takes
``(n_samples, n_features)`` and transposes), dictionary :math:`D\in\mathbb R^{m\times K}` with unit-norm
columns, codes :math:`X\in\mathbb R^{K\times N}`:

.. math:: \min_{D,X}\ \|Y-DX\|_F^2\quad\text{s.t.}\quad\|x_j\|_0\le k,\ \ \|d_i\|_2=1.

**Algorithm.**

1. *Init:* :math:`D_{ij}\sim U(-\tfrac12,\tfrac12)`, redrawn until full rank, columns normalised; then
   :math:`X` = sparse coding of :math:`Y`.
2. *Sparse coding* (:func:`matching_pursuit`, all samples at once in chunks): :math:`C = D^\top Y`,
   :math:`G = D^\top D`; per sample pick :math:`a = \arg\max_i |C_{ij}|`, add :math:`c = C_{aj}` to
   :math:`X_{aj}` (an atom picked twice accumulates), :math:`C_{:,j} \leftarrow C_{:,j} - G_{:,a}c`,
   :math:`\|r_j\|^2 \leftarrow \|r_j\|^2 - c^2`; stop after :math:`k` picks or once
   :math:`\|r_j\|/\|y_j\| <` ``rtol`` (default 0.05).
3. *Dictionary update, atom batches:* atoms in a shuffled order, split into batches of ``atom_batch_size``;
   every atom :math:`i` of a batch, in parallel and from the :math:`D, X` of the start of the batch, takes
   its support :math:`\omega_i=\{j: X_{ij}\neq0\}`, the restricted residual
   :math:`E_\omega = Y_{:,\omega}-DX_{:,\omega}+d_iX_{i,\omega}` and its best rank-1 fit
   :math:`E_\omega\approx\sigma_1u_1v_1^\top` (exact SVD); the sign makes the first entry of :math:`u_1`
   non-negative; :math:`d_i=u_1`, :math:`X_{i,\omega}=\sigma_1v_1^\top` (support unchanged). An atom with
   an empty support is redrawn from :math:`U(-\tfrac12,\tfrac12)^m`, normalised. The next batch sees the new
   columns. Batch size 1 is the classical sequential K-SVD (Aharon, Elad and Bruckstein, IEEE TSP 2006).
4. *Sample batches:* the dictionary update of an iteration runs on ``sample_batch_size`` random columns of
   :math:`Y` (all if ``None``); all samples are then sparse-coded again.
5. *Stop* after ``max_iter`` iterations, or when the mean relative error
   :math:`\tfrac1N\sum_j\|y_j-Dx_j\|/\|y_j\|` changes by at most ``tol`` in absolute or relative terms
   (default :math:`\epsilon_{\text{mach}}^{4/5}` of the dtype), or on ``time_limit_s``.

**Implementation.** Codes are stored sparse, ``k`` (index, value) slots per sample (value 0 = empty slot).
The dictionary update keeps the residual :math:`R = Y_S - DX_S` of the sample batch and, per atom batch,
gathers the padded restricted residuals :math:`R_{:,\omega_i} + d_iX_{i,\omega_i}` of all its atoms into one
``(B, m, L)`` tensor (one batched SVD), then applies the rank-1 changes to :math:`R` with one
``index_add_``: :math:`O(m|\omega|)` per atom instead of forming :math:`DX_{:,\omega}`. Coding runs
``coding_chunk_size`` samples at a time (the :math:`K\times N` correlation matrix would not fit otherwise).
The Lasso/FISTA solver of the family (:func:`optarium.sparse.lasso`) is not used: the paper's coder is
:math:`\ell_0` matching pursuit.

**Not done / deviations.** The package's orthogonal-MP coder, its "Matryoshka" nested-group loop, the
target-nnz stopping rule and (older versions') energy-based atom replacement are not implemented; the
Krylov truncated SVD is replaced by an exact batched SVD (same rank-1 fit, to rounding); multithreading is
replaced by batched tensor operations (``atom_batch_size`` atoms per batched SVD).

**Baseline.** :class:`TopKSAE` and :func:`train_topk_sae`: the TopK sparse autoencoder of Gao et al. 2024
("Scaling and evaluating sparse autoencoders"), :math:`z = \mathrm{TopK}(\mathrm{ReLU}(W_e(x-b_p)+b_e))`,
:math:`\hat x = W_d^\top z + b_p`, decoder rows renormalised to unit norm after every Adam step, MSE loss,
early stopping on a held-out error; the AuxK dead-latent loss is not implemented.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor, nn

from optarium._core.result import Result
from optarium._core.seeding import derive_seed
from optarium._core.solver import SolverCase, SolverLoop
from optarium._core.validation import check_int, check_nonnegative, check_positive

__all__ = [
    "DBKSVD",
    "TopKSAE",
    "atom_recovery",
    "db_ksvd",
    "dead_atoms",
    "ksvd_dictionary_update",
    "matching_pursuit",
    "mean_max_coherence",
    "planted_dictionary",
    "reconstruct",
    "solver_cases",
    "train_topk_sae",
]

_ELEMS = 2**23  # elements of one coding / reconstruction chunk when no chunk size is given


# ------------------------------------------------------------------------------------------------ helpers
def _as_data(name: str, Y: Any) -> Tensor:
    """``Y`` (n_samples, n_features) as a floating torch tensor; numpy arrays accepted."""
    if not isinstance(Y, Tensor):
        try:
            import numpy as np
        except ImportError:  # pragma: no cover - numpy is a dependency
            np = None
        if np is not None and isinstance(Y, np.ndarray):
            Y = torch.from_numpy(np.ascontiguousarray(Y))
        else:
            raise TypeError(f"{name}: must be a torch Tensor or numpy array, got {type(Y).__name__}")
    if not Y.is_floating_point():
        raise TypeError(f"{name}: must be floating, got {Y.dtype}")
    if Y.ndim != 2 or Y.shape[0] < 1 or Y.shape[1] < 1:
        raise ValueError(f"{name}: must be a (n_samples, n_features) array, got shape {tuple(Y.shape)}")
    if not bool(torch.isfinite(Y).all()):
        raise ValueError(f"{name}: contains NaN or inf")
    return Y


def _chunk(chunk: int | None, per_sample: int) -> int:
    return max(1, _ELEMS // max(1, per_sample)) if chunk is None else chunk


def _random_atoms(m: int, n: int, gen: torch.Generator, like: Tensor) -> Tensor:
    """``n`` columns from U(-1/2, 1/2)^m, normalised (drawn in float64 on the CPU, then cast)."""
    A = torch.rand(m, n, generator=gen, dtype=torch.float64) - 0.5
    A = A / A.norm(dim=0, keepdim=True).clamp_min(1e-300)
    return A.to(dtype=like.dtype, device=like.device)


def _init_dictionary(m: int, K: int, gen: torch.Generator, like: Tensor) -> Tensor:
    """The package's init: U(-1/2, 1/2) entries, redrawn until full rank, unit columns."""
    for _ in range(100):
        D = _random_atoms(m, K, gen, like)
        if int(torch.linalg.matrix_rank(D.double())) == min(m, K):
            return D
    raise RuntimeError("could not draw a full-rank initial dictionary in 100 tries")  # pragma: no cover


def reconstruct(D: Tensor, indices: Tensor, values: Tensor, *, chunk_size: int | None = None) -> Tensor:
    r""":math:`DX` from sparse codes: ``D`` (m, K) columns, ``indices``/``values`` (k, n) slots -> (m, n).

    Costs :math:`O(mkn)` (gathers the used atoms), in chunks of samples.
    """
    m = D.shape[0]
    k, n = indices.shape
    step = _chunk(chunk_size, m * k)
    out = torch.empty(m, n, dtype=D.dtype, device=D.device)
    for s in range(0, n, step):
        idx, val = indices[:, s : s + step], values[:, s : s + step]
        out[:, s : s + step] = (D[:, idx] * val.unsqueeze(0)).sum(1)
    return out


def matching_pursuit(
    Y: Tensor,
    D: Tensor,
    n_nonzero: int,
    *,
    rtol: float = 0.05,
    chunk_size: int | None = None,
) -> tuple[Tensor, Tensor]:
    r"""Matching pursuit of the columns of ``Y`` (m, n) over the unit-norm columns of ``D`` (m, K).

    Per column: up to ``n_nonzero`` greedy picks :math:`a=\arg\max|D^\top r|`, coefficient
    :math:`c = d_a^\top r`, :math:`r \leftarrow r - c\,d_a` (kept as correlations through :math:`G=D^\top D`);
    a column stops once :math:`\|r\|/\|y\| <` ``rtol``. An atom picked twice accumulates its coefficients.
    Returns ``(indices, values)``, each (n_nonzero, n): the used atoms of each column (a value 0 marks an
    unused slot). All columns of a chunk of ``chunk_size`` are coded at once.
    """
    k = check_int("n_nonzero", n_nonzero, minimum=1)
    rtol = check_nonnegative("rtol", rtol)
    n = Y.shape[1]
    K = D.shape[1]
    if k > K:
        raise ValueError(f"n_nonzero: must be <= the number of atoms {K}, got {k}")
    G = D.T @ D
    step = _chunk(chunk_size, K)
    indices = torch.empty(k, n, dtype=torch.long, device=Y.device)
    values = torch.empty(k, n, dtype=Y.dtype, device=Y.device)
    for s in range(0, n, step):
        Yc = Y[:, s : s + step]
        nc = Yc.shape[1]
        cols = torch.arange(nc, device=Y.device)
        C = D.T @ Yc
        X = torch.zeros(K, nc, dtype=Y.dtype, device=Y.device)
        r2 = (Yc * Yc).sum(0)
        thr2 = (rtol * rtol) * r2
        active = r2 > 0
        for _ in range(k):
            active = active & (r2 >= thr2) if rtol > 0 else active
            a = C.abs().argmax(0)
            c = C[a, cols] * active
            X.index_put_((a, cols), c, accumulate=True)
            C -= G[:, a] * c
            r2 = (r2 - c * c).clamp_min(0.0)
        vals, idx = X.abs().topk(k, dim=0)
        indices[:, s : s + step] = idx
        values[:, s : s + step] = X.gather(0, idx) * (vals > 0)
    return indices, values


def ksvd_dictionary_update(
    Y: Tensor,
    D: Tensor,
    indices: Tensor,
    values: Tensor,
    atom_order: Tensor,
    atom_batch_size: int,
    *,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor, int]:
    r"""One batched K-SVD sweep over the atoms in ``atom_order``, ``atom_batch_size`` atoms at a time.

    ``Y`` (m, n), ``D`` (m, K), sparse codes ``indices``/``values`` (k, n) with fixed supports. Within a batch
    every atom :math:`i` is fitted in parallel from the :math:`D, X` of the start of the batch:
    :math:`E = Y_{:,\omega}-DX_{:,\omega}+d_iX_{i,\omega}\approx\sigma_1u_1v_1^\top`,
    :math:`d_i=u_1` (first entry :math:`\ge 0`), :math:`X_{i,\omega}=\sigma_1v_1^\top`; an atom without
    support is redrawn (normalised U(-1/2, 1/2)) from ``generator``. Returns new ``(D, values, n_reinit)``
    (the inputs are not modified). ``atom_batch_size = 1`` is the sequential K-SVD.
    """
    B = check_int("atom_batch_size", atom_batch_size, minimum=1)
    m, n = Y.shape
    K = D.shape[1]
    D = D.clone()
    k = indices.shape[0]
    flat_atom = indices.reshape(-1)
    flat_val = values.reshape(-1).clone()
    used = (flat_val != 0).nonzero().squeeze(1)  # entries e = slot * n + column
    order = torch.argsort(flat_atom[used], stable=True)
    ent = used[order]
    counts = torch.bincount(flat_atom[used], minlength=K)
    ptr = torch.cumsum(counts, 0) - counts
    R = Y - reconstruct(D, indices, values)
    gen = generator if generator is not None else torch.Generator().manual_seed(0)
    n_reinit = 0
    for s in range(0, K, B):
        atoms = atom_order[s : s + B].to(D.device)
        cnt = counts[atoms]
        empty = atoms[cnt == 0]
        if empty.numel():
            D[:, empty] = _random_atoms(m, empty.numel(), gen, D)
            n_reinit += int(empty.numel())
        atoms, cnt = atoms[cnt > 0], cnt[cnt > 0]
        if atoms.numel() == 0:
            continue
        L = int(cnt.max())
        offs = torch.arange(L, device=D.device)
        mask = offs.unsqueeze(0) < cnt.unsqueeze(1)  # (b, L)
        pos = torch.where(mask, ptr[atoms].unsqueeze(1) + offs.unsqueeze(0), 0)
        e = ent[pos]  # (b, L) entry ids
        cols = e % n
        x_old = flat_val[e] * mask
        d_old = D[:, atoms].T  # (b, m)
        E = R[:, cols].permute(1, 0, 2) + d_old.unsqueeze(2) * x_old.unsqueeze(1)  # (b, m, L)
        E = E * mask.unsqueeze(1)
        U, S, Vh = torch.linalg.svd(E, full_matrices=False)
        u, v = U[:, :, 0], Vh[:, 0, :]
        sign = torch.where(u[:, 0] < 0, -1.0, 1.0).to(D.dtype)
        u = u * sign.unsqueeze(1)
        x_new = (S[:, :1] * v * sign.unsqueeze(1)) * mask
        delta = u.unsqueeze(2) * x_new.unsqueeze(1) - d_old.unsqueeze(2) * x_old.unsqueeze(1)
        R.index_add_(1, cols.reshape(-1), -delta.permute(1, 0, 2).reshape(m, -1))
        flat_val[e[mask]] = x_new[mask]
        D[:, atoms] = u.T
    return D, flat_val.reshape(k, n), n_reinit


def _code_all(
    Yt: Tensor, D: Tensor, k: int, rtol: float, chunk: int | None
) -> tuple[Tensor, Tensor, float, float]:
    """Codes of all columns, the mean relative error and the FVU."""
    idx, val = matching_pursuit(Yt, D, k, rtol=rtol, chunk_size=chunk)
    res = Yt - reconstruct(D, idx, val)
    rn = res.norm(dim=0)
    yn = Yt.norm(dim=0)
    rel = torch.where(yn > 0, rn / yn.clamp_min(torch.finfo(Yt.dtype).tiny), 0.0)
    centred = Yt - Yt.mean(1, keepdim=True)
    tot = float((centred * centred).sum())
    fvu = float((rn * rn).sum()) / tot if tot > 0 else 0.0
    return idx, val, float(rel.mean()), fvu


# ---------------------------------------------------------------------------------------------- the solver
def db_ksvd(
    Y: Any,
    n_atoms: int,
    n_nonzero: int | None = None,
    *,
    max_iter: int = 100,
    atom_batch_size: int = 8,
    sample_batch_size: int | None = None,
    rtol: float = 0.05,
    tol: float | None = None,
    coding_chunk_size: int | None = None,
    time_limit_s: float | None = None,
    init: Any = None,
    seed: int = 0,
) -> Result:
    r"""Double-batch K-SVD of ``Y`` (n_samples, n_features); see the module docstring for the rule.

    Args:
        Y: data, numpy or torch (dtype and device follow it).
        n_atoms: dictionary size :math:`K`.
        n_nonzero: atoms per sample :math:`k`; default :math:`\max(3, K \div 100)` (the package's).
        max_iter: iterations (dictionary update, then coding of all samples).
        atom_batch_size: atoms fitted in parallel per batch (1 = sequential K-SVD).
        sample_batch_size: columns of the dictionary update per iteration (``None``: all).
        rtol: matching pursuit stops a sample once its relative residual is below ``rtol``.
        tol: stop when the mean relative error changes by at most ``tol`` (absolute or relative);
            ``None``: :math:`\epsilon^{4/5}` of the dtype.
        coding_chunk_size: samples coded at once (``None``: about 8M correlation entries).
        time_limit_s: solver-time budget.
        init: optional initial dictionary (n_atoms, n_features); rows are normalised.
        seed: seeds the init, the atom order, the sample batches and the re-initialisations.

    Returns:
        A :class:`~optarium._core.Result`: ``x = {"components": (K, m) unit rows, "indices": (N, k),
        "values": (N, k)}`` (value 0 = unused slot), ``value`` = mean relative error, history of ``err``,
        ``fvu``, ``nnz`` (mean nonzeros per sample), ``dead`` (atoms used by no sample), ``reinit``,
        ``change`` and ``time_s``; ``extras["stop_reason"]``.
    """
    Y = _as_data("Y", Y)
    N, m = Y.shape
    K = check_int("n_atoms", n_atoms, minimum=1)
    k = max(3, K // 100) if n_nonzero is None else check_int("n_nonzero", n_nonzero, minimum=1)
    if k > m:
        raise ValueError(f"n_nonzero: must be <= n_features {m}, got {k}")
    if k > K:
        raise ValueError(f"n_nonzero: must be <= n_atoms {K}, got {k}")
    max_iter = check_int("max_iter", max_iter, minimum=0)
    B = check_int("atom_batch_size", atom_batch_size, minimum=1)
    nb = None if sample_batch_size is None else check_int("sample_batch_size", sample_batch_size, minimum=1)
    rtol = check_nonnegative("rtol", rtol)
    tol = (torch.finfo(Y.dtype).eps ** 0.8) if tol is None else check_nonnegative("tol", tol)
    chunk = (
        None if coding_chunk_size is None else check_int("coding_chunk_size", coding_chunk_size, minimum=1)
    )
    seed = check_int("seed", seed, minimum=0)
    if N < K:
        warnings.warn(f"Y: {N} samples for {K} atoms; some atoms cannot be used", stacklevel=2)
    Yt = Y.T.contiguous()
    if init is None:
        D = _init_dictionary(m, K, torch.Generator().manual_seed(derive_seed(seed, "db-ksvd-init")), Y)
    else:
        D0 = _as_data("init", init)
        if D0.shape != (K, m):
            raise ValueError(f"init: must have shape ({K}, {m}), got {tuple(D0.shape)}")
        D = (D0 / D0.norm(dim=1, keepdim=True).clamp_min(1e-300)).T.to(dtype=Y.dtype, device=Y.device)
    g_atoms = torch.Generator().manual_seed(derive_seed(seed, "db-ksvd-atoms"))
    g_samples = torch.Generator().manual_seed(derive_seed(seed, "db-ksvd-samples"))
    g_reinit = torch.Generator().manual_seed(derive_seed(seed, "db-ksvd-reinit"))
    loop = SolverLoop(
        max_iter, tol=tol, criterion="change", objective=None, watch=("err", "fvu"), time_limit_s=time_limit_s
    )
    state: dict[str, Any] = {"reinit": 0, "change": math.inf}
    idx, val, err, fvu = _code_all(Yt, D, k, rtol, chunk)
    state.update(idx=idx, val=val, err=err, fvu=fvu)

    def evaluate(_: int) -> Mapping[str, float]:
        counts = torch.bincount(state["idx"][state["val"] != 0], minlength=K)
        return {
            "err": state["err"],
            "fvu": state["fvu"],
            "nnz": float((state["val"] != 0).sum()) / N,
            "dead": float((counts == 0).sum()),
            "reinit": float(state["reinit"]),
            "change": state["change"],
            "time_s": loop.elapsed,
        }

    for _ in loop.iterate(evaluate):
        order = torch.randperm(K, generator=g_atoms)
        if nb is None:
            S = None
            Ys, ids, vs = Yt, state["idx"], state["val"]
        else:
            S = torch.randperm(N, generator=g_samples)[: min(nb, N)].to(Y.device)
            Ys, ids, vs = Yt[:, S], state["idx"][:, S], state["val"][:, S]
        D, _, n_re = ksvd_dictionary_update(Ys, D, ids, vs, order, B, generator=g_reinit)
        idx, val, err, fvu = _code_all(Yt, D, k, rtol, chunk)
        change = abs(err - state["err"])
        state.update(
            idx=idx, val=val, err=err, fvu=fvu, reinit=n_re, change=min(change, change / max(err, 1e-300))
        )
    stop = {"converged": "error change <= tol", "max_iter": "max_iter", "timeout": "time limit"}
    x = {
        "components": D.T.contiguous(),
        "indices": state["idx"].T.contiguous(),
        "values": state["val"].T.contiguous(),
    }
    res = loop.result(x, value=state["err"], extras={"n_nonzero": k})
    return Result(
        x=res.x,
        value=res.value,
        status=res.status,
        n_iter=res.n_iter,
        history=res.history,
        wall_time_s=res.wall_time_s,
        extras={"n_nonzero": k, "stop_reason": stop.get(res.status, res.status)},
    )


class DBKSVD:
    """scikit-learn style estimator around :func:`db_ksvd` (samples x features in, dense codes out).

    After :meth:`fit`: ``components_`` (n_atoms, n_features) unit rows, ``result_`` the solver's
    :class:`~optarium._core.Result`, ``n_iter_``. :meth:`transform` codes new data by matching pursuit.

    >>> import torch
    >>> from optarium.sparse import DBKSVD, planted_dictionary
    >>> Y, D, _ = planted_dictionary(500, 16, 24, 2, seed=0)
    >>> est = DBKSVD(n_atoms=24, n_nonzero=2, max_iter=3, random_state=0)
    >>> codes = est.fit_transform(Y)
    >>> codes.shape, bool(((codes != 0).sum(1) <= 2).all())
    (torch.Size([500, 24]), True)
    """

    def __init__(
        self,
        n_atoms: int,
        n_nonzero: int | None = None,
        *,
        max_iter: int = 100,
        atom_batch_size: int = 8,
        sample_batch_size: int | None = None,
        rtol: float = 0.05,
        tol: float | None = None,
        coding_chunk_size: int | None = None,
        random_state: int = 0,
    ) -> None:
        self.n_atoms = n_atoms
        self.n_nonzero = n_nonzero
        self.max_iter = max_iter
        self.atom_batch_size = atom_batch_size
        self.sample_batch_size = sample_batch_size
        self.rtol = rtol
        self.tol = tol
        self.coding_chunk_size = coding_chunk_size
        self.random_state = random_state

    def fit(self, Y: Any) -> DBKSVD:
        """Learn the dictionary of ``Y`` (n_samples, n_features)."""
        self.result_ = db_ksvd(
            Y,
            self.n_atoms,
            self.n_nonzero,
            max_iter=self.max_iter,
            atom_batch_size=self.atom_batch_size,
            sample_batch_size=self.sample_batch_size,
            rtol=self.rtol,
            tol=self.tol,
            coding_chunk_size=self.coding_chunk_size,
            seed=self.random_state,
        )
        self.components_ = self.result_.x["components"]
        self.n_iter_ = self.result_.n_iter
        self.n_nonzero_ = int(self.result_.extras["n_nonzero"])
        return self

    def transform_sparse(self, Y: Any) -> tuple[Tensor, Tensor]:
        """Matching-pursuit codes of ``Y`` as ``(indices, values)``, each (n_samples, n_nonzero)."""
        if not hasattr(self, "components_"):
            raise RuntimeError("DBKSVD: call fit before transform")
        Y = _as_data("Y", Y)
        D = self.components_.to(dtype=Y.dtype, device=Y.device)
        if Y.shape[1] != D.shape[1]:
            raise ValueError(f"Y: must have {D.shape[1]} features, got {Y.shape[1]}")
        idx, val = matching_pursuit(
            Y.T, D.T, self.n_nonzero_, rtol=self.rtol, chunk_size=self.coding_chunk_size
        )
        return idx.T.contiguous(), val.T.contiguous()

    def transform(self, Y: Any) -> Tensor:
        """Dense codes (n_samples, n_atoms) of ``Y``."""
        idx, val = self.transform_sparse(Y)
        out = torch.zeros(idx.shape[0], self.components_.shape[0], dtype=val.dtype, device=val.device)
        return out.scatter_add_(1, idx, val)

    def fit_transform(self, Y: Any) -> Tensor:
        """:meth:`fit` then the codes of the fit (dense, n_samples x n_atoms)."""
        self.fit(Y)
        idx, val = self.result_.x["indices"], self.result_.x["values"]
        out = torch.zeros(idx.shape[0], self.components_.shape[0], dtype=val.dtype, device=val.device)
        return out.scatter_add_(1, idx, val)


# ------------------------------------------------------------------------------------------------ metrics
def planted_dictionary(
    n_samples: int,
    n_features: int,
    n_atoms: int,
    n_nonzero: int,
    *,
    noise: float = 0.05,
    nonnegative: bool = True,
    low: float = 0.5,
    high: float = 1.5,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
) -> tuple[Tensor, Tensor, Tensor]:
    """A planted dictionary problem: ``(Y, D, X)`` with ``Y = X D + noise``.

    ``D`` (n_atoms, n_features): Gaussian rows, normalised; ``X`` (n_samples, n_atoms): ``n_nonzero`` random
    atoms per sample with magnitudes U[low, high] (random signs unless ``nonnegative``); Gaussian noise of
    std ``noise`` per entry.
    """
    N = check_int("n_samples", n_samples, minimum=1)
    m = check_int("n_features", n_features, minimum=1)
    K = check_int("n_atoms", n_atoms, minimum=1)
    k = check_int("n_nonzero", n_nonzero, minimum=1, maximum=K)
    noise = check_nonnegative("noise", noise)
    g = torch.Generator().manual_seed(derive_seed(seed, "planted-dictionary"))
    D = torch.randn(K, m, generator=g, dtype=torch.float64)
    D = D / D.norm(dim=1, keepdim=True)
    supp = torch.rand(N, K, generator=g, dtype=torch.float64).argsort(1)[:, :k]
    mag = low + (high - low) * torch.rand(N, k, generator=g, dtype=torch.float64)
    if not nonnegative:
        mag = mag * torch.where(torch.rand(N, k, generator=g) < 0.5, -1.0, 1.0).double()
    X = torch.zeros(N, K, dtype=torch.float64).scatter_(1, supp, mag)
    Y = X @ D + noise * torch.randn(N, m, generator=g, dtype=torch.float64)
    return Y.to(dtype), D.to(dtype), X.to(dtype)


def atom_recovery(learned: Tensor, true: Tensor, thresholds: Any = (0.99,)) -> dict[float, float]:
    """Fraction of the true atoms (rows of ``true``) whose largest ``|cos|`` to a learned row exceeds each
    threshold."""
    Lr = learned / learned.norm(dim=1, keepdim=True).clamp_min(1e-300)
    Tr = true / true.norm(dim=1, keepdim=True).clamp_min(1e-300)
    best = (Tr.to(Lr.dtype) @ Lr.T).abs().max(1).values
    return {float(t): float((best > t).double().mean()) for t in thresholds}


def mean_max_coherence(components: Tensor) -> float:
    r"""Mean over atoms of :math:`\max_{j\ne i}|\langle d_i, d_j\rangle|` (rows normalised)."""
    Dn = components / components.norm(dim=1, keepdim=True).clamp_min(1e-300)
    G = (Dn @ Dn.T).abs()
    G.fill_diagonal_(0.0)
    return float(G.max(1).values.mean()) if G.shape[0] > 1 else 0.0


def dead_atoms(indices: Tensor, values: Tensor, n_atoms: int) -> int:
    """Atoms used by no sample in the codes ``indices``/``values`` (any shape, value 0 = unused)."""
    counts = torch.bincount(indices[values != 0].reshape(-1), minlength=n_atoms)
    return int((counts == 0).sum())


# ------------------------------------------------------------------------------------------ TopK SAE
class TopKSAE(nn.Module):
    r"""TopK sparse autoencoder (Gao et al. 2024): :math:`z=\mathrm{TopK}_k(\mathrm{ReLU}(W_e(x-b_p)+b_e))`,
    :math:`\hat x = zW_d + b_p` with unit-norm decoder rows (:meth:`normalize_decoder`).

    Init: decoder rows random unit vectors, encoder its transpose, biases zero.
    """

    def __init__(
        self,
        n_features: int,
        n_atoms: int,
        k: int,
        *,
        generator: torch.Generator | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        m = check_int("n_features", n_features, minimum=1)
        K = check_int("n_atoms", n_atoms, minimum=1)
        self.k = check_int("k", k, minimum=1, maximum=K)
        W = torch.randn(K, m, generator=generator, dtype=torch.float64)
        W = (W / W.norm(dim=1, keepdim=True)).to(dtype)
        self.W_dec = nn.Parameter(W.clone())
        self.W_enc = nn.Parameter(W.T.clone().contiguous())
        self.b_enc = nn.Parameter(torch.zeros(K, dtype=dtype))
        self.b_pre = nn.Parameter(torch.zeros(m, dtype=dtype))

    def encode(self, x: Tensor) -> Tensor:
        """Dense codes (n, K) with at most ``k`` nonzeros per row."""
        pre = torch.relu((x - self.b_pre) @ self.W_enc + self.b_enc)
        vals, idx = pre.topk(self.k, dim=-1)
        return torch.zeros_like(pre).scatter(-1, idx, vals)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """``(reconstruction, codes)``."""
        z = self.encode(x)
        return z @ self.W_dec + self.b_pre, z

    @torch.no_grad()
    def normalize_decoder(self) -> None:
        """Rescale the decoder rows to unit norm."""
        self.W_dec.div_(self.W_dec.norm(dim=1, keepdim=True).clamp_min(1e-12))


def train_topk_sae(
    Y: Any,
    n_atoms: int,
    k: int,
    *,
    lr: float = 1e-3,
    max_steps: int = 20_000,
    batch_size: int = 256,
    Y_val: Any = None,
    eval_every: int = 250,
    patience: int = 8,
    time_limit_s: float | None = None,
    seed: int = 0,
) -> Result:
    """Train a :class:`TopKSAE` with Adam on MSE; early stopping on the held-out ``Y_val`` error.

    Stops after ``max_steps`` or when the held-out mean relative error has not improved for ``patience``
    evaluations (then the best evaluated parameters are returned, status ``converged``). History: ``err``
    (held-out mean relative error, or training error without ``Y_val``), ``fvu`` and ``time_s`` every
    ``eval_every`` steps. ``x`` = ``{"model": TopKSAE, "components": decoder rows}``.
    """
    Y = _as_data("Y", Y)
    Yv = Y if Y_val is None else _as_data("Y_val", Y_val)
    K = check_int("n_atoms", n_atoms, minimum=1)
    k = check_int("k", k, minimum=1, maximum=K)
    lr = check_positive("lr", lr)
    max_steps = check_int("max_steps", max_steps, minimum=0)
    bs = check_int("batch_size", batch_size, minimum=1)
    ev = check_int("eval_every", eval_every, minimum=1)
    patience = check_int("patience", patience, minimum=1)
    g = torch.Generator().manual_seed(derive_seed(seed, "topk-sae"))
    model = TopKSAE(Y.shape[1], K, k, generator=g, dtype=Y.dtype).to(Y.device)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    n_evals = math.ceil(max_steps / ev) if max_steps else 0
    loop = SolverLoop(n_evals, objective=None, watch=("err",), time_limit_s=time_limit_s)
    yv_norm = Yv.norm(dim=1).clamp_min(1e-300)
    centred = Yv - Yv.mean(0)
    tot = float((centred * centred).sum())
    best: dict[str, Any] = {"err": math.inf, "state": None, "since": 0}
    cur: dict[str, float] = {}

    def metrics() -> dict[str, float]:
        with torch.no_grad():
            rec, _ = model(Yv)
            r = Yv - rec
            return {"err": float((r.norm(dim=1) / yv_norm).mean()), "fvu": float((r * r).sum()) / tot}

    def evaluate(_: int) -> Mapping[str, float]:
        return {**cur, "time_s": loop.elapsed}

    with loop.evaluating():
        cur.update(metrics())
    step = 0
    for _ in loop.iterate(evaluate):
        for _ in range(min(ev, max_steps - step)):
            b = torch.randint(0, Y.shape[0], (bs,), generator=g).to(Y.device)
            xb = Y[b]
            rec, _ = model(xb)
            loss = ((rec - xb) ** 2).sum(1).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            model.normalize_decoder()
            step += 1
        with loop.evaluating():
            cur.update(metrics())
            if best["state"] is None or cur["err"] < best["err"] - 1e-6 * abs(best["err"]):
                state = {n: p.detach().clone() for n, p in model.state_dict().items()}
                best.update(err=cur["err"], state=state, since=0)
            else:
                best["since"] += 1
                if best["since"] >= patience:
                    loop.stop("converged")
    if best["state"] is not None:
        model.load_state_dict(best["state"])
    with loop.evaluating():
        final = metrics()
    return loop.result(
        {"model": model, "components": model.W_dec.detach().clone()},
        value=final["err"],
        extras={"steps": step, "fvu": final["fvu"]},
    )


# ---------------------------------------------------------------------------------------- solver cases
def _case_problem(dtype: torch.dtype, device: Any) -> tuple[Tensor, Tensor]:
    # 12 orthonormal atoms in R^16, 2 per sample: matching pursuit codes them exactly
    g = torch.Generator().manual_seed(0)
    Q, _ = torch.linalg.qr(torch.randn(16, 12, generator=g, dtype=torch.float64))
    _, _, X = planted_dictionary(400, 16, 12, 2, noise=0.0, seed=0)
    D = Q.T.contiguous()
    return (X @ D).to(dtype=dtype, device=device), D.to(dtype=dtype, device=device)


def _case_solve(*, dtype: torch.dtype, device: Any, seed: int, **overrides: Any) -> Result:
    Y, Dt = _case_problem(dtype, device)
    kwargs: dict[str, Any] = {"n_atoms": 12, "n_nonzero": 2, "max_iter": 30, "tol": 1e-4, "seed": seed}
    kwargs["init"] = Dt.flip(0)  # the true atoms, in another order (random init: pass init=None)
    kwargs.update(overrides)
    return db_ksvd(Y, **kwargs)


def _case_tolerance(res: Result) -> bool:
    # recompute the mean relative error of the returned codes independently of the history
    Y, _ = _case_problem(res.x["components"].dtype, res.x["components"].device)
    D = res.x["components"]
    rec = reconstruct(D.T, res.x["indices"].T, res.x["values"].T).T
    err = float(((Y - rec).norm(dim=1) / Y.norm(dim=1)).mean())
    return abs(err - res.value) <= 1e-5 * max(1.0, err) and res.history.last("change") <= 1e-4


def _case_optimality(res: Result) -> float:
    # the noiseless planted dictionary is a fixed point: started there, every true atom is kept
    _, Dt = _case_problem(res.x["components"].dtype, res.x["components"].device)
    return 1.0 - atom_recovery(res.x["components"], Dt, (0.999,))[0.999]


def solver_cases() -> list[SolverCase]:
    """The case of :func:`db_ksvd` for :mod:`optarium.testing.solvers`: noiseless, 12 orthonormal atoms in
    R^16, k = 2, started at the true atoms (a fixed point of K-SVD)."""
    return [
        SolverCase(
            name="db-ksvd",
            solve=_case_solve,
            statuses={
                "converged": {},
                "max_iter": {"max_iter": 2, "tol": 0.0, "init": None},
                "timeout": {"time_limit_s": 0.0, "tol": 0.0, "init": None},
            },
            max_iter=2,
            tolerance_holds=_case_tolerance,
            optimality=_case_optimality,
            optimality_tol=1e-12,
            invalid=[
                ({"n_atoms": 0}, "n_atoms"),
                ({"n_nonzero": 0}, "n_nonzero"),
                ({"n_nonzero": 13}, "n_nonzero"),
                ({"max_iter": -1}, "max_iter"),
                ({"tol": -1.0}, "tol"),
                ({"atom_batch_size": 0}, "atom_batch_size"),
            ],
            timing_metrics=("time_s",),
            exempt={
                "diverged": "K-SVD's alternating steps are projections and SVD fits of finite data; "
                "non-finite Y is refused (ValueError naming Y), tested in tests/sparse/test_db_ksvd.py",
            },
        )
    ]
