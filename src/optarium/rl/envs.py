"""Environments of the RL specs as ``gymnasium`` 1.4 environments (the ``rl`` extra; imported on use).

- :class:`GridWorld2x2Env` (GIPO's analytic study, spec ``gipo.md``): ``Discrete(4)`` states (row-major, start
  0 top-left, goal 3 bottom-right), ``Discrete(4)`` actions (up, right, down, left), a move into a wall stays
  put, reward 1 on entering the goal, which terminates the episode; truncated after ``max_steps``. Its
  dynamics are those of :mod:`optarium.problems.gridworld` (exact evaluation), which the tests check.

gymnasium conventions: ``reset(seed=..., options=None) -> (obs, info)``, ``step(a) -> (obs, reward,
terminated, truncated, info)``, seeding through ``self.np_random`` (unused here: the dynamics are
deterministic), ``gymnasium.utils.env_checker.check_env`` passes.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
from gymnasium import spaces

__all__ = ["GridWorld2x2Env", "make_gridworld"]


class GridWorld2x2Env(gym.Env):
    """The 2x2 GridWorld (see the module docstring)."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, max_steps: int = 100) -> None:
        if not isinstance(max_steps, int) or isinstance(max_steps, bool) or max_steps < 1:
            raise ValueError(f"max_steps: must be a positive int, got {max_steps!r}")
        from optarium.problems.gridworld import transitions

        self.observation_space = spaces.Discrete(4)
        self.action_space = spaces.Discrete(4)
        self.max_steps = max_steps
        self._next = transitions().argmax(-1).numpy()  # deterministic successor table (4, 4)
        self._state = 0
        self._t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[int, dict]:
        super().reset(seed=seed)
        self._state, self._t = 0, 0
        return self._state, {}

    def step(self, action: Any) -> tuple[int, float, bool, bool, dict]:
        if not self.action_space.contains(action):
            raise ValueError(f"action: must be in Discrete(4), got {action!r}")
        self._state = int(self._next[self._state, int(action)])
        self._t += 1
        terminated = self._state == 3
        reward = 1.0 if terminated else 0.0
        return self._state, reward, terminated, (not terminated) and self._t >= self.max_steps, {}


def make_gridworld(max_steps: int = 100) -> GridWorld2x2Env:
    """A :class:`GridWorld2x2Env` (an ``env_fn`` for vectorised wrappers)."""
    return GridWorld2x2Env(max_steps=max_steps)
