r"""The replay-buffer policy-gradient loop of the GIPO script, scaled down, for any discrete-action env.

Loop (official GIPO code, ``metaworld_ppo_discrete_simple_complete.py``, read only; :mod:`optarium.rl.gipo`):
per iteration roll out ``rollout_steps`` steps with the current policy, compute GAE (:func:`optarium.rl.gae`)
with the values of that time, push (obs, action, old logits, advantage, return target) into a FIFO buffer of
``buffer_size`` transitions (the staleness knob). Then ``sample_rounds`` minibatches of
``min(minibatch, |buffer|)`` transitions drawn uniformly without replacement, each reused ``reuse`` times; the
actor term is active on every ``actor_every``-th reuse with scale :math:`1/\sqrt{k+1}`; the loss is
actor scale x (surrogate + ``kl_coef`` KL(pi_old || pi)) + 0.5 MSE(value, target); advantages standardised per
minibatch; AdamW (policy ``lr``, value ``lr_value``), gradient-norm clip 1.0.

Deviations from the script: no cosine learning-rate schedule or warm-up; separate policy and value networks
(the code shares an encoder); a ``reward_scale`` argument (the code's 0.001 is for MetaWorld's rewards).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import torch

from optarium._core.result import Result, Trace
from optarium._core.seeding import derive_seed
from optarium._core.validation import check_int
from optarium.rl.advantages import gae

__all__ = ["train_replay_pg"]


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

    Returns a :class:`~optarium._core.result.Result` whose ``history`` has, per iteration (step = env steps):
    ``episode_return`` (mean undiscounted return of the episodes finished in that rollout, NaN if none),
    ``zero_grad_frac`` and ``mean_abs_log_ratio`` (averaged over the actor steps), ``loss``.
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
    torch.manual_seed(derive_seed(seed, "replay-actions"))
    env = env_fn()
    obs, _ = env.reset(seed=derive_seed(seed, "replay-env") % 2**31)
    opt = torch.optim.AdamW(
        [{"params": policy.parameters(), "lr": lr}, {"params": value_fn.parameters(), "lr": lr_value}],
        weight_decay=0.0,
    )
    params = [*policy.parameters(), *value_fn.parameters()]
    buf: dict[str, torch.Tensor] = {}
    rows: list[dict[str, float]] = []
    ep_ret, steps = 0.0, 0
    for _ in range(iters):
        o_l, a_l, lg_l, r_l, d_l, v_l, finished = [], [], [], [], [], [], []
        with torch.no_grad():
            for _t in range(rollout_steps):
                x = torch.as_tensor(obs, dtype=torch.float32).reshape(-1)
                logits = policy(x[None])[0]
                a = int(torch.distributions.Categorical(logits=logits).sample())
                nobs, rew, term, trunc, _ = env.step(a)
                o_l.append(x)
                a_l.append(a)
                lg_l.append(logits)
                r_l.append(float(rew) * reward_scale)
                v_l.append(float(value_fn(x[None]).reshape(())))
                ep_ret += float(rew)
                # a truncation is treated as an episode end (no bootstrap), a small bias the script shares
                d_l.append(float(term or trunc))
                if term or trunc:
                    finished.append(ep_ret)
                    ep_ret = 0.0
                    nobs, _ = env.reset()
                obs = nobs
            last_v = value_fn(torch.as_tensor(obs, dtype=torch.float32).reshape(1, -1)).reshape(())
            adv, ret = gae(
                torch.tensor(r_l), torch.tensor(v_l), torch.tensor(d_l), last_v, gamma=gamma, lam=lam
            )
        steps += rollout_steps
        new = {
            "obs": torch.stack(o_l),
            "act": torch.tensor(a_l),
            "logits": torch.stack(lg_l),
            "adv": adv,
            "ret": ret,
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
                    zg += float(diag.get("zero_grad_frac", diag.get("clip_fraction", float("nan"))))
                    alr += float(diag.get("mean_abs_log_ratio", (lp - old_lp).detach().abs().mean()))
                    n_actor += 1
                opt.zero_grad(set_to_none=True)
                total.backward()
                torch.nn.utils.clip_grad_norm_(params, 1.0)
                opt.step()
                losses += float(total.detach())
        rows.append(
            {
                "step": steps,
                "episode_return": sum(finished) / len(finished) if finished else float("nan"),
                "zero_grad_frac": zg / max(1, n_actor),
                "mean_abs_log_ratio": alr / max(1, n_actor),
                "loss": losses / (sample_rounds * reuse),
            }
        )
    history = Trace.from_rows(rows)
    rets = [r["episode_return"] for r in rows if r["episode_return"] == r["episode_return"]]
    return Result(
        x=policy,
        value=rets[-1] if rets else float("nan"),
        status="max_iter",
        n_iter=iters,
        history=history,
        wall_time_s=time.perf_counter() - t0,
    )
