r"""Federated meta strategic regression: client data that reacts to the deployed personalised models.

The closed-form instance of the federated bilevel performative prediction experiments
(:mod:`optarium.bilevel.fbi_performative`; spec ``fbi-performative``,
a design consistent with arXiv:2606.19734).
M clients with weights :math:`p_i`. Client i's base features are :math:`x \sim N(\mu_i, I_d)` and its labels
:math:`y = x^\top w_i^\star + N(0, \sigma^2)`.
When the personalised model :math:`u_i` is deployed, agents move
their features to :math:`x' = x - \varepsilon_i u_i` while the labels keep depending on :math:`x` (a location
family, as in Perdomo et al. 2020), so :math:`D_i(\phi)` is :math:`\varepsilon_i`-sensitive in :math:`u_i`:
:math:`x' \sim N(m_i, I)` with :math:`m_i = \mu_i - \varepsilon_i u_i` and
:math:`y = x'^\top w_i + \varepsilon_i u_i^\top w_i + \text{noise}`. Its moments are exact:

.. math::

    S_i = E[x'x'^\top] = I + m_i m_i^\top,\quad
    c_i = E[x'y] = S_i w_i + \varepsilon_i (u_i^\top w_i) m_i,\quad
    E[y^2] = w_i^\top S_i w_i + 2\varepsilon_i (u_i^\top w_i)(m_i^\top w_i) + \varepsilon_i^2 (u_i^\top w_i)^2
    + \sigma^2.

Bilevel problem on a frozen deployment :math:`\bar\phi = (\bar\theta, \bar U)` (decoupled risks):
LL :math:`g_i(\theta, u) = E_{D_i(\bar\phi)}\tfrac12(y - x'^\top u)^2 + \tfrac\lambda2\|u - \theta\|^2`, so
:math:`u_i^\star(\theta) = A_i(c_i + \lambda\theta)` with :math:`A_i = (S_i + \lambda I)^{-1}`; UL
:math:`F(\theta) = \sum_i p_i E_{D_i(\bar\phi)}\tfrac12(y - x'^\top u_i^\star(\theta))^2`
(meta validation loss),
a quadratic with Hessian :math:`H = \sum_i p_i\lambda^2 A_i S_i A_i` and minimiser :math:`H^{-1} b`,
:math:`b = \sum_i p_i \lambda A_i(c_i - S_i A_i c_i)`.
The map :math:`T(\bar\phi) = (\theta^+, u^\star(\theta^+))`
depends on :math:`\bar\phi` only through :math:`\bar U`.

Everything is batched over a leading client axis (``clients`` = global indices of the rows given), float64 by
default, dtype/device following the problem tensors. Samples for all M clients come from one generator (each
caller keeps its rows), so sampled runs do not depend on how clients are split over processes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from optarium._core.validation import check_int, check_nonnegative, check_positive

__all__ = ["StrategicMetaRegression", "make_strategic_meta_regression"]


@dataclass(frozen=True)
class StrategicMetaRegression:
    r"""The federated meta strategic regression instance (see the module docstring).

    Attributes:
        means: ``(M, d)`` base feature means :math:`\mu_i`.
        w_true: ``(M, d)`` client regressors :math:`w_i^\star`.
        eps: ``(M,)`` sensitivities :math:`\varepsilon_i \ge 0`.
        weights: ``(M,)`` client weights :math:`p_i` (sum 1).
        lam: the LL proximal weight :math:`\lambda > 0`.
        noise_sd: label noise :math:`\sigma`.
    """

    means: torch.Tensor
    w_true: torch.Tensor
    eps: torch.Tensor
    weights: torch.Tensor
    lam: float = 1.0
    noise_sd: float = 0.1

    def __post_init__(self) -> None:
        if self.means.ndim != 2:
            raise ValueError(f"means: must have shape (M, d), got {tuple(self.means.shape)}")
        if self.w_true.shape != self.means.shape:
            raise ValueError(
                f"w_true: must have shape {tuple(self.means.shape)}, got {tuple(self.w_true.shape)}"
            )
        M = self.means.shape[0]
        if self.eps.shape != (M,):
            raise ValueError(f"eps: must have shape ({M},), got {tuple(self.eps.shape)}")
        if bool((self.eps < 0).any()):
            raise ValueError("eps: sensitivities must be >= 0")
        if self.weights.shape != (M,) or bool((self.weights < 0).any()):
            raise ValueError(f"weights: must be {M} nonnegative client weights")
        if abs(float(self.weights.sum()) - 1.0) > 1e-9:
            raise ValueError(f"weights: must sum to 1, got {float(self.weights.sum()):.6g}")
        check_positive("lam", self.lam)
        check_nonnegative("noise_sd", self.noise_sd)

    # ------------------------------------------------------------------------------------------ shape
    @property
    def n_clients(self) -> int:
        """M."""
        return int(self.means.shape[0])

    @property
    def dim(self) -> int:
        """d (the UL variable θ and every LL block u_i have this dimension)."""
        return int(self.means.shape[1])

    @property
    def dtype(self) -> torch.dtype:
        """The dtype of the problem tensors."""
        return self.means.dtype

    @property
    def device(self) -> torch.device:
        """The device of the problem tensors."""
        return self.means.device

    def with_eps(self, eps: float | torch.Tensor) -> StrategicMetaRegression:
        """The same instance with sensitivities ``eps`` (a scalar for every client, or ``(M,)``)."""
        e = torch.as_tensor(eps, dtype=self.dtype, device=self.device)
        e = e.expand(self.n_clients).clone() if e.ndim == 0 else e
        return dataclasses.replace(self, eps=e)

    def to(
        self, dtype: torch.dtype | None = None, device: torch.device | str | None = None
    ) -> StrategicMetaRegression:
        """The instance in ``dtype`` on ``device``."""
        kw = {"dtype": dtype or self.dtype, "device": device or self.device}
        return dataclasses.replace(
            self,
            means=self.means.to(**kw),
            w_true=self.w_true.to(**kw),
            eps=self.eps.to(**kw),
            weights=self.weights.to(**kw),
        )

    # ------------------------------------------------------------------------------------ closed forms
    def moments(
        self, U: torch.Tensor, clients: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(S, c, Ey2)`` of the clients ``clients`` when the rows ``U`` (``(n, d)``) are deployed."""
        mu, w, e = self.means[clients], self.w_true[clients], self.eps[clients]
        m = mu - e[:, None] * U
        eye = torch.eye(self.dim, dtype=U.dtype, device=U.device)
        S = eye + m[:, :, None] * m[:, None, :]
        uw = (U * w).sum(-1)
        mw = (m * w).sum(-1)
        c = (S @ w[:, :, None]).squeeze(-1) + (e * uw)[:, None] * m
        Sw = (w[:, None, :] @ S @ w[:, :, None]).reshape(-1)
        Ey2 = Sw + 2 * e * uw * mw + (e * uw) ** 2 + self.noise_sd**2
        return S, c, Ey2

    def risk(self, V: torch.Tensor, U: torch.Tensor, clients: torch.Tensor) -> torch.Tensor:
        r"""Per-client :math:`E_{D_i(U)}\tfrac12(y - x'^\top v_i)^2`
        of models ``V`` under deployment ``U``."""
        S, c, Ey2 = self.moments(U, clients)
        vSv = (V[:, None, :] @ S @ V[:, :, None]).reshape(-1)
        return 0.5 * (Ey2 - 2 * (c * V).sum(-1) + vSv)

    def deployed_loss(self, theta: torch.Tensor, U: torch.Tensor, clients: torch.Tensor) -> torch.Tensor:
        r"""Post-deployment loss per client, :math:`p_i E_{D_i(\phi)}\tfrac12(y - x'^\top u_i)^2`
        (``θ`` unused).

        Sum over all clients: :math:`F(\phi; D(\phi))`, the meta loss of the deployed personalised models.
        """
        del theta
        return self.weights[clients] * self.risk(U, U, clients)

    def bilevel_terms(self, U: torch.Tensor, clients: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        r"""Per-client UL terms ``(H_i, b_i)`` on :math:`D_i(U)`: :math:`\sum_i H_i \theta^+ = \sum_i b_i`."""
        S, c, _ = self.moments(U, clients)
        eye = torch.eye(self.dim, dtype=U.dtype, device=U.device)
        A = torch.linalg.inv(S + self.lam * eye)
        p = self.weights[clients][:, None, None]
        H = p * self.lam**2 * (A @ S @ A)
        Ac = (A @ c[:, :, None]).squeeze(-1)
        b = p[:, :, 0] * self.lam * (A @ (c - (S @ Ac[:, :, None]).squeeze(-1))[:, :, None]).squeeze(-1)
        return H, b

    def lower_solution(self, theta: torch.Tensor, U: torch.Tensor, clients: torch.Tensor) -> torch.Tensor:
        r""":math:`u_i^\star(\theta; D_i(U)) = (S_i + \lambda I)^{-1}(c_i + \lambda\theta)` for every row."""
        S, c, _ = self.moments(U, clients)
        eye = torch.eye(self.dim, dtype=U.dtype, device=U.device)
        rhs = c + self.lam * theta
        return torch.linalg.solve(S + self.lam * eye, rhs)

    def best_response(self, U: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        r"""The exact map :math:`T`: ``(θ⁺, U⁺)`` for the deployment ``U`` (all M clients, ``(M, d)``)."""
        clients = torch.arange(self.n_clients, device=U.device)
        H, b = self.bilevel_terms(U, clients)
        theta = torch.linalg.solve(H.sum(0), b.sum(0))
        return theta, self.lower_solution(theta, U, clients)

    def pooled_response(self, w: torch.Tensor) -> torch.Tensor:
        r"""Centralised RRM on pooled data (Perdomo et al. 2020): deploy one model ``w`` at every client and
        return :math:`\arg\min_v \sum_i p_i E_{D_i(w)}\tfrac12(y - x'^\top v)^2
        = (\sum p_i S_i)^{-1}\sum p_i c_i`."""
        clients = torch.arange(self.n_clients, device=w.device)
        S, c, _ = self.moments(w.expand(self.n_clients, -1), clients)
        p = self.weights
        return torch.linalg.solve((p[:, None, None] * S).sum(0), (p[:, None] * c).sum(0))

    def ul_hessian(self, U: torch.Tensor) -> torch.Tensor:
        """The UL Hessian :math:`H = \\sum_i p_i \\lambda^2 A_i S_i A_i` on :math:`D(U)` (``(d, d)``)."""
        return self.bilevel_terms(U, torch.arange(self.n_clients, device=U.device))[0].sum(0)

    def inner_smoothness(self, U: torch.Tensor, clients: torch.Tensor) -> torch.Tensor:
        r"""Per-client :math:`\lambda_{\max}(S_i + \lambda I) = 1 + \|m_i\|^2 + \lambda` on :math:`D_i(U)`."""
        m = self.means[clients] - self.eps[clients][:, None] * U
        return 1.0 + (m * m).sum(-1) + self.lam

    # ---------------------------------------------------------------------------------- sampled oracle
    def sample(
        self, U: torch.Tensor, clients: torch.Tensor, n: int, generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``n`` draws per client from :math:`D_i(U)`: ``(X' (k, n, d), y (k, n))`` for the ``k`` rows given.

        The standard normals are drawn for all M clients from ``generator`` and the rows ``clients`` kept,
        so the draws do not depend on how clients are split over processes.
        """
        M, d = self.n_clients, self.dim
        z = torch.randn((M, n, d + 1), generator=generator, dtype=U.dtype, device=U.device)[clients]
        mu, w, e = self.means[clients], self.w_true[clients], self.eps[clients]
        x = mu[:, None, :] + z[..., :d]
        y = (x * w[:, None, :]).sum(-1) + self.noise_sd * z[..., d]
        return x - e[:, None, None] * U[:, None, :], y

    def inner_grad(
        self, theta: torch.Tensor, U: torch.Tensor, batch: tuple[torch.Tensor, torch.Tensor]
    ) -> torch.Tensor:
        r"""Batch :math:`\nabla_u g_i = \frac1n X'^\top(X'u - y) + \lambda(u - \theta)`
        for every row (``(k, d)``)."""
        X, y = batch
        r = (X @ U[:, :, None]).squeeze(-1) - y
        return (X.transpose(1, 2) @ r[:, :, None]).squeeze(-1) / X.shape[1] + self.lam * (U - theta)

    def inner_hvp(
        self, U: torch.Tensor, V: torch.Tensor, batch: tuple[torch.Tensor, torch.Tensor]
    ) -> torch.Tensor:
        r"""Batch :math:`\nabla^2_{uu} g_i\, v_i = \frac1n X'^\top X' v_i + \lambda v_i` for every row."""
        del U
        X, _ = batch
        XV = (X @ V[:, :, None]).squeeze(-1)
        return (X.transpose(1, 2) @ XV[:, :, None]).squeeze(-1) / X.shape[1] + self.lam * V

    def cross_vjp(self, V: torch.Tensor) -> torch.Tensor:
        r""":math:`\nabla^2_{\theta u} g_i\, v_i = -\lambda v_i` for every row."""
        return -self.lam * V

    def outer_grads(
        self, theta: torch.Tensor, U: torch.Tensor, batch: tuple[torch.Tensor, torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        r"""Batch :math:`(\nabla_\theta f_i, \nabla_u f_i)` of :math:`f_i = \frac1{2n}\|y - X'u_i\|^2`
        (``θ``-free)."""
        X, y = batch
        r = (X @ U[:, :, None]).squeeze(-1) - y
        gu = (X.transpose(1, 2) @ r[:, :, None]).squeeze(-1) / X.shape[1]
        return torch.zeros_like(U), gu


def make_strategic_meta_regression(
    n_clients: int = 10,
    dim: int = 5,
    *,
    eps: float = 0.0,
    lam: float = 1.0,
    noise_sd: float = 0.1,
    heterogeneity: float = 0.5,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str = "cpu",
) -> StrategicMetaRegression:
    r"""The spec's quick instance: :math:`\mu_i, \bar w, \delta_i \sim N(0, I)`, :math:`w_i^\star = \bar w +
    h\,\delta_i`, :math:`p_i = 1/M`, every :math:`\varepsilon_i = ` ``eps``
    (drawn in float64 from ``seed``)."""
    n_clients = check_int("n_clients", n_clients, minimum=1)
    dim = check_int("dim", dim, minimum=1)
    check_nonnegative("eps", eps)
    check_positive("lam", lam)
    check_nonnegative("heterogeneity", heterogeneity)
    g = torch.Generator().manual_seed(int(seed))
    means = torch.randn((n_clients, dim), generator=g, dtype=torch.float64)
    w_bar = torch.randn(dim, generator=g, dtype=torch.float64)
    delta = torch.randn((n_clients, dim), generator=g, dtype=torch.float64)
    kw = {"dtype": dtype, "device": device}
    return StrategicMetaRegression(
        means=means.to(**kw),
        w_true=(w_bar + heterogeneity * delta).to(**kw),
        eps=torch.full((n_clients,), float(eps), **kw),
        weights=torch.full((n_clients,), 1.0 / n_clients, **kw),
        lam=float(lam),
        noise_sd=float(noise_sd),
    )
