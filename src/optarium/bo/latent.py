r"""PepCompass: geometry-aware exploration of a decoder's latent space (pull-back metric, Riemannian Brownian
sampling, tangent-space mutation enumeration, PoGS, LE-BO).

Paper: Możejko, Bielecki, Prądzyński, ..., Szczurek, "PepCompass: Navigating Peptide Embedding Spaces Using
Riemannian Geometry", arXiv:2510.01988 (ICML 2026). **Only the abstract and the introduction were found; no
equations, hyperparameters or code.** Every formula below is *our reconstruction* (standard pull-back-metric
geometry matched to each named component, following ``shared/papers/pepcompass.md``) and is labelled
"[reconstructed]"; what the abstract states is labelled "[found]".

* :class:`PullbackGeometry` — [found: "union of kappa-stable Riemannian manifolds"] [reconstructed]
  :math:`G(z) = J(z)^\top J(z)`, :math:`J = \partial\phi/\partial z` of the decoder output :math:`\phi`
  (``output="logits" | "logprobs" | "probs"``); :math:`G = U\Lambda U^\top`, kept directions
  :math:`\lambda_i \ge \kappa\lambda_1` (local dimension :math:`r(z)`),
  :math:`G_\kappa = U_r\Lambda_rU_r^\top`, :math:`G_\kappa^+ = U_r\Lambda_r^{-1}U_r^\top`
  (condition number :math:`\le 1/\kappa`).
* :func:`riemannian_brownian_step` — [found: "convergent second-order approximation to Riemannian Brownian
  motion"] [reconstructed] :math:`v = U_r\Lambda_r^{-1/2}\xi\sqrt h`, :math:`a = -G_\kappa^+J^\top
  \phi''(z)[v,v]`, :math:`z' = z + v + a/2` (first-order: :math:`z' = z + v`, which drops the Itô drift and
  converges to the generator :math:`\tfrac12 G^{ij}\partial_i\partial_j`, not to :math:`\tfrac12\Delta_G`).
  Default step :math:`h = \delta_{out}^2 / r` so that :math:`E\|J v\|^2 = \delta_{out}^2`.
* :func:`tangent_mutations` — [found: "reinterprets tangent directions as discrete amino-acid substitutions"]
  [reconstructed] :math:`v_{p,a} = G_\kappa^+J^\top\Delta_{p,a}`, residual
  :math:`\rho = \|Jv - \Delta\|/\|\Delta\|`, length :math:`\ell = \sqrt{v^\top G_\kappa v}`.
* :func:`pogs_path` — [found: "interpolates between prototype embeddings along property-enriched geodesics"]
  [reconstructed] :math:`E(\gamma) = K\sum_k\|\phi(\gamma_{k+1})-\phi(\gamma_k)\|^2 +
  \lambda\,\tfrac{1}{K-1}\sum_{k=1}^{K-1}U(\gamma_k)`, Adam on the interior points from the straight line,
  :math:`\lambda = E_0/U_0`.
* :class:`LEBO` — [found: local enumeration BO around seeds; the loop's details are our design] candidate
  pool = decoded Brownian samples around the current top-3 latents plus tangent mutations of the top-3
  sequences, filtered to edit distance <= ``max_edit`` from the seed and to unseen sequences; a BoTorch
  ``SingleTaskGP`` on one-hot features (hyperparameters fitted once, then fixed, as
  :func:`optarium.bo.pom.fit_gp_hyperparameters`); analytic LogEI over the finite pool; a batch of ``q`` by
  the Kriging believer. ``geometry="euclidean"`` is the ablation: Euclidean latent Gaussian steps scaled to
  the same expected output change and all single mutants ranked by predicted gain alone.
* :class:`LatentBO` — a reference, not the paper's: plain Euclidean-latent BO (the same GP, LogEI, batch,
  filter and budget on the latent codes, pool of decoded Euclidean Gaussian latent samples).

Sequences are not a box, so :class:`LEBO` does not subclass
:class:`~optarium._core.asktell.AskTellStrategy`; it keeps its contract (explicit direction, one
``torch.Generator``, ``state_dict``, ``ValueError`` on NaN or unknown letters in :meth:`LEBO.tell`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import torch
from torch.func import jacfwd, jvp, vmap

from optarium._core.result import Result
from optarium._core.validation import check_choice, check_int, check_positive, check_type

__all__ = [
    "AMINO_ACIDS",
    "LEBO",
    "LatentBO",
    "Mutation",
    "PullbackGeometry",
    "decode_sequences",
    "edit_distance",
    "euclidean_gaussian_step",
    "expected_improvement",
    "geodesic_step",
    "pogs_path",
    "riemannian_brownian_step",
    "sequence_one_hot",
    "tangent_mutations",
]

AMINO_ACIDS = "ACDEFGHIKLMNPQRSTVWY"
OUTPUTS = ("logits", "logprobs", "probs")


# ------------------------------------------------------------------------------------------ sequences
def _check_sequence(name: str, seq: Any, alphabet: str, length: int | None = None) -> str:
    if not isinstance(seq, str) or not seq:
        raise ValueError(f"{name}: must be a non-empty string, got {seq!r}")
    bad = sorted(set(seq) - set(alphabet))
    if bad:
        raise ValueError(f"{name}: {seq!r} has letters outside the alphabet: {''.join(bad)}")
    if length is not None and len(seq) > length:
        raise ValueError(f"{name}: {seq!r} is longer than {length}")
    return seq


def sequence_one_hot(
    seqs: Sequence[str], length: int, alphabet: str = AMINO_ACIDS, dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    """``(n, length, len(alphabet) + 1)`` one-hot of left-aligned sequences; the last symbol is the pad.
    ``ValueError`` (naming ``seqs``) for an empty or too long sequence or a letter outside ``alphabet``."""
    idx = torch.full((len(seqs), length), len(alphabet), dtype=torch.long)
    lookup = {c: i for i, c in enumerate(alphabet)}
    for i, s in enumerate(seqs):
        _check_sequence("seqs", s, alphabet, length)
        idx[i, : len(s)] = torch.tensor([lookup[c] for c in s], dtype=torch.long)
    return torch.nn.functional.one_hot(idx, len(alphabet) + 1).to(dtype)


def decode_sequences(logits: torch.Tensor, alphabet: str = AMINO_ACIDS) -> list[str | None]:
    """Greedy (argmax per position) decoding of ``(n, L, len(alphabet) + 1)`` outputs; the last symbol is the
    pad. A decoding is valid when the pad only occurs as a suffix and at least one residue precedes it;
    invalid decodings are ``None``. Valid ones contain only ``alphabet`` letters and have length <= L."""
    idx = logits.argmax(-1)
    pad = len(alphabet)
    out: list[str | None] = []
    for row in idx.tolist():
        n = row.index(pad) if pad in row else len(row)
        if n == 0 or any(c != pad for c in row[n:]):
            out.append(None)
        else:
            out.append("".join(alphabet[c] for c in row[:n]))
    return out


def edit_distance(a: str, b: str, limit: int | None = None) -> int:
    """Levenshtein distance; with ``limit``, any value above it is returned as ``limit + 1`` (early exit)."""
    if limit is not None and abs(len(a) - len(b)) > limit:
        return limit + 1
    if len(a) == len(b):
        ham = sum(x != y for x, y in zip(a, b, strict=True))
        if ham <= 1:  # Levenshtein = Hamming when Hamming <= 1 (and <= limit + 1 for any limit >= 0)
            return ham
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
        if limit is not None and min(cur) > limit:
            return limit + 1
        prev = cur
    d = prev[-1]
    return d if limit is None else min(d, limit + 1)


# ------------------------------------------------------------------------------------------ geometry
class PullbackGeometry:
    r"""The kappa-stable pull-back metric of a decoder [reconstructed].

    :math:`G(z) = J^\top J` with :math:`J = \partial\phi/\partial z` (``torch.func.jacfwd``), :math:`\phi` the
    flattened decoder output: ``"logits"`` (raw), ``"logprobs"`` (log-softmax over the last axis) or
    ``"probs"`` (softmax; :math:`J = S W` with the block-diagonal softmax Jacobians :math:`S`, so directions
    toward low-probability symbols are scaled by their probability and few survive the kappa cut at
    confident positions). Kept directions: :math:`\lambda_i \ge \kappa\lambda_1`.

    Args:
        decoder: ``(B, d) -> (B, ...)`` (for the softmax outputs the last axis holds the symbols).
        kappa: the relative eigenvalue cut, in (0, 1] (default 1e-3, suggested by the spec).
        output: ``"logits"`` | ``"logprobs"`` | ``"probs"``.
    """

    def __init__(
        self, decoder: Callable[[torch.Tensor], torch.Tensor], kappa: float = 1e-3, output: str = "logits"
    ):
        if not callable(decoder):
            raise TypeError("decoder: must be callable")
        kappa = float(kappa)
        if not (0.0 < kappa <= 1.0):
            raise ValueError(f"kappa: must lie in (0, 1], got {kappa}")
        self.decoder = decoder
        self.kappa = kappa
        self.output = check_choice("output", output, OUTPUTS)

    def outputs(self, z: torch.Tensor) -> torch.Tensor:
        """:math:`\\phi(z)`, ``(B, D)`` flattened, for ``(B, d)`` latents."""
        out = self.decoder(z)
        if self.output == "logprobs":
            out = torch.log_softmax(out, -1)
        elif self.output == "probs":
            out = torch.softmax(out, -1)
        return out.reshape(z.shape[0], -1)

    def _single(self, z: torch.Tensor) -> torch.Tensor:
        return self.outputs(z.unsqueeze(0)).squeeze(0)

    def jacobian(self, z: torch.Tensor) -> torch.Tensor:
        """``(B, D, d)`` Jacobians at ``(B, d)`` latents (forward mode, vmapped)."""
        return vmap(jacfwd(self._single))(z)

    def second_derivative(self, z: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """:math:`\\phi''(z)[v, v] = d^2/d\\epsilon^2\\,\\phi(z + \\epsilon v)|_0` (jvp of jvp),
        ``(B, D)``."""

        def one(zz: torch.Tensor, vv: torch.Tensor) -> torch.Tensor:
            def first(x: torch.Tensor) -> torch.Tensor:
                return jvp(self._single, (x,), (vv,))[1]

            return jvp(first, (zz,), (vv,))[1]

        return vmap(one)(z, v)

    def frame(self, z: torch.Tensor) -> dict[str, torch.Tensor]:
        """Everything at ``(B, d)`` latents: ``J`` (B, D, d), ``eigvals`` (B, d, descending, clamped >= 0),
        ``eigvecs`` (B, d, d, columns), ``mask`` (B, d, kept), ``G`` (full), ``G_kappa``, ``G_pinv``."""
        J = self.jacobian(z)
        G = J.transpose(-1, -2) @ J
        G = 0.5 * (G + G.transpose(-1, -2))
        lam, U = torch.linalg.eigh(G)
        lam, U = lam.flip(-1).clamp_min(0.0), U.flip(-1)
        top = lam[..., :1]
        mask = (lam >= self.kappa * top) & (top > 0)
        inv = torch.where(mask, 1.0 / torch.where(mask, lam, torch.ones_like(lam)), torch.zeros_like(lam))
        kept = torch.where(mask, lam, torch.zeros_like(lam))
        G_kappa = (U * kept.unsqueeze(-2)) @ U.transpose(-1, -2)
        G_pinv = (U * inv.unsqueeze(-2)) @ U.transpose(-1, -2)
        return {
            "J": J,
            "G": G,
            "eigvals": lam,
            "eigvecs": U,
            "mask": mask,
            "G_kappa": G_kappa,
            "G_pinv": G_pinv,
        }

    def metric(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(G_kappa, basis, r)``: the stable metric :math:`U_r\\Lambda_rU_r^\\top`, the eigenvectors
        (columns, descending eigenvalue) with the dropped ones zeroed, and the local dimension r(z). ``z`` of
        shape ``(d,)`` or ``(B, d)``; the outputs follow (no batch axis for ``(d,)``)."""
        zb = _batch("z", z)
        f = self.frame(zb)
        basis = f["eigvecs"] * f["mask"].unsqueeze(-2).to(zb.dtype)
        r = f["mask"].sum(-1)
        if z.ndim == 1:
            return f["G_kappa"][0], basis[0], r[0]
        return f["G_kappa"], basis, r


