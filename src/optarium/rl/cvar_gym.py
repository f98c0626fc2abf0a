"""The guarded-shortcut gridworld as a ``gymnasium`` 1.4 environment (the ``rl`` extra; imported on use).

:class:`GuardedGridEnv` steps one episode of :class:`optarium.rl.cvar_envs.GuardedGrid` (the same successor
table, guarded cells, penalty and horizon; the batched torch version is what the training loop uses, this one
is for users' own loops). ``Discrete(22)`` observations (free cells, row-major), ``Discrete(4)`` actions
(N, E, S, W); ``info["remaining"]`` is the remaining time ``H - t`` (the quantile critic's second input).
The guard penalty is drawn from ``self.np_random`` (seeded by ``reset(seed=...)``);
``gymnasium.utils.env_checker.check_env`` passes.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
from gymnasium import spaces

from optarium.rl.cvar_envs import GuardedGrid

__all__ = ["GuardedGridEnv"]


class GuardedGridEnv(gym.Env):
    """One episode at a time of the guarded-shortcut gridworld (see the module docstring)."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, p: float = 0.05, penalty: float = 30.0, horizon: int = 40) -> None:
        self.grid = GuardedGrid(p=p, penalty=penalty, horizon=horizon)
        self.observation_space = spaces.Discrete(self.grid.n_cells)
        self.action_space = spaces.Discrete(4)
        self._next = self.grid.next_cell.numpy()
        self._guarded = self.grid.guarded.numpy()
        self._state = self.grid.start
        self._t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[int, dict]:
        super().reset(seed=seed)
        self._state, self._t = self.grid.start, 0
        return self._state, {"remaining": self.grid.horizon}

    def step(self, action: Any) -> tuple[int, float, bool, bool, dict]:
        if not self.action_space.contains(action):
            raise ValueError(f"action: must be in Discrete(4), got {action!r}")
        self._state = int(self._next[self._state, int(action)])
        self._t += 1
        reward = -1.0
        if self._guarded[self._state] and self.np_random.random() < self.grid.p:
            reward -= self.grid.penalty
        terminated = self._state == self.grid.goal
        truncated = (not terminated) and self._t >= self.grid.horizon
        return self._state, reward, terminated, truncated, {"remaining": self.grid.horizon - self._t}
