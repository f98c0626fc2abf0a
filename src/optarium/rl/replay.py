r"""The replay-buffer policy-gradient loop of the GIPO script, scaled down, for any discrete-action env.

Loop (official GIPO code, ``metaworld_ppo_discrete_simple_complete.py``, read only; :mod:`optarium.rl.gipo`):
per iteration roll out ``rollout_steps`` transitions with the current policy, compute GAE
(:func:`optarium.rl.gae`) with the values of that time, push (obs, action, old logits, advantage, return
target) into a FIFO buffer of ``buffer_size`` transitions (the staleness knob). Then ``sample_rounds``
minibatches of ``min(minibatch, |buffer|)`` transitions drawn uniformly without replacement, each reused
``reuse`` times; the actor term is active on every ``actor_every``-th reuse with scale :math:`1/\sqrt{k+1}`;
the loss is actor scale x (surrogate + ``kl_coef`` KL(pi_old || pi)) + 0.5 MSE(value, target); advantages
standardised per minibatch; AdamW (policy ``lr``, value ``lr_value``), gradient-norm clip 1.0.

Environments: ``env_fn()`` returns a gymnasium ``Env`` (reset by hand at an episode end) or a gymnasium
``VectorEnv`` (e.g. ``gymnasium.make_vec("CartPole-v1", num_envs=8)``, numpy-vectorised), stepped as one
batch: ``rollout_steps / num_envs`` vector steps per iteration. With the ``NEXT_STEP`` autoreset of
gymnasium 1.x (the default) the step after an episode end only resets that sub-environment; that transition
is not a transition of the MDP and is left out of GAE and of the buffer (it still counts as an env step);
``SAME_STEP`` autoreset is supported too, ``DISABLED`` is not.

Deviations from the script: no cosine learning-rate schedule or warm-up; separate policy and value networks
(the code shares an encoder); a ``reward_scale`` argument (the code's 0.001 is for MetaWorld's rewards); a
time-limit truncation is treated as an episode end (no bootstrap), as the script does.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from optarium._core.result import Result, Trace
from optarium._core.seeding import derive_seed
from optarium._core.validation import check_int
from optarium.rl.advantages import gae

__all__ = ["last_k_mean", "train_replay_pg"]


def last_k_mean(returns: list[float] | tuple[float, ...], k: int = 20) -> float:
    """Mean of the last ``k`` episode returns (all of them if fewer; NaN if none): the spec's final metric.

    >>> last_k_mean([1.0, 2.0, 3.0], k=2)
    2.5
    """
    k = check_int("k", k, minimum=1)
    tail = list(returns)[-k:]
    return sum(tail) / len(tail) if tail else float("nan")


class _Batched:
    """A single gymnasium ``Env`` seen as a batch of one (reset by hand: ``SAME_STEP`` semantics)."""

    num_envs = 1
    next_step = False

    def __init__(self, env: Any) -> None:
        self.env = env

    def reset(self, seed: int) -> np.ndarray:
        obs, _ = self.env.reset(seed=seed)
        return np.asarray(obs, dtype=np.float32).reshape(1, -1)

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        obs, rew, term, trunc, _ = self.env.step(int(actions[0]))
        done = bool(term or trunc)
        if done:
            obs, _ = self.env.reset()
        return (
            np.asarray(obs, dtype=np.float32).reshape(1, -1),
            np.asarray([rew], dtype=np.float64),
            np.asarray([done]),
        )


class _Vector:
    """A gymnasium ``VectorEnv``; ``next_step``: NEXT_STEP autoreset (the step after a done is a reset)."""

    def __init__(self, env: Any) -> None:
        from gymnasium.vector import AutoresetMode

        mode = env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
        mode = AutoresetMode(mode) if isinstance(mode, str) else mode
        if mode == AutoresetMode.DISABLED:
            raise ValueError("env_fn: a VectorEnv with autoreset_mode DISABLED is not supported")
        self.env, self.num_envs = env, int(env.num_envs)
        self.next_step = mode == AutoresetMode.NEXT_STEP

    def reset(self, seed: int) -> np.ndarray:
        obs, _ = self.env.reset(seed=seed)
        return np.asarray(obs, dtype=np.float32).reshape(self.num_envs, -1)

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        obs, rew, term, trunc, _ = self.env.step(actions)
        return (
            np.asarray(obs, dtype=np.float32).reshape(self.num_envs, -1),
            np.asarray(rew, dtype=np.float64),
            np.logical_or(term, trunc),
        )


def _wrap(env: Any) -> _Batched | _Vector:
    return _Vector(env) if hasattr(env, "num_envs") else _Batched(env)


def train_replay_pg(
    env_fn: Callable[[], Any],
    policy: torch.nn.Module,
    value_fn: torch.nn.Module,
    loss: Callable[..., Any],
    *,
    buffer_size: int = 20_000,
    rollout_steps: int = 500,
    sample_rounds: int = 10,
    minibatch: int = 512,
    reuse: int = 10,
    actor_every: int = 10,
    kl_coef: float = 0.1,
    gamma: float = 0.99,
    lam: float = 0.95,
    lr: float = 3e-4,
    lr_value: float = 3e-3,
    reward_scale: float = 1.0,
    iters: int = 200,
    seed: int = 0,
) -> Result:
    """Train ``policy`` (obs -> logits) and ``value_fn`` (obs -> value) with the surrogate ``loss``.

    ``env_fn`` returns a gymnasium ``Env`` or ``VectorEnv`` (module docstring); ``rollout_steps`` must be a
    multiple of its ``num_envs``. Actions are sampled with a generator seeded from ``seed`` (as are the
    minibatches and the env reset), so a run is deterministic given the networks' initial weights.

    Returns a :class:`~optarium._core.result.Result`: ``value`` is the mean undiscounted return of the last
    20 finished episodes, ``extras`` holds ``episode_returns`` (every finished episode, in order) and
    ``env_steps``; ``history`` has, per iteration (step = env steps so far): ``episode_return`` (mean over
    the episodes finished in that rollout, NaN if none), ``return_last20`` (:func:`last_k_mean` of all
    episodes so far), ``episodes`` (count so far), ``zero_grad_frac`` (share of the actor minibatch whose
    surrogate gradient is exactly zero, from the loss's diagnostics, NaN if it reports none) and
    ``mean_abs_log_ratio`` (both averaged over the actor steps), ``loss``.
    """
    for name, v in (
        ("buffer_size", buffer_size),
        ("rollout_steps", rollout_steps),
        ("sample_rounds", sample_rounds),
        ("minibatch", minibatch),
        ("reuse", reuse),
        ("actor_every", actor_every),
        ("iters", iters),
    ):
        check_int(name, v, minimum=1)
    if not callable(loss):
        raise TypeError(f"loss: must be callable, got {type(loss).__name__}")
    t0 = time.perf_counter()
    gen = torch.Generator().manual_seed(derive_seed(seed, "replay-sample"))
    act_gen = torch.Generator().manual_seed(derive_seed(seed, "replay-actions"))
    env = _wrap(env_fn())
    n_envs = env.num_envs
    if rollout_steps % n_envs:
        raise ValueError(f"rollout_steps: must be a multiple of num_envs={n_envs}, got {rollout_steps}")
    horizon = rollout_steps // n_envs
    obs = env.reset(seed=derive_seed(seed, "replay-env") % 2**31)
    opt = torch.optim.AdamW(
        [{"params": policy.parameters(), "lr": lr}, {"params": value_fn.parameters(), "lr": lr_value}],
        weight_decay=0.0,
    )
    params = [*policy.parameters(), *value_fn.parameters()]
    buf: dict[str, torch.Tensor] = {}
    rows: list[dict[str, float]] = []
    episodes: list[float] = []
    ep_ret = np.zeros(n_envs)
    prev_done = np.zeros(n_envs, dtype=bool)  # NEXT_STEP autoreset: this step only resets that env
    steps = 0
    for _ in range(iters):
        o_l, a_l, lg_l, r_l, d_l, v_l, ok_l = [], [], [], [], [], [], []
        n_before = len(episodes)
        with torch.no_grad():
            for _t in range(horizon):
                x = torch.from_numpy(obs)
                logits = policy(x)
                a = torch.multinomial(torch.softmax(logits, -1), 1, generator=act_gen)[:, 0]
                v = value_fn(x).reshape(n_envs)
                nobs, rew, done = env.step(a.numpy())
                valid = ~prev_done if env.next_step else np.ones(n_envs, bool)
                ep_ret += np.where(valid, rew, 0.0)
                ended = done & valid
                episodes.extend(ep_ret[ended].tolist())  # episode ends, in env order
                ep_ret[ended] = 0.0
                ok = torch.from_numpy(valid)
                o_l.append(x)
                a_l.append(a)
                lg_l.append(logits)
                # a reset step: reward 0, value 0, done 1 -> advantage 0 and no leak across the boundary
                r_l.append(torch.from_numpy(np.where(valid, rew * reward_scale, 0.0)).float())
                v_l.append(torch.where(ok, v, torch.zeros_like(v)))
                d_l.append(torch.from_numpy(done | ~valid).float())
                ok_l.append(ok)
                if env.next_step:
                    prev_done = ended
                obs = nobs
            last_v = value_fn(torch.from_numpy(obs)).reshape(n_envs)
            adv, ret = gae(torch.stack(r_l), torch.stack(v_l), torch.stack(d_l), last_v, gamma=gamma, lam=lam)
        steps += rollout_steps
        keep = torch.stack(ok_l).reshape(-1)  # (T, N) flattened time-major, valid transitions only
        new = {
            "obs": torch.stack(o_l).reshape(horizon * n_envs, -1)[keep],
            "act": torch.stack(a_l).reshape(-1)[keep],
            "logits": torch.stack(lg_l).reshape(horizon * n_envs, -1)[keep],
            "adv": adv.reshape(-1)[keep],
            "ret": ret.reshape(-1)[keep],
        }
        buf = {k: torch.cat([buf[k], v])[-buffer_size:] if buf else v for k, v in new.items()}
        n = buf["act"].numel()
        zg, alr, losses, n_actor = 0.0, 0.0, 0.0, 0
        for _r in range(sample_rounds):
            idx = torch.randperm(n, generator=gen)[: min(minibatch, n)]
            b = {k: v[idx] for k, v in buf.items()}
            a_std = b["adv"].std() if idx.numel() > 1 else torch.tensor(1.0)
            a_hat = (b["adv"] - b["adv"].mean()) / (a_std + 1e-8)
            old_lp_all = torch.log_softmax(b["logits"], -1)
            old_lp = old_lp_all.gather(1, b["act"][:, None])[:, 0]
            for k in range(reuse):
                v_loss = 0.5 * (value_fn(b["obs"]).reshape(-1) - b["ret"]).pow(2).mean()
                total = v_loss
                if k % actor_every == 0:
                    lp_all = torch.log_softmax(policy(b["obs"]), -1)
                    lp = lp_all.gather(1, b["act"][:, None])[:, 0]
                    pl, diag = loss(lp, old_lp, a_hat)
                    kl = (old_lp_all.exp() * (old_lp_all - lp_all)).sum(-1).mean()
                    total = total + (pl + kl_coef * kl) / math.sqrt(k + 1)
                    zg += float(diag.get("zero_grad_frac", float("nan")))
                    alr += float(diag.get("mean_abs_log_ratio", (lp - old_lp).detach().abs().mean()))
                    n_actor += 1
                opt.zero_grad(set_to_none=True)
                total.backward()
                torch.nn.utils.clip_grad_norm_(params, 1.0)
                opt.step()
                losses += float(total.detach())
        done_now = episodes[n_before:]
        rows.append(
            {
                "step": steps,
                "episode_return": sum(done_now) / len(done_now) if done_now else float("nan"),
                "return_last20": last_k_mean(episodes, 20),
                "episodes": float(len(episodes)),
                "zero_grad_frac": zg / max(1, n_actor),
                "mean_abs_log_ratio": alr / max(1, n_actor),
                "loss": losses / (sample_rounds * reuse),
            }
        )
    return Result(
        x=policy,
        value=last_k_mean(episodes, 20),
        status="max_iter",
        n_iter=iters,
        history=Trace.from_rows(rows),
        wall_time_s=time.perf_counter() - t0,
        extras={"episode_returns": tuple(episodes), "env_steps": steps},
    )
