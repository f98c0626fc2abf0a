"""The "guarded shortcut" gridworld of the cvar-quantile-pg spec, batched, with an exact risk oracle.

Layout (``#`` wall, ``S`` start, ``G`` goal, ``g`` guarded cell)::

    ###########
    #S..ggg..G#     short route: 8 moves east, 3 guarded entries
    #.#######.#
    #.#######.#
    #.........#     long route: 14 moves, no guarded cell
    ###########

Reward -1 per move (a move into a wall leaves the agent in place, still -1); entering a ``g`` cell costs an
extra -30 with probability ``p`` (i.i.d. per entry); the episode ends at ``G`` or after ``horizon`` moves.
The environment of our own (spec, not the paper's domains); torch, batched (no gymnasium dependency: the
batch of episodes is stepped at once, which the quick budget needs). :func:`exact_return_law` computes the
return law of a tabular policy exactly by forward dynamic programming over (cell, penalty count) per step.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from optarium._core.validation import check_int, check_probability

__all__ = ["GuardedGrid", "exact_return_law", "safe_probability"]

_MAP = ("###########", "#S..ggg..G#", "#.#######.#", "#.#######.#", "#.........#", "###########")
_MOVES = ((-1, 0), (0, 1), (1, 0), (0, -1))  # N, E, S, W


@dataclass(frozen=True)
class GuardedGrid:
    """The map above: ``n_cells = 22`` free cells, 4 actions, tables ``next_cell`` and ``guarded``."""

    p: float = 0.05
    penalty: float = 30.0
    horizon: int = 40

    def __post_init__(self) -> None:
        check_probability("p", self.p)
        check_int("horizon", self.horizon, minimum=1)
        cells = [(r, c) for r, row in enumerate(_MAP) for c, ch in enumerate(row) if ch != "#"]
        index = {rc: i for i, rc in enumerate(cells)}
        nxt = torch.zeros(len(cells), 4, dtype=torch.long)
        for i, (r, c) in enumerate(cells):
            for a, (dr, dc) in enumerate(_MOVES):
                nxt[i, a] = index.get((r + dr, c + dc), i)
        guarded = torch.tensor([_MAP[r][c] == "g" for r, c in cells])
        start = next(i for i, (r, c) in enumerate(cells) if _MAP[r][c] == "S")
        goal = next(i for i, (r, c) in enumerate(cells) if _MAP[r][c] == "G")
        object.__setattr__(self, "cells", tuple(cells))
        object.__setattr__(self, "next_cell", nxt)
        object.__setattr__(self, "guarded", guarded)
        object.__setattr__(self, "start", start)
        object.__setattr__(self, "goal", goal)

    @property
    def n_cells(self) -> int:
        return len(self.cells)

    def rollout(
        self, probs: torch.Tensor, n: int, generator: torch.Generator, p: torch.Tensor | None = None
    ) -> dict[str, torch.Tensor]:
        """``n`` episodes of the tabular policy ``probs`` (n_cells x 4), padded to ``horizon`` steps.

        Returns ``cells``, ``actions``, ``rewards``, ``next_cells``, ``dones`` (episode ends after this step),
        ``mask`` (step taken), each (n, horizon), ``returns`` (n,) (undiscounted), and per episode the number
        of guarded-cell ``entries`` and penalty ``hits`` (n,). ``p``: an optional per-episode guard
        probability (n,) replacing ``self.p`` (a sampler over the environment's randomness, as CeSoR's cross
        entropy module uses); the random stream is the same either way.
        """
        H = self.horizon
        s = torch.full((n,), self.start, dtype=torch.long)
        alive = torch.ones(n, dtype=torch.bool)
        pg = self.p if p is None else p
        out = {
            k: [] for k in ("cells", "actions", "rewards", "next_cells", "dones", "mask", "entered", "hit")
        }
        for t in range(H):
            a = torch.multinomial(probs[s], 1, generator=generator).squeeze(1)
            s2 = self.next_cell[s, a]
            hit = self.guarded[s2] & (torch.rand(n, generator=generator, dtype=probs.dtype) < pg)
            r = -1.0 - self.penalty * hit.to(probs.dtype)
            done = (s2 == self.goal) | (t == H - 1)
            vals = (s, a, r * alive, s2, done & alive, alive.clone(), self.guarded[s2] & alive, hit & alive)
            for k, v in zip(out, vals, strict=True):
                out[k].append(v)
            alive = alive & ~done
            s = s2
        res = {k: torch.stack(v, 1) for k, v in out.items()}
        res["returns"] = res["rewards"].sum(1)
        entered = res.pop("entered")
        res["entries"] = entered.sum(1)
        res["hits"] = res.pop("hit").sum(1)
        return res


def exact_return_law(env: GuardedGrid, probs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact law of the undiscounted return of the tabular policy ``probs``: (sorted values, probs).

    Forward DP over (cell, number of penalties), all cells and actions at once per step; the mass absorbed
    at ``G`` after ``t + 1`` moves with ``k`` penalties has return ``-(t + 1) - penalty k``, the mass left
    at the horizon ``-H - penalty k``.
    """
    H, n = env.horizon, env.n_cells
    dt = probs.dtype
    dist = torch.zeros(n, H + 1, dtype=dt)  # (cell, number of penalties)
    dist[env.start, 0] = 1.0
    tgt = env.next_cell.reshape(-1)  # (cell, action) -> next cell, flattened
    pen = (env.guarded.to(dt)[env.next_cell] * env.p).reshape(-1, 1)
    absorbed = torch.zeros(H + 1, H + 1, dtype=dt)  # (moves, penalties) at G; row H: time-outs
    for t in range(H):
        m = (dist[:, None, :] * probs[:, :, None]).reshape(n * 4, H + 1)
        moved = m * (1 - pen)
        moved[:, 1:] += (m * pen)[:, :-1]
        new = torch.zeros_like(dist).index_add_(0, tgt, moved)
        absorbed[t] = new[env.goal]
        new[env.goal] = 0.0
        dist = new
    absorbed[H] += dist.sum(0)
    steps = torch.arange(1, H + 2, dtype=dt).clamp_max(H)  # the last row: time-outs after H moves
    value = -steps[:, None] - env.penalty * torch.arange(H + 1, dtype=dt)[None, :]
    keep = absorbed > 0
    vals, inv = torch.unique(value[keep], sorted=True, return_inverse=True)
    return vals, torch.zeros_like(vals).index_add_(0, inv, absorbed[keep])


def safe_probability(env: GuardedGrid, probs: torch.Tensor) -> torch.Tensor:
    """Exact probability that the policy reaches ``G`` within the horizon without entering a guarded cell."""
    clean = torch.zeros(env.n_cells, dtype=probs.dtype)
    clean[env.start] = 1.0
    safe = clean.new_zeros(())
    keep = (~env.guarded).to(probs.dtype)
    tgt = env.next_cell.reshape(-1)
    for _ in range(env.horizon):
        new = torch.zeros_like(clean).index_add_(0, tgt, (clean[:, None] * probs).reshape(-1)) * keep
        safe = safe + new[env.goal]
        new[env.goal] = 0.0
        clean = new
    return safe