def _batch(name: str, z: Any) -> torch.Tensor:
    check_type(name, z, torch.Tensor)
    if z.ndim not in (1, 2) or not z.is_floating_point():
        raise ValueError(f"{name}: must be a floating (d,) or (B, d) tensor, got {z.dtype} {tuple(z.shape)}")
    if not bool(torch.isfinite(z).all()):
        raise ValueError(f"{name}: contains NaN or inf")
    return z.unsqueeze(0) if z.ndim == 1 else z


def _normal(shape: tuple[int, ...], like: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    return torch.randn(shape, generator=generator, dtype=like.dtype, device="cpu").to(like.device)


def geodesic_step(
    geo: PullbackGeometry,
    z: torch.Tensor,
    v: torch.Tensor,
    second_order: bool = True,
    frame: dict[str, torch.Tensor] | None = None,
) -> torch.Tensor:
    r"""Second-order exponential-map approximation [reconstructed]: :math:`z + v + a/2` with the geodesic
    acceleration :math:`a = -G_\kappa^+J^\top\phi''(z)[v, v]` of the pull-back metric (the second-order
    Taylor expansion of the geodesic with initial velocity ``v``); ``second_order=False``: :math:`z + v`.
    ``z``, ``v``: ``(B, d)``; ``frame``: a precomputed :meth:`PullbackGeometry.frame` at ``z``."""
    if not second_order:
        return z + v
    fr = geo.frame(z) if frame is None else frame
    dd = geo.second_derivative(z, v)
    a = -(fr["G_pinv"] @ (fr["J"].transpose(-1, -2) @ dd.unsqueeze(-1))).squeeze(-1)
    return z + v + 0.5 * a


def riemannian_brownian_step(
    geo: PullbackGeometry,
    z: torch.Tensor,
    step: float | None = None,
    n: int = 1,
    second_order: bool = True,
    generator: torch.Generator | None = None,
    n_sub: int = 1,
    target_output_change: float = 1.0,
) -> torch.Tensor:
    r"""Riemannian Brownian samples around ``z`` [reconstructed].

    Per sub-step of size :math:`h`: :math:`v = U_r\Lambda_r^{-1/2}\xi\sqrt h`, :math:`\xi\sim N(0, I_r)`
    (tangent Gaussian with covariance :math:`hG_\kappa^+`); :math:`a = -G_\kappa^+J^\top\phi''(z)[v, v]`
    (geodesic acceleration, jvp of jvp); :math:`z' = z + v + a/2` (``second_order=False``: :math:`z + v`).

    Args:
        geo: the geometry.
        z: ``(d,)`` start (returns ``(n, d)``) or ``(B, d)`` starts (returns ``(B, n, d)``).
        step: :math:`h` per sub-step; ``None``: :math:`h = \delta_{out}^2 / (r\,n_{sub})`, so that the
            expected squared output change of the whole move is about ``target_output_change``:math:`^2`.
        n: samples per start.
        second_order: include the geodesic acceleration.
        generator: randomness.
        n_sub: sub-steps (geometry recomputed at each).
        target_output_change: :math:`\delta_{out}` for the default step.
    """
    zb = _batch("z", z)
    n = check_int("n", n, minimum=1)
    n_sub = check_int("n_sub", n_sub, minimum=1)
    check_type("second_order", second_order, bool)
    if step is not None:
        step = check_positive("step", step)
    delta = check_positive("target_output_change", target_output_change)
    B, d = zb.shape
    cur = zb.repeat_interleave(n, 0)
    f = geo.frame(zb)
    r0 = f["mask"].sum(-1).clamp_min(1).to(zb.dtype).repeat_interleave(n, 0)
    h = (delta**2 / (r0 * n_sub)) if step is None else torch.full_like(r0, step)
    for s in range(n_sub):
        if s == 0:
            fr = {k: v.repeat_interleave(n, 0) for k, v in f.items()}
        else:
            fr = geo.frame(cur)
        lam, U, mask = fr["eigvals"], fr["eigvecs"], fr["mask"]
        scale = torch.where(mask, torch.where(mask, lam, torch.ones_like(lam)).rsqrt(), torch.zeros_like(lam))
        xi = _normal((cur.shape[0], d), cur, generator)
        v = ((U * scale.unsqueeze(-2)) @ xi.unsqueeze(-1)).squeeze(-1) * h.sqrt().unsqueeze(-1)
        cur = geodesic_step(geo, cur, v, second_order=second_order, frame=fr)
    out = cur.reshape(B, n, d)
    return out[0] if z.ndim == 1 else out


def euclidean_gaussian_step(
    geo: PullbackGeometry,
    z: torch.Tensor,
    n: int = 1,
    generator: torch.Generator | None = None,
    target_output_change: float = 1.0,
) -> torch.Tensor:
    r"""The Euclidean ablation: :math:`z' = z + \sigma\xi`, :math:`\xi\sim N(0, I_d)`, with
    :math:`\sigma^2 = \delta_{out}^2/\mathrm{tr}\,G(z)` so that :math:`E\|J(z'-z)\|^2 = \delta_{out}^2`, the
    same expected output change as :func:`riemannian_brownian_step`'s default step. Shapes as there."""
    zb = _batch("z", z)
    n = check_int("n", n, minimum=1)
    delta = check_positive("target_output_change", target_output_change)
    J = geo.jacobian(zb)
    tr = J.pow(2).sum((-1, -2)).clamp_min(torch.finfo(zb.dtype).tiny)
    sigma = delta / tr.sqrt()
    xi = _normal((zb.shape[0], n, zb.shape[1]), zb, generator)
    out = zb.unsqueeze(1) + sigma.view(-1, 1, 1) * xi
    return out[0] if z.ndim == 1 else out


# ------------------------------------------------------------------------------------------ mutations
class Mutation(NamedTuple):
    """One single substitution: ``position`` (0-based), ``residue``, tangent ``residual``
    :math:`\\|Jv-\\Delta\\|/\\|\\Delta\\|`, predicted ``gain`` :math:`P(z+v)-P(z)` (NaN without a property
    function), Riemannian ``length`` :math:`\\sqrt{v^\\top G_\\kappa v}`."""

    position: int
    residue: str
    residual: float
    gain: float
    length: float


def tangent_mutations(
    geo: PullbackGeometry,
    z: torch.Tensor,
    sequence: str,
    top_m: int | None = 50,
    property_fn: Callable[[torch.Tensor], torch.Tensor] | None = None,
    alphabet: str = AMINO_ACIDS,
    reachable_fraction: float = 0.5,
    allowed: Callable[[int, str], bool] | None = None,
) -> list[Mutation]:
    r"""Enumerate every single substitution of ``sequence`` in the tangent space at ``z`` [reconstructed].

    :math:`\Delta_{p,a} = s_{p,a}(e_{p,a} - e_{p,x_p})` in output space, scaled by the current confidence:
    logits / log-probabilities :math:`s = (\phi_{p,x_p} - \phi_{p,a} + 1)/2` (after the move ``a`` leads by
    1), probabilities :math:`s = \pi_{p,x_p}` (all the mass moves). Pull-back :math:`v = G_\kappa^+J^\top
    \Delta` (least squares on the kept directions), residual :math:`\rho = \|Jv-\Delta\|/\|\Delta\|` (scale
    free), length :math:`\ell = \sqrt{v^\top G_\kappa v}`, gain :math:`P(z+v) - P(z)`.

    Selection (our design): ``top_m=None`` returns all mutations sorted by residual. Otherwise the
    ``reachable_fraction`` with the lowest residual are kept and the ``top_m`` of them with the largest gain
    are returned (by residual when ``property_fn`` is None). ``allowed(position, residue)`` drops
    mutations before the selection (LE-BO's edit-distance and novelty filter).

    Args:
        geo: the geometry (decoder output ``(1, L, len(alphabet)+1)`` at ``z``).
        z: ``(d,)`` latent of ``sequence``.
        sequence: the sequence whose substitutions are enumerated (its length <= L).
        top_m: how many to return, or ``None``.
        property_fn: ``(M, d) -> (M,)`` differentiable property predictor on latents.
        alphabet: residues; the decoder's last symbol is the pad.
        reachable_fraction: in (0, 1].
        allowed: an optional filter on ``(position, residue)``.
    """
    check_type("z", z, torch.Tensor)
    if z.ndim != 1:
        raise ValueError(f"z: must be a (d,) tensor, got {tuple(z.shape)}")
    zb = _batch("z", z)
    if top_m is not None:
        top_m = check_int("top_m", top_m, minimum=1)
    if not (0.0 < float(reachable_fraction) <= 1.0):
        raise ValueError(f"reachable_fraction: must lie in (0, 1], got {reachable_fraction}")
    f = geo.frame(zb)
    out = geo.outputs(zb)[0]
    S = len(alphabet) + 1
    if out.numel() % S:
        raise ValueError(f"alphabet: the decoder output size {out.numel()} is not a multiple of {S}")
    L = out.numel() // S
    _check_sequence("sequence", sequence, alphabet, L)
    phi = out.view(L, S)
    J = f["J"][0].view(L, S, -1)
    # every (position, residue != current) pair, position-major, residues in alphabet order
    cur_idx = torch.tensor([alphabet.index(c) for c in sequence], dtype=torch.long, device=z.device)
    grid_p, grid_a = torch.meshgrid(
        torch.arange(len(sequence), device=z.device),
        torch.arange(len(alphabet), device=z.device),
        indexing="ij",
    )
    change = grid_a != cur_idx.unsqueeze(-1)
    P, A = grid_p[change], grid_a[change]
    X = cur_idx[P]
    pos = P.tolist()
    if geo.output == "probs":
        s = phi[P, X]
    else:
        s = 0.5 * (phi[P, X] - phi[P, A] + 1.0)
    s = s.clamp_min(1e-12)
    JtD = s.unsqueeze(-1) * (J[P, A] - J[P, X])  # (M, d)
    V = JtD @ f["G_pinv"][0]  # (M, d), G_pinv symmetric
    JV = torch.einsum("lsd,md->mls", J, V)
    M = P.numel()
    delta = torch.zeros(M, L, S, dtype=z.dtype, device=z.device)
    ar = torch.arange(M, device=z.device)
    delta[ar, P, A] = s
    delta[ar, P, X] = -s
    resid = (JV - delta).flatten(1).norm(dim=-1) / delta.flatten(1).norm(dim=-1)
    length = torch.einsum("md,de,me->m", V, f["G_kappa"][0], V).clamp_min(0.0).sqrt()
    if property_fn is not None:
        with torch.no_grad():
            p0 = property_fn(zb).reshape(-1)[0]
            gain = property_fn(zb + V).reshape(-1) - p0
    else:
        gain = torch.full((M,), math.nan, dtype=z.dtype, device=z.device)
    order = torch.argsort(resid, stable=True)
    if allowed is not None:
        res = A.tolist()
        ok = [i for i in order.tolist() if allowed(pos[i], alphabet[res[i]])]
        order = torch.tensor(ok, dtype=torch.long, device=z.device)
        M = len(ok)
        if M == 0:
            return []
    if top_m is not None:
        keep = order[: max(1, math.ceil(reachable_fraction * M))]
        if property_fn is not None:
            keep = keep[torch.argsort(gain[keep], descending=True, stable=True)]
        order = keep[:top_m]
    return [
        Mutation(int(P[i]), alphabet[int(A[i])], float(resid[i]), float(gain[i]), float(length[i]))
        for i in order.tolist()
    ]


# ------------------------------------------------------------------------------------------ PoGS
def pogs_path(
    geo: PullbackGeometry,
    z_a: torch.Tensor,
    z_b: torch.Tensor,
    potential: Callable[[torch.Tensor], torch.Tensor],
    n_points: int = 16,
    lam: float | None = None,
    steps: int = 500,
    lr: float = 1e-2,
    geometry: str = "riemannian",
) -> Result:
    r"""Potential-minimizing Geodesic Search [reconstructed].

    Minimises :math:`E(\gamma) = K\sum_{k=0}^{K-1}\|\phi(\gamma_{k+1}) - \phi(\gamma_k)\|^2 +
    \lambda\frac{1}{K-1}\sum_{k=1}^{K-1}U(\gamma_k)` over the interior points (``geometry="euclidean"``:
    :math:`K\sum\|\gamma_{k+1}-\gamma_k\|^2`, the ablation) with Adam from the straight line; endpoints fixed.
    ``lam=None``: :math:`\lambda = E_0/U_0` at the straight line.

    Args:
        geo: the geometry.
        z_a, z_b: ``(d,)`` endpoints.
        potential: ``(B, d) -> (B,)``, differentiable and >= 0 (e.g. :math:`-\log P(\text{active})`).
        n_points: K >= 2 (K + 1 waypoints).
        lam: the potential's weight (>= 0) or ``None``.
        steps: Adam steps.
        lr: Adam learning rate.
        geometry: ``"riemannian"`` (pull-back energy) or ``"euclidean"``.

    Returns:
        :class:`~optarium._core.result.Result` with ``x`` the ``(K+1, d)`` path and ``value`` the final
        objective; ``extras``: ``lam``, ``energy0``, ``potential0`` (initial mean U), ``energy``,
        ``mean_potential``, ``objective0``, ``initial_path``.
    """
    K = check_int("n_points", n_points, minimum=2)
    steps = check_int("steps", steps, minimum=0)
    lr = check_positive("lr", lr)
    check_choice("geometry", geometry, ("riemannian", "euclidean"))
    if not callable(potential):
        raise TypeError("potential: must be callable")
    za, zb = _batch("z_a", z_a), _batch("z_b", z_b)
    if za.shape != zb.shape or za.shape[0] != 1:
        raise ValueError(f"z_b: must have z_a's shape (d,), got {tuple(z_b.shape)} vs {tuple(z_a.shape)}")
    t = torch.linspace(0, 1, K + 1, dtype=za.dtype, device=za.device).unsqueeze(-1)
    init = (1 - t) * za + t * zb
    interior = init[1:-1].clone().requires_grad_(True)

    def terms(inner: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        path = torch.cat([za, inner, zb])
        pts = geo.outputs(path) if geometry == "riemannian" else path
        energy = K * (pts[1:] - pts[:-1]).pow(2).sum()
        u = potential(inner).reshape(-1)
        if bool((u < 0).any()):
            raise ValueError("potential: must be >= 0")
        return energy, u.mean()

    with torch.no_grad():
        e0, u0 = terms(init[1:-1])
    if lam is None:
        if not float(u0) > 0:
            raise ValueError("potential: lam=None needs a positive mean potential on the straight line")
        lam_v = float(e0) / float(u0)
    else:
        lam_v = float(lam)
        if not (lam_v >= 0 and math.isfinite(lam_v)):
            raise ValueError(f"lam: must be finite and >= 0, got {lam}")
    opt = torch.optim.Adam([interior], lr=lr)
    for _ in range(steps):
        opt.zero_grad()
        e, u = terms(interior)
        (e + lam_v * u).backward()
        opt.step()
    with torch.no_grad():
        e, u = terms(interior)
        path = torch.cat([za, interior.detach(), zb])
    value = float(e + lam_v * u)
    return Result(
        x=path,
        value=value,
        status="max_iter",
        n_iter=steps,
        extras={
            "lam": lam_v,
            "energy0": float(e0),
            "potential0": float(u0),
            "objective0": float(e0 + lam_v * u0),
            "energy": float(e),
            "mean_potential": float(u),
            "initial_path": init,
        },
    )


# ------------------------------------------------------------------------------------------ LE-BO
def expected_improvement(mean: torch.Tensor, var: torch.Tensor, best_f: float) -> torch.Tensor:
    r"""Analytic EI for maximisation: :math:`\sigma(u\Phi(u) + \varphi(u))`,
    :math:`u = (\mu - f^*)/\sigma`."""
    sigma = var.clamp_min(1e-18).sqrt()
    u = (mean - best_f) / sigma
    normal = torch.distributions.Normal(torch.zeros_like(u), torch.ones_like(u))
    return sigma * (u * normal.cdf(u) + normal.log_prob(u).exp())


class LEBO:
    r"""Local Enumeration Bayesian Optimisation around one seed sequence (structure [found], details our
    design; see the module docstring).

    Each :meth:`ask`: (1) pool = greedy decodings of ``n_brownian`` Riemannian Brownian samples around the
    encodings of the current ``top_k`` sequences (``geometry="euclidean"``: Euclidean latent Gaussian steps
    with the same expected output change) plus ``top_m`` mutations of each of those sequences
    (:func:`tangent_mutations`; Euclidean: all single mutants ranked by the predictor's gain
    :math:`P(E(x')) - P(E(x))` alone); kept: valid, within edit distance ``max_edit`` of the seed, never
    evaluated; (2) a ``SingleTaskGP`` (Matern-5/2, dimension-scaled prior, as
    :func:`optarium.bo.pom.fit_gp_hyperparameters`) on flattened one-hot features of standardised values,
    hyperparameters fitted on the first ask and then fixed; (3) analytic LogEI (BoTorch) over the pool, a
    batch of ``q`` by the Kriging believer (the posterior mean is appended as a fantasy observation).

    Args:
        geometry: the :class:`PullbackGeometry` of the decoder (``(B, d) -> (B, L, len(alphabet)+1)``).
        encoder: ``list[str] -> (n, d)`` latent codes.
        predictor: ``(n, d) -> (n,)`` cheap property predictor on latents (higher = better).
        oracle_batch_size: q.
        max_edit: edit-distance radius around the seed.
        geometry_mode: ``"riemannian"`` or ``"euclidean"`` (the ablation).
        maximize: direction of the oracle's values.
        n_brownian, top_k, top_m: pool sizes (200, 3, 50).
        target_output_change: :math:`\delta_{out}` of the latent steps.
        generator: the one source of randomness.
        alphabet: residues (the decoder's last symbol is the pad).
    """

    def __init__(
        self,
        geometry: PullbackGeometry,
        encoder: Callable[[list[str]], torch.Tensor],
        predictor: Callable[[torch.Tensor], torch.Tensor],
        oracle_batch_size: int = 4,
        max_edit: int = 3,
        geometry_mode: str = "riemannian",
        maximize: bool = True,
        n_brownian: int = 200,
        top_k: int = 3,
        top_m: int = 50,
        target_output_change: float = 1.0,
        generator: torch.Generator | None = None,
        alphabet: str = AMINO_ACIDS,
    ) -> None:
        check_type("geometry", geometry, PullbackGeometry)
        if not callable(encoder):
            raise TypeError("encoder: must be callable")
        if not callable(predictor):
            raise TypeError("predictor: must be callable")
        self.geo = geometry
        self.encoder = encoder
        self.predictor = predictor
        self.q = check_int("oracle_batch_size", oracle_batch_size, minimum=1)
        self.max_edit = check_int("max_edit", max_edit, minimum=1)
        self.geometry_mode = check_choice("geometry_mode", geometry_mode, ("riemannian", "euclidean"))
        self.maximize = check_type("maximize", maximize, bool)
        self.n_brownian = check_int("n_brownian", n_brownian, minimum=0)
        self.top_k = check_int("top_k", top_k, minimum=1)
        self.top_m = check_int("top_m", top_m, minimum=1)
        self.delta = check_positive("target_output_change", target_output_change)
        self.generator = generator if generator is not None else torch.Generator().manual_seed(0)
        check_type("generator", self.generator, torch.Generator)
        self.alphabet = alphabet
        self.seed: str | None = None
        self.X: list[str] = []
        self.Y: list[float] = []
        self.hyper: dict[str, torch.Tensor] | None = None
        self.length: int | None = None
        self.last_pool_size = 0

    # -------------------------------------------------------------- data
    def add_seed(self, sequence: str, initial: Sequence[tuple[str, float]]) -> None:
        """Set the seed and its initial evaluated data ``[(sequence, value), ...]`` (at least two)."""
        if self.seed is not None:
            raise ValueError("sequence: a seed was already added")
        _check_sequence("sequence", sequence, self.alphabet)
        if len(initial) < 2:
            raise ValueError("initial: needs at least two evaluated sequences")
        self.seed = sequence
        self.tell([s for s, _ in initial], torch.tensor([float(y) for _, y in initial], dtype=torch.float64))

    def tell(self, sequences: Sequence[str], y: torch.Tensor | Sequence[float]) -> None:
        """Record evaluations; ``ValueError`` on NaN/inf values, unknown letters or a length mismatch. A
        sequence told again keeps its first value (:meth:`ask` never proposes an evaluated one)."""
        y = torch.as_tensor(y, dtype=torch.float64).reshape(-1)
        if len(sequences) != y.numel():
            raise ValueError(f"y: {y.numel()} values for {len(sequences)} sequences")
        if not bool(torch.isfinite(y).all()):
            raise ValueError("y: contains NaN or inf")
        for s in sequences:
            _check_sequence("sequences", s, self.alphabet, self._length())
        known = set(self.X)
        for s, v in zip(sequences, y.tolist(), strict=True):
            if s in known:
                continue
            known.add(s)
            self.X.append(s)
            self.Y.append(float(v))

    def _length(self) -> int:
        if self.length is None:
            z = self.encoder([self.seed or self.alphabet[0]])
            with torch.no_grad():
                out = self.geo.decoder(z)
            self.length = int(out.shape[-2])
        return self.length

    @property
    def best_sequence(self) -> str:
        """The best evaluated sequence."""
        return self.X[self._order()[0]]

    @property
    def best_y(self) -> float:
        """Its value (in the caller's direction)."""
        return self.Y[self._order()[0]]

    def _signed(self) -> torch.Tensor:
        y = torch.tensor(self.Y, dtype=torch.float64)
        return y if self.maximize else -y

    def _order(self) -> list[int]:
        if not self.X:
            raise ValueError("no evaluations yet")
        return torch.argsort(self._signed(), descending=True, stable=True).tolist()

    # -------------------------------------------------------------- pool
    def _near(self, s: str | None, seen: set[str]) -> bool:
        if s is None or s in seen:
            return False
        seed = self.seed or ""
        if len(s) == len(seed) and sum(x != y for x, y in zip(s, seed, strict=True)) <= self.max_edit:
            return True  # Levenshtein <= Hamming
        return edit_distance(s, seed, self.max_edit) <= self.max_edit

    def candidate_pool(self) -> list[str]:
        """The filtered candidate pool of the next :meth:`ask` (consumes randomness)."""
        if self.seed is None:
            raise ValueError("add_seed first")
        top = [self.X[i] for i in self._order()[: self.top_k]]
        Z = self.encoder(top).to(torch.float64)
        seen = set(self.X)
        pool: dict[str, None] = {}
        per = math.ceil(self.n_brownian / len(top)) if self.n_brownian else 0
        if per:
            if self.geometry_mode == "riemannian":
                samples = riemannian_brownian_step(
                    self.geo, Z, n=per, generator=self.generator, target_output_change=self.delta
                )
            else:
                samples = euclidean_gaussian_step(
                    self.geo, Z, n=per, generator=self.generator, target_output_change=self.delta
                )
            with torch.no_grad():
                dec = decode_sequences(self.geo.decoder(samples.reshape(-1, Z.shape[-1])), self.alphabet)
            for s in dec:
                if self._near(s, seen):
                    pool[s] = None  # type: ignore[index]
        for seq, z in zip(top, Z, strict=True):

            def allowed(p: int, a: str, seq: str = seq) -> bool:
                s = seq[:p] + a + seq[p + 1 :]
                return s not in pool and self._near(s, seen)

            if self.geometry_mode == "riemannian":
                muts = [
                    (m.position, m.residue)
                    for m in tangent_mutations(
                        self.geo,
                        z,
                        seq,
                        top_m=self.top_m,
                        property_fn=self.predictor,
                        alphabet=self.alphabet,
                        allowed=allowed,
                    )
                ]
            else:
                muts = self._euclidean_mutations(seq, z, allowed)
            for p, a in muts:
                pool[seq[:p] + a + seq[p + 1 :]] = None
        return list(pool)

    def _euclidean_mutations(
        self, seq: str, z: torch.Tensor, allowed: Callable[[int, str], bool]
    ) -> list[tuple[int, str]]:
        muts = [(p, a) for p in range(len(seq)) for a in self.alphabet if a != seq[p] and allowed(p, a)]
        if not muts:
            return []
        mutants = [seq[:p] + a + seq[p + 1 :] for p, a in muts]
        with torch.no_grad():
            gain = self.predictor(self.encoder(mutants).to(torch.float64)).reshape(-1)
            gain = gain - self.predictor(z.unsqueeze(0)).reshape(-1)[0]
        order = torch.argsort(gain, descending=True, stable=True)[: self.top_m]
        return [muts[i] for i in order.tolist()]

    # -------------------------------------------------------------- surrogate
    def _features(self, seqs: Sequence[str]) -> torch.Tensor:
        return sequence_one_hot(seqs, self._length(), self.alphabet).flatten(1)

    def _gp(self, X: torch.Tensor, y: torch.Tensor) -> Any:
        """POM's GP (Matern-5/2, dimension-scaled prior): ML-fitted on the first call, fixed afterwards."""
        from optarium.bo.pom import _models, fit_gp_hyperparameters

        if self.hyper is None:
            self.hyper = fit_gp_hyperparameters(X, y.unsqueeze(-1))[0]
        return _models(X, y.unsqueeze(-1), [self.hyper])[0]

    def select(self, pool: Sequence[str], q: int | None = None) -> list[str]:
        """The batch chosen from ``pool`` by LogEI + Kriging believer: ``min(q, len(pool))`` sequences
        (a caller that needs exactly ``q`` must check); ``ValueError`` for an empty pool."""
        from botorch.acquisition import LogExpectedImprovement

        if not pool:
            raise ValueError("pool: the candidate pool is empty")
        q = self.q if q is None else check_int("q", q, minimum=1)
        X = self._features(self.X)
        y = self._signed()
        mu, sd = y.mean(), y.std().clamp_min(1e-9)
        yn = (y - mu) / sd
        C = self._features(pool)
        chosen: list[int] = []
        best = float(yn.max())
        for _ in range(min(q, len(pool))):
            model = self._gp(X, yn)
            with torch.no_grad():
                acq = LogExpectedImprovement(model, best_f=best)(C.unsqueeze(1))
            if chosen:
                acq[torch.tensor(chosen)] = -math.inf
            i = int(torch.argmax(acq))
            chosen.append(i)
            with torch.no_grad():
                fantasy = model.posterior(C[i : i + 1]).mean.reshape(1)
            X = torch.cat([X, C[i : i + 1]])
            yn = torch.cat([yn, fantasy])
        return [pool[i] for i in chosen]

    def ask(self) -> list[str]:
        """The next ``q`` sequences to evaluate."""
        pool = self.candidate_pool()
        self.last_pool_size = len(pool)
        return self.select(pool)

    # -------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        """Seed, evaluations, fixed GP hyperparameters and the generator's state."""
        return {
            "seed": self.seed,
            "X": list(self.X),
            "Y": list(self.Y),
            "hyper": None if self.hyper is None else {k: v.clone() for k, v in self.hyper.items()},
            "generator": self.generator.get_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.seed = state["seed"]
        self.X = list(state["X"])
        self.Y = [float(v) for v in state["Y"]]
        self.hyper = None if state["hyper"] is None else {k: v.clone() for k, v in state["hyper"].items()}
        self.generator.set_state(state["generator"])


def _no_predictor(z: torch.Tensor) -> torch.Tensor:
    raise RuntimeError("LatentBO uses no property predictor")


class LatentBO(LEBO):
    r"""Euclidean-latent BO, a reference for LE-BO [our design: plain latent-space BO, not from the paper].

    The same GP (Matern-5/2, dimension-scaled prior, hyperparameters fitted once on the initial data and then
    fixed), analytic LogEI, Kriging-believer batch of ``q``, edit-distance filter and budget as :class:`LEBO`,
    but the GP's inputs are the latent codes :math:`E(x)` (float64) instead of one-hot features, and the pool
    has no geometry, no predictor and no mutation enumeration: greedy decodings of ``n_samples`` Euclidean
    Gaussian latent samples :math:`z + s\,\xi`, :math:`\xi\sim N(0, I_d)`, around the encodings of the
    current ``top_k`` sequences (``None``: of every evaluated sequence, so that the pool does not dry up
    once the best ones sit at the edit radius), the step :math:`s` cycling through ``step_sizes`` (latent
    units), kept when valid, within edit distance ``max_edit`` of the seed and never evaluated.

    Args:
        decoder: ``(B, d) -> (B, L, len(alphabet)+1)`` logits.
        encoder: ``list[str] -> (n, d)`` latent codes.
        oracle_batch_size, max_edit, maximize, generator, alphabet: as :class:`LEBO`.
        n_samples: latent samples per :meth:`ask` (split evenly over the centres).
        top_k: how many of the best evaluated sequences are centres (``None``: all).
        step_sizes: the Gaussian steps' standard deviations, each > 0.
    """

    def __init__(
        self,
        decoder: Callable[[torch.Tensor], torch.Tensor],
        encoder: Callable[[list[str]], torch.Tensor],
        oracle_batch_size: int = 4,
        max_edit: int = 3,
        maximize: bool = True,
        n_samples: int = 1000,
        top_k: int | None = None,
        step_sizes: Sequence[float] = (0.1, 0.2, 0.4),
        generator: torch.Generator | None = None,
        alphabet: str = AMINO_ACIDS,
    ) -> None:
        super().__init__(
            PullbackGeometry(decoder),
            encoder=encoder,
            predictor=_no_predictor,
            oracle_batch_size=oracle_batch_size,
            max_edit=max_edit,
            geometry_mode="euclidean",
            maximize=maximize,
            n_brownian=check_int("n_samples", n_samples, minimum=1),
            top_k=1 if top_k is None else top_k,
            generator=generator,
            alphabet=alphabet,
        )
        steps = [check_positive("step_sizes", s) for s in step_sizes]
        if not steps:
            raise ValueError("step_sizes: must not be empty")
        self.step_sizes = tuple(steps)
        self.centres = None if top_k is None else self.top_k

    def candidate_pool(self) -> list[str]:
        """The filtered pool of decoded Euclidean latent samples (consumes randomness)."""
        if self.seed is None:
            raise ValueError("add_seed first")
        top = [self.X[i] for i in self._order()[: self.centres]]
        Z = self.encoder(top).to(torch.float64)
        per = math.ceil(self.n_brownian / len(top))
        steps = torch.tensor(self.step_sizes, dtype=Z.dtype, device=Z.device)
        scale = steps[torch.arange(per, device=Z.device) % len(steps)]
        xi = _normal((len(top), per, Z.shape[-1]), Z, self.generator)
        samples = Z.unsqueeze(1) + scale.view(1, -1, 1) * xi
        with torch.no_grad():
            dec = decode_sequences(self.geo.decoder(samples.reshape(-1, Z.shape[-1])), self.alphabet)
        seen = set(self.X)
        return list(dict.fromkeys(s for s in dec if self._near(s, seen)))

    def _features(self, seqs: Sequence[str]) -> torch.Tensor:
        with torch.no_grad():
            return self.encoder(list(seqs)).to(torch.float64)
