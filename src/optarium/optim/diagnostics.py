"""Curvature diagnostics: Hessian-vector products, dense Hessians and the top Hessian eigenvalue (sharpness).

The sharpness of a loss at ``x`` is ``S(x) = λ_max(∇²f(x))``, the largest *algebraic* eigenvalue of the
Hessian; gradient descent with step ``η`` is locally stable along the top eigenvector only while ``η S < 2``
(Cohen et al., "Gradient Descent on Neural Networks Typically Occurs at the Edge of Stability", ICLR 2021).
It is estimated from Hessian-vector products ``v ↦ ∇²f(x) v``, never forming the Hessian. The eigen-solvers
take their products ``products="reverse"`` (default): reverse-over-reverse, the gradient graph built once per
call and differentiated again for each product (``torch.autograd.grad`` with ``create_graph``), the cheapest
when many products are taken at one point (about 3x cheaper than the alternative on a small MLP on one core);
or ``products="forward"``: forward-over-reverse (``torch.func.jvp`` of ``torch.func.grad``), stateless, what
:func:`hvp` returns. Both give the same products to round-off (tested).

* ``method="lanczos"`` (default): implicitly restarted Lanczos (ARPACK through
  ``scipy.sparse.linalg.eigsh``) on a ``LinearOperator`` whose ``matvec`` is one HVP, ``which="LA"``
  (largest algebraic). ARPACK's ``tol`` bounds the Ritz residual, so the eigenvalue error is at most about
  ``tol·|λ|``.
* ``method="power"``: power iteration until the relative change of the Rayleigh quotient falls below
  ``tol``. Power iteration converges to the eigenvalue of largest *modulus*, which away from a minimum can
  be a negative one; with ``which="LA"`` a negative dominant eigenvalue ``λ₁`` is followed by a second power
  iteration on ``H − λ₁ I`` (whose spectrum is non-negative and whose top eigenvalue is ``λ_max − λ₁``), so
  both methods answer the same question. Power iteration is slow when ``λ₁ ≈ λ₂``; prefer Lanczos.

:class:`SharpnessTracker` follows the sharpness along a training trajectory: each call warm-starts Lanczos
from the previous eigenvector (plus a seeded random component, so that no direction is missing from the
Krylov space), which roughly halves the products per call. Shared by eos-large-step (sharpness along the
training trajectory) and norm-sharpness (sharpness of the learned interpolators).

scipy is imported only when Lanczos runs, so importing this module stays cheap.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from optarium._core.validation import check_choice, check_int, check_positive

__all__ = [
    "EIGEN_METHODS",
    "HVP_PRODUCTS",
    "EigenEstimate",
    "SharpnessTracker",
    "flat_loss",
    "hessian",
    "hvp",
    "sharpness",
    "top_eigenvalue",
]

EIGEN_METHODS = ("lanczos", "power")
HVP_PRODUCTS = ("reverse", "forward")
_WHICH = {"lanczos": ("LA", "LM", "SA"), "power": ("LA", "LM")}


@dataclass(frozen=True)
class EigenEstimate:
    """One Hessian eigenpair estimate.

    Attributes:
        value: the eigenvalue.
        vector: the unit eigenvector, a 1-D tensor of ``x``'s dtype and device.
        n_hvp: Hessian-vector products spent (exact count).
        method: ``"lanczos"``, ``"power"`` or ``"dense"`` (dimension < 3, where ARPACK cannot run).
    """

    value: float
    vector: torch.Tensor
    n_hvp: int
    method: str


def _check_point(f: Any, x: Any) -> torch.Tensor:
    if not callable(f):
        raise TypeError(f"f: expected a callable mapping a 1-D tensor to a scalar, got {type(f).__name__}")
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x: expected a torch.Tensor, got {type(x).__name__}")
    if x.ndim != 1 or x.numel() == 0:
        raise ValueError(f"x: expected a non-empty 1-D tensor, got shape {tuple(x.shape)}")
    if not x.is_floating_point():
        raise TypeError(f"x: expected a floating-point tensor, got {x.dtype}")
    if not bool(torch.isfinite(x).all()):
        raise ValueError("x: contains non-finite values")
    return x.detach()


def hvp(f: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
    """The Hessian-vector product operator ``v ↦ ∇²f(x) v`` of a scalar function of a flat vector.

    Forward-over-reverse: ``torch.func.jvp(torch.func.grad(f), (x,), (v,))``. ``v`` must have ``x``'s
    shape; the result has ``x``'s dtype and device.

    >>> import torch
    >>> A = torch.tensor([[2.0, 1.0], [1.0, 3.0]], dtype=torch.float64)
    >>> Hv = hvp(lambda z: 0.5 * z @ A @ z, torch.zeros(2, dtype=torch.float64))
    >>> Hv(torch.tensor([1.0, 0.0], dtype=torch.float64)).tolist()
    [2.0, 1.0]
    """
    x = _check_point(f, x)
    grad_f = torch.func.grad(f)

    def product(v: torch.Tensor) -> torch.Tensor:
        if not isinstance(v, torch.Tensor) or v.shape != x.shape:
            raise ValueError(f"v: expected a tensor of shape {tuple(x.shape)}")
        return torch.func.jvp(grad_f, (x,), (v.to(x),))[1]

    return product


def hessian(f: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """The dense Hessian ``∇²f(x)`` (``torch.func.hessian``), an ``(n, n)`` tensor: small problems only."""
    x = _check_point(f, x)
    return torch.func.hessian(f)(x)


def _check_eig_args(
    method: str, which: str, tol: float, maxiter: int | None
) -> tuple[str, str, float, int | None]:
    method = check_choice("method", method, EIGEN_METHODS)
    which = check_choice("which", which, _WHICH[method])
    tol = check_positive("tol", tol)
    if maxiter is not None:
        maxiter = check_int("maxiter", maxiter, minimum=1)
    return method, which, tol, maxiter


def _check_start(v0: Any, x: torch.Tensor) -> torch.Tensor:
    if not isinstance(v0, torch.Tensor):
        raise TypeError(f"v0: expected a torch.Tensor, got {type(v0).__name__}")
    v = v0.detach().reshape(-1).to(x)
    if v.numel() != x.numel():
        raise ValueError(f"v0: expected {x.numel()} elements (the size of x), got {v0.numel()}")
    norm = v.norm()
    if not bool(torch.isfinite(norm)) or float(norm) == 0.0:
        raise ValueError("v0: must be a finite non-zero vector")
    return v / norm


def _start_vector(x: torch.Tensor, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    v = torch.randn(x.numel(), generator=generator, dtype=torch.float64)
    return (v / v.norm()).to(x)


def _reverse_hvp(
    f: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor
) -> Callable[[torch.Tensor], torch.Tensor]:
    """Reverse-over-reverse products at ``x``: the gradient graph is built once and kept for every product."""
    xr = x.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        (grad,) = torch.autograd.grad(f(xr), xr, create_graph=True)
    if not grad.requires_grad:  # f is affine in x: its Hessian is zero
        return lambda v: torch.zeros_like(x)

    def product(v: torch.Tensor) -> torch.Tensor:
        (out,) = torch.autograd.grad(grad, xr, grad_outputs=v.to(x), retain_graph=True, allow_unused=True)
        return torch.zeros_like(x) if out is None else out.detach()

    return product


class _CountingOperator:
    """An HVP that counts its calls and refuses a non-finite product."""

    def __init__(self, f: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, products: str) -> None:
        self._hvp = _reverse_hvp(f, x) if products == "reverse" else hvp(f, x)
        self.calls = 0

    def __call__(self, v: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        out = self._hvp(v)
        if not bool(torch.isfinite(out).all()):
            raise FloatingPointError("f: the Hessian-vector product is not finite at x")
        return out


def _dense(op: _CountingOperator, x: torch.Tensor, which: str) -> EigenEstimate:
    n = x.numel()
    eye = torch.eye(n, dtype=x.dtype, device=x.device)
    H = torch.stack([op(eye[i]) for i in range(n)])
    H = 0.5 * (H + H.T)
    values, vectors = torch.linalg.eigh(H)
    index = {"LA": n - 1, "SA": 0, "LM": int(values.abs().argmax())}[which]
    return EigenEstimate(float(values[index]), vectors[:, index], op.calls, "dense")


def _lanczos(
    op: _CountingOperator,
    x: torch.Tensor,
    which: str,
    tol: float,
    maxiter: int | None,
    v0: torch.Tensor,
    ncv: int | None,
) -> EigenEstimate:
    import numpy as np
    from scipy.sparse.linalg import ArpackNoConvergence, LinearOperator, eigsh

    n = x.numel()

    def matvec(v: np.ndarray) -> np.ndarray:
        product = op(torch.from_numpy(np.ascontiguousarray(v, dtype=np.float64).reshape(-1)).to(x))
        return product.detach().to(device="cpu", dtype=torch.float64).numpy()

    operator = LinearOperator((n, n), matvec=matvec, dtype=np.float64)
    start = v0.detach().to(device="cpu", dtype=torch.float64).numpy()
    if ncv is not None:
        ncv = min(max(ncv, 2), n - 1)
    try:
        values, vectors = eigsh(operator, k=1, which=which, tol=tol, maxiter=maxiter, v0=start, ncv=ncv)
    except ArpackNoConvergence as error:
        raise RuntimeError(
            f"maxiter: Lanczos (ARPACK) did not converge to tol={tol} within maxiter={maxiter} "
            f"({op.calls} Hessian-vector products)"
        ) from error
    vector = torch.from_numpy(vectors[:, 0].copy()).to(x)
    return EigenEstimate(float(values[0]), vector, op.calls, "lanczos")


def _power(
    op: Callable[[torch.Tensor], torch.Tensor], v: torch.Tensor, tol: float, maxiter: int
) -> tuple[float, torch.Tensor]:
    value = float("nan")
    for _ in range(maxiter):
        w = op(v)
        new = float(v @ w)
        norm = w.norm()
        if float(norm) == 0.0:
            return 0.0, v
        v = w / norm
        if abs(new - value) <= tol * max(abs(new), 1e-300):
            return new, v
        value = new
    raise RuntimeError(
        f"maxiter: power iteration did not reach a relative change below tol={tol} within maxiter={maxiter}"
    )


def top_eigenvalue(
    f: Callable[[torch.Tensor], torch.Tensor],
    x: torch.Tensor,
    *,
    method: str = "lanczos",
    which: str = "LA",
    tol: float = 1e-4,
    maxiter: int | None = None,
    seed: int = 0,
    v0: torch.Tensor | None = None,
    ncv: int | None = None,
    products: str = "reverse",
) -> EigenEstimate:
    """One extreme eigenpair of ``∇²f(x)`` from Hessian-vector products.

    Args:
        f: a scalar function of a flat 1-D tensor (differentiable twice by ``torch.func``).
        x: the point, a non-empty finite 1-D floating tensor; its dtype and device are those of the HVPs.
        method: ``"lanczos"`` (ARPACK ``eigsh``) or ``"power"`` (see the module docstring).
        which: ``"LA"`` largest algebraic (the sharpness), ``"LM"`` largest modulus, ``"SA"`` smallest
            algebraic (Lanczos only).
        tol: ARPACK's residual tolerance, or the power iteration's relative change of the Rayleigh quotient.
        maxiter: iteration cap (ARPACK restarts, or power iterations; default ARPACK's ``10 n`` and 10,000).
        seed: seed of the random start vector (the estimate is deterministic given it).
        v0: the start vector instead of a random one (a warm start: the previous eigenvector); any non-zero
            finite vector of ``x``'s size.
        ncv: Lanczos basis size (ARPACK's ``ncv``; default scipy's), clipped to ``[2, n - 1]``.
        products: ``"reverse"`` (default) or ``"forward"`` Hessian-vector products (module docstring).

    Returns:
        An :class:`EigenEstimate`. Dimensions 1 and 2 (where ARPACK cannot run) use the dense Hessian
        from ``n`` HVPs.

    Raises:
        RuntimeError: the iteration did not converge within ``maxiter`` (never a silent unconverged value).
        FloatingPointError: a Hessian-vector product was not finite.

    >>> import torch
    >>> A = torch.diag(torch.tensor([-10.0, 3.0, 1.0, 0.5], dtype=torch.float64))
    >>> f = lambda z: 0.5 * z @ A @ z
    >>> round(top_eigenvalue(f, torch.ones(4, dtype=torch.float64), tol=1e-10).value, 8)
    3.0
    """
    x = _check_point(f, x)
    method, which, tol, maxiter = _check_eig_args(method, which, tol, maxiter)
    seed = check_int("seed", seed, minimum=0)
    products = check_choice("products", products, HVP_PRODUCTS)
    if ncv is not None:
        ncv = check_int("ncv", ncv, minimum=2)
    start = _start_vector(x, seed) if v0 is None else _check_start(v0, x)
    op = _CountingOperator(f, x, products)
    if x.numel() < 3:
        return _dense(op, x, which)
    if method == "lanczos":
        return _lanczos(op, x, which, tol, maxiter, start, ncv)
    cap = 10_000 if maxiter is None else maxiter
    value, vector = _power(op, start, tol, cap)
    if which == "LA" and value < 0:
        shift = value
        top, vector = _power(lambda v: op(v) - shift * v, _start_vector(x, seed + 1), tol, cap)
        value = top + shift
    return EigenEstimate(value, vector, op.calls, "power")


def flat_loss(
    model: torch.nn.Module,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    batch: Sequence[torch.Tensor],
) -> tuple[Callable[[torch.Tensor], torch.Tensor], torch.Tensor]:
    """``(f, x)``: ``f(x) = loss_fn(model(X), Y)`` as a function of the model's flattened parameters ``x``.

    The parameters enter through ``torch.func.functional_call`` (the model is not modified); buffers are
    kept as they are. ``x`` is a detached copy of the parameters that require gradients, concatenated in
    ``named_parameters()`` order.
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    if not callable(loss_fn):
        raise TypeError(f"loss_fn: expected a callable (output, target), got {type(loss_fn).__name__}")
    if not isinstance(batch, (tuple, list)) or len(batch) != 2:
        raise ValueError("batch: expected a pair (inputs, targets)")
    inputs, targets = batch
    named = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    if not named:
        raise ValueError("model: has no parameters that require gradients")
    names = [name for name, _ in named]
    shapes = [p.shape for _, p in named]
    sizes = [p.numel() for _, p in named]
    x = torch.cat([p.detach().reshape(-1) for _, p in named])

    def f(flat: torch.Tensor) -> torch.Tensor:
        pieces = torch.split(flat, sizes)
        params: dict[str, torch.Tensor] = {
            name: piece.view(shape) for name, piece, shape in zip(names, pieces, shapes, strict=True)
        }
        output = torch.func.functional_call(model, params, (inputs,))
        return loss_fn(output, targets)

    return f, x


def sharpness(
    model: torch.nn.Module,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    batch: Sequence[torch.Tensor],
    *,
    method: str = "lanczos",
    which: str = "LA",
    tol: float = 1e-4,
    maxiter: int | None = None,
    seed: int = 0,
    products: str = "reverse",
) -> float:
    """The sharpness ``λ_max(∇²L(θ))`` of ``L(θ) = loss_fn(model(X), Y)`` at the model's current parameters.

    ``batch`` is ``(X, Y)``; the Hessian is over every parameter that requires gradients, in the model's
    dtype. Keyword arguments as in :func:`top_eigenvalue`. Raises ``RuntimeError`` when the estimate did not
    converge.
    """
    f, x = flat_loss(model, loss_fn, batch)
    return top_eigenvalue(
        f, x, method=method, which=which, tol=tol, maxiter=maxiter, seed=seed, products=products
    ).value


class SharpnessTracker:
    """The sharpness ``λ_max(∇²L(θ))`` at the model's current parameters, warm-started call after call.

    Each call runs Lanczos (ARPACK ``eigsh``, ``which="LA"``, basis size ``ncv``) on reverse-over-reverse
    products at the current parameters, started from ``u + mix · r``: ``u`` the previous call's eigenvector
    and ``r`` a fresh seeded unit random vector (the first call starts from ``r`` alone). Along a trajectory
    the top eigenvector turns slowly, so the warm start roughly halves the products per call; the random part
    keeps every direction in the Krylov space, so a new top eigenvalue is not missed.

    Args:
        model, loss_fn, batch: as in :func:`sharpness`; the parameters are read at every call.
        tol: ARPACK's tolerance. ncv: the Lanczos basis size (8: small, cheap restarts for k = 1).
        seed: seed of the random components (the sequence of estimates is deterministic given it).
        mix: weight of the random component of the start vector (0 < mix).

    Attributes:
        n_hvp: Hessian-vector products spent by all calls so far. vector: the last eigenvector (or None).

    >>> import torch
    >>> model = torch.nn.Linear(3, 1, bias=False).double()
    >>> X = torch.eye(3, dtype=torch.float64) * torch.tensor([[1.0], [2.0], [3.0]], dtype=torch.float64)
    >>> loss = lambda out, y: 0.5 * ((out - y) ** 2).sum()
    >>> track = SharpnessTracker(model, loss, (X, torch.zeros(3, 1)), tol=1e-12)
    >>> round(track(), 10)
    9.0
    """

    def __init__(
        self,
        model: torch.nn.Module,
        loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
        batch: Sequence[torch.Tensor],
        *,
        tol: float = 1e-4,
        ncv: int = 8,
        seed: int = 0,
        mix: float = 0.3,
    ) -> None:
        flat_loss(model, loss_fn, batch)  # validates the arguments now, not at the first call
        self.model, self.loss_fn, self.batch = model, loss_fn, batch
        self.tol = check_positive("tol", tol)
        self.ncv = check_int("ncv", ncv, minimum=2)
        self.mix = check_positive("mix", mix)
        self._generator = torch.Generator().manual_seed(check_int("seed", seed, minimum=0))
        self.vector: torch.Tensor | None = None
        self.n_hvp = 0

    def __call__(self) -> float:
        """The sharpness at the current parameters (``RuntimeError`` if Lanczos does not converge)."""
        f, x = flat_loss(self.model, self.loss_fn, self.batch)
        noise = torch.randn(x.numel(), generator=self._generator, dtype=torch.float64)
        start = noise / noise.norm()
        if self.vector is not None:
            start = self.vector.to(torch.float64) + self.mix * start
        estimate = top_eigenvalue(f, x, tol=self.tol, ncv=self.ncv, v0=start.to(x), products="reverse")
        self.vector = estimate.vector.detach()
        self.n_hvp += estimate.n_hvp
        return estimate.value
