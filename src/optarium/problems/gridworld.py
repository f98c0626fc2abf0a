r"""A tabular 2x2 GridWorld with exact policy evaluation, occupancy and policy gradient (GIPO's analytic
study).

Layout (spec ``gipo.md``): states 0..3 row-major (0 top-left start, 3 bottom-right goal), actions
up/right/down/left; a move into a wall stays put; entering the goal gives reward 1 and ends the episode.
For a softmax policy with logits ``(4, 4)``: :func:`evaluate` gives :math:`V^\pi`, :math:`Q^\pi`,
:math:`A^\pi`, the discounted visitation :math:`\rho^\pi(s) = \sum_t \gamma^t P(s_t = s)` from the start,
its normalisation :math:`d^\pi = \rho^\pi / \sum\rho^\pi` and :math:`J = V^\pi(s_0)`; :func:`score` the
score vectors :math:`\nabla_\theta \log\pi(a|s)` (16 x 16). The normalised target
:math:`g^* = \mathbb E_{d^\pi\times\pi}[A^\pi\nabla\log\pi] = \nabla J / \sum_s \rho^\pi(s)` (policy-gradient
theorem; with termination :math:`\sum\rho < 1/(1-\gamma)`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["N_ACTIONS", "N_STATES", "GridEval", "evaluate", "score", "transitions"]

N_STATES = 4
N_ACTIONS = 4
GOAL = 3
START = 0
_MOVES = ((-1, 0), (0, 1), (1, 0), (0, -1))  # up, right, down, left


def transitions(dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """``P[s, a, s']`` of the 2x2 grid (the goal absorbs; it is terminal in :func:`evaluate`)."""
    P = torch.zeros(N_STATES, N_ACTIONS, N_STATES, dtype=dtype)
    for s in range(N_STATES):
        r, c = divmod(s, 2)
        for a, (dr, dc) in enumerate(_MOVES):
            nr, nc = r + dr, c + dc
            nxt = nr * 2 + nc if 0 <= nr < 2 and 0 <= nc < 2 else s
            P[s, a, GOAL if s == GOAL else nxt] = 1.0
    return P


@dataclass(frozen=True)
class GridEval:
    """Exact quantities of one policy (see the module docstring)."""

    pi: torch.Tensor
    V: torch.Tensor
    Q: torch.Tensor
    A: torch.Tensor
    rho: torch.Tensor
    d: torch.Tensor
    J: torch.Tensor


def evaluate(logits: torch.Tensor, gamma: float = 0.9) -> GridEval:
    """Exact evaluation of the softmax policy ``logits`` (4 x 4); differentiable in ``logits``."""
    if not isinstance(logits, torch.Tensor) or logits.shape != (N_STATES, N_ACTIONS):
        raise ValueError(f"logits: must be a ({N_STATES}, {N_ACTIONS}) tensor")
    if not 0.0 <= gamma < 1.0:
        raise ValueError(f"gamma: must be in [0, 1), got {gamma}")
    P = transitions(logits.dtype)
    nonterm = torch.ones(N_STATES, dtype=logits.dtype)
    nonterm[GOAL] = 0.0
    R = P[:, :, GOAL] * nonterm[:, None]  # reward 1 on entering the goal from a non-goal state
    Pc = P * nonterm[None, None, :] * nonterm[:, None, None]  # continue only between non-terminal states
    pi = torch.softmax(logits, -1)
    P_pi = torch.einsum("sa,sat->st", pi, Pc)
    r_pi = (pi * R).sum(-1)
    eye = torch.eye(N_STATES, dtype=logits.dtype)
    V = torch.linalg.solve(eye - gamma * P_pi, r_pi)
    Q = R + gamma * torch.einsum("sat,t->sa", Pc, V)
    A = (Q - V[:, None]) * nonterm[:, None]
    e0 = torch.zeros(N_STATES, dtype=logits.dtype)
    e0[START] = 1.0
    rho = torch.linalg.solve(eye - gamma * P_pi.T, e0)
    return GridEval(pi=pi, V=V, Q=Q, A=A, rho=rho, d=rho / rho.sum(), J=V[START])


def score(pi: torch.Tensor) -> torch.Tensor:
    r"""``G[s*4 + a]`` = :math:`\nabla_\theta\log\pi(a|s)` flattened over the 16 logits: block ``s`` holds
    :math:`e_a - \pi(\cdot|s)`."""
    S, Acount = pi.shape
    G = torch.zeros(S, Acount, S, Acount, dtype=pi.dtype)
    idx = torch.arange(S)
    G[idx, :, idx, :] = torch.eye(Acount, dtype=pi.dtype)[None] - pi[:, None, :]
    return G.reshape(S * Acount, S * Acount)
