r"""Segment-PO (SAPO): does segment-level credit assignment beat token-level PPO on step-structured reasoning?

Paper: Gao et al., "Segment-Aligned Policy Optimization for Multi-Modal Reasoning", ICML 2026,
arXiv:2605.01327 (method in :mod:`optarium.rl.segment_po`).

**Problem** (spec ``segment-po.md``, laptop version): synthetic modular arithmetic solved step by step
(:mod:`optarium.problems.step_arithmetic`, e.g. ``7+5*3=`` -> ``7+5=2;2*3=6;A6``), reward 1 for the right
final answer. Policy: :class:`optarium.problems.tiny_lm.TinyLM` (d 64, 2 layers, 2 heads, vocabulary 19),
warm-started by SFT on traces whose steps are wrong with probability ``error_prob`` (one SFT model per seed,
cached per process and shared by the methods); critic: a copy of the SFT trunk with a zero-initialised scalar
head on the final hidden state (read by a forward hook; ``TinyLM`` has no hidden-state output). Generation
re-runs the full forward per token (no KV cache; 15 new tokens, cheap at this size).

**Methods** (same batch of 64 prompts per step, same tokens, 2 full-batch epochs, eps 0.2, dual clip 3,
gamma 1, actor lr 1e-4, critic lr 2e-4, KL-in-reward 0.001 against the SFT model, advantages whitened and
clamped to 5): ``ppo`` token-level GAE (lambda 0.95) and token ratios, value loss on every token; ``sapo``
entropy top-30 % segment ends, segment GAE (lambda 0.99, ``value_at="start"``), segment ratios, value loss at
segment boundaries; ``grpo`` (full only) groups of 8 responses of 8 prompts, group-normalised outcome
advantages, token ratios, no critic.

**Rule** (stated up front, the spec's): greedy accuracy of the final policy on the same held-out problems
(500 quick / 1000 full), SAPO - PPO paired per problem with a paired bootstrap 95 % CI (2000 resamples,
fixed seed), seeds pooled. Quick: reproduced if the CI lies above 0, not reproduced if below 0, else
inconclusive. Full: reproduced if SAPO beats both PPO and GRPO with CIs excluding 0 and margins >= 3 points;
not reproduced if either CI lies entirely <= 0; else inconclusive. Reported beside: the initial (SFT)
accuracy, the critic losses and their variance over the run, segments per response.

**Scaled down / missing**: 2-operation problems at quick (3-5 in full), 40 RL steps; no multi-modal model;
the critic comparison on common Monte-Carlo targets, VC-PPO and the SFT error-rate calibration are not run.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import torch
import torch.nn.functional as F

from optarium._core.seeding import derive_seed
from optarium.harness.experiment import Experiment, Verdict, register

__all__ = ["CONFIGS", "EXPERIMENT", "decide", "plot", "run"]

CLAIM = (
    "Segment-level credit assignment with segment importance sampling (SAPO) reaches a higher accuracy than "
    "token-level PPO and sequence-level GRPO on step-structured reasoning."
)
RULE = (
    "Final greedy accuracy on the same held-out problems, SAPO - baseline paired per problem (paired "
    "bootstrap 95% CI, seeds pooled). Quick: reproduced if the SAPO - PPO CI lies above 0, not reproduced if "
    "below 0, else inconclusive. Full: reproduced if SAPO beats PPO and GRPO with CIs excluding 0 and "
    "margins >= 3 points; not reproduced if either CI lies entirely <= 0; else inconclusive."
)
METHODS = ("sapo", "ppo", "grpo")
BASELINES = ("ppo", "grpo")
_BITS = 20  # correctness bits per logged float (exact in float64)

_BASE: dict[str, Any] = {
    "min_ops": 2,
    "max_ops": 2,
    "error_prob": 0.25,
    "sft_steps": 300,
    "sft_lr": 1e-3,
    "rl_steps": 40,
    "batch": 64,
    "group": 8,
    "epochs": 2,
    "clip_eps": 0.2,
    "dual_clip": 3.0,
    "actor_lr": 1e-4,
    "critic_lr": 2e-4,
    "kl_coef": 0.001,
    "topk_percent": 30.0,
    "lam_sapo": 0.99,
    "lam_ppo": 0.95,
    "n_eval": 500,
    "eval_seed": 12345,
    "log_every": 10,
}
CONFIGS: dict[str, dict[str, Any]] = {
    "smoke": {
        **_BASE,
        "sft_steps": 20,
        "rl_steps": 2,
        "n_eval": 40,
        "methods": ["sapo", "ppo"],
        "seeds": 1,
    },
    "quick": {**_BASE, "methods": ["sapo", "ppo"], "seeds": 1},
    "full": {
        **_BASE,
        "min_ops": 3,
        "max_ops": 5,
        "sft_steps": 2000,
        "rl_steps": 200,
        "n_eval": 1000,
        "log_every": 25,
        "methods": list(METHODS),
        "seeds": 3,
    },
}


def _config(c: Mapping[str, Any]):
    from optarium.problems import step_arithmetic as sa
    from optarium.problems.tiny_lm import QUICK

    return replace(
        QUICK, vocab_size=len(sa.VOCAB), context=2 * int(c["max_ops"]) + 3 + 6 * int(c["max_ops"]) + 3
    )


def _response_len(c: Mapping[str, Any]) -> int:
    return 6 * int(c["max_ops"]) + 3


@functools.lru_cache(maxsize=4)
def _sft(seed: int, key: tuple) -> Any:
    """The SFT policy of a seed (deterministic, cached per process)."""
    from optarium.problems import step_arithmetic as sa
    from optarium.problems.tiny_lm import build_tiny_lm

    c = dict(key)
    model = build_tiny_lm(_config(c), derive_seed(seed, "segment-po-init"))
    opt = torch.optim.AdamW(model.parameters(), lr=float(c["sft_lr"]), weight_decay=0.0)
    gen = torch.Generator().manual_seed(derive_seed(seed, "segment-po-sft"))
    for _ in range(int(c["sft_steps"])):
        b = sa.sample_problems(int(c["batch"]), gen, min_ops=int(c["min_ops"]), max_ops=int(c["max_ops"]))
        tr = sa.traces(b, gen, error_prob=float(c["error_prob"]))
        seq = torch.cat([b.prompts, tr], 1)
        tgt = seq[:, 1:].clone()
        tgt[:, : b.prompts.shape[1] - 1] = sa.PAD  # loss on the response only
        logits = model(seq[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), ignore_index=sa.PAD)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


class _Critic(torch.nn.Module):
    """A TinyLM trunk with a scalar head on the final (normed) hidden state."""

    def __init__(self, trunk: Any) -> None:
        super().__init__()
        self.trunk = trunk
        self.head = torch.nn.Linear(trunk.config.d_model, 1)
        torch.nn.init.zeros_(self.head.weight)
        torch.nn.init.zeros_(self.head.bias)
        self._h: torch.Tensor | None = None
        trunk.norm.register_forward_hook(lambda _m, _i, out: setattr(self, "_h", out))

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        self.trunk(idx)
        assert self._h is not None
        return self.head(self._h).squeeze(-1)


@torch.no_grad()
def _generate(model: Any, prompts: torch.Tensor, n_new: int, gen: torch.Generator | None) -> tuple:
    """Sample (``gen``) or greedy-decode (``None``) ``n_new`` tokens; returns (tokens, logp, entropy)."""
    x = prompts
    lps, ents, toks = [], [], []
    for _ in range(n_new):
        logits = model(x)[:, -1].float()
        logp = logits.log_softmax(-1)
        nxt = (
            logits.argmax(-1, keepdim=True)
            if gen is None
            else torch.multinomial(logp.exp(), 1, generator=gen)
        )
        toks.append(nxt)
        lps.append(logp.gather(1, nxt))
        ents.append(-(logp.exp() * logp).sum(-1, keepdim=True))
        x = torch.cat([x, nxt], 1)
    return torch.cat(toks, 1), torch.cat(lps, 1), torch.cat(ents, 1)


def _response_mask(tokens: torch.Tensor) -> torch.Tensor:
    from optarium.problems import step_arithmetic as sa

    eos = (tokens == sa.EOS).long()
    before = eos.cumsum(1) - eos  # EOS tokens seen strictly before
    return (before == 0).to(torch.float32)


def _token_logp(model: Any, seq: torch.Tensor, p: int) -> torch.Tensor:
    logits = model(seq[:, :-1])[:, p - 1 :]
    return logits.log_softmax(-1).gather(-1, seq[:, p:].unsqueeze(-1)).squeeze(-1)


def _accuracy_bits(model: Any, c: Mapping[str, Any]) -> torch.Tensor:
    from optarium.problems import step_arithmetic as sa

    gen = torch.Generator().manual_seed(int(c["eval_seed"]))
    b = sa.sample_problems(int(c["n_eval"]), gen, min_ops=int(c["min_ops"]), max_ops=int(c["max_ops"]))
    toks, _, _ = _generate(model, b.prompts, _response_len(c), None)
    return sa.reward(toks, b.answer).bool()


def _pack(bits: torch.Tensor) -> dict[str, float]:
    out = {}
    for j in range(0, bits.numel(), _BITS):
        chunk = bits[j : j + _BITS].tolist()
        out[f"ok_{j // _BITS:03d}"] = float(sum(int(v) << i for i, v in enumerate(chunk)))
    return out


def _unpack(rec: Mapping[str, Any], n: int) -> list[int]:
    bits = []
    for j in range(0, n, _BITS):
        v = int(rec[f"ok_{j // _BITS:03d}"])
        bits += [(v >> i) & 1 for i in range(min(_BITS, n - j))]
    return bits


def run(ctx: Any, method: str, seed: int, config: Mapping[str, Any]) -> None:
    """SFT (cached), then ``rl_steps`` RL steps of ``method``; final per-problem greedy correctness."""
    from optarium.problems import step_arithmetic as sa
    from optarium.rl import segment_po as sp
    from optarium.rl.advantages import group_normalized_advantages

    c = config
    key = tuple(sorted((k, v) for k, v in c.items() if k not in ("methods", "seeds")))
    sft = _sft(int(seed), key)
    with ctx.evaluating():
        ok0 = _accuracy_bits(sft, c)
    policy = copy.deepcopy(sft).train()
    critic = _Critic(copy.deepcopy(sft).train()) if method != "grpo" else None
    opt_a = torch.optim.Adam(policy.parameters(), lr=float(c["actor_lr"]))
    opt_c = torch.optim.Adam(critic.parameters(), lr=float(c["critic_lr"])) if critic is not None else None
    gen = torch.Generator().manual_seed(derive_seed(seed, "segment-po-rl", method))
    n_resp = _response_len(c)
    closses: list[float] = []
    for step in range(int(c["rl_steps"])):
        if method == "grpo":
            b = sa.sample_problems(int(c["batch"]) // int(c["group"]), gen, min_ops=int(c["min_ops"]),
                                   max_ops=int(c["max_ops"]))  # fmt: skip
            rep = torch.arange(b.prompts.shape[0]).repeat_interleave(int(c["group"]))
            prompts, answer = b.prompts[rep], b.answer[rep]
        else:
            b = sa.sample_problems(int(c["batch"]), gen, min_ops=int(c["min_ops"]), max_ops=int(c["max_ops"]))
            prompts, answer = b.prompts, b.answer
        policy.eval()
        toks, old, ent = _generate(policy, prompts, n_resp, gen)
        policy.train()
        mask = _response_mask(toks)
        seq = torch.cat([prompts, toks], 1)
        p = prompts.shape[1]
        r = sa.reward(toks, answer)
        with torch.no_grad():
            ref = _token_logp(sft, seq, p)
        last = mask.sum(1).long() - 1
        tok_r = -float(c["kl_coef"]) * (old - ref) * mask
        if method == "grpo":
            adv = group_normalized_advantages(r, int(c["group"])).unsqueeze(1).expand_as(mask) * mask
            ends = None
        else:
            tok_r[torch.arange(len(r)), last] += r
            with torch.no_grad():
                values = critic(seq[:, :-1])[:, p - 1 :]
            if method == "sapo":
                ends = sp.entropy_segments(ent, mask, float(c["topk_percent"]))
                lam = float(c["lam_sapo"])
            else:
                ends = mask > 0
                lam = float(c["lam_ppo"])
            adv, ret = sp.segment_gae(tok_r, values, ends, mask, gamma=1.0, lam=lam)
        for _ in range(int(c["epochs"])):
            lp = _token_logp(policy, seq, p)
            loss, diag = sp.segment_policy_loss(
                lp, old, adv, mask, ends=ends if method == "sapo" else None, clip_eps=float(c["clip_eps"]),
                dual_clip=float(c["dual_clip"]),
            )  # fmt: skip
            opt_a.zero_grad()
            loss.backward()
            opt_a.step()
            if critic is not None:
                v = critic(seq[:, :-1])[:, p - 1 :]
                vloss = sp.segment_value_loss(v, ret, ends, mask)
                opt_c.zero_grad()
                vloss.backward()
                opt_c.step()
                closses.append(vloss.item())
        if (step + 1) % int(c["log_every"]) == 0 or step == 0:
            n_seg = diag["segments_per_sequence"] if method == "sapo" else mask.sum(1).mean()
            rec = {"reward": float(r.mean()), "policy_loss": loss.item(), "segments": float(n_seg)}
            if closses:
                rec["critic_loss"] = closses[-1]
            ctx.log(step + 1, **rec)
    with ctx.evaluating():
        ok = _accuracy_bits(policy.eval(), c)
        out = {"acc": float(ok.float().mean()), "acc_sft": float(ok0.float().mean()), **_pack(ok)}
        if closses:
            t = torch.tensor(closses)
            out["critic_loss_mean"] = float(t.mean())
            out["critic_loss_var"] = float(t.var()) if len(closses) > 1 else 0.0
        ctx.log(int(c["rl_steps"]), **out)


def _final(records: Sequence[Mapping[str, Any]], method: str) -> dict[int, Mapping[str, Any]]:
    out: dict[int, Mapping[str, Any]] = {}
    for r in records:
        if r.get("method") == method and r.get("status", "done") == "done" and r.get("acc") is not None:
            out[int(r["seed"])] = r
    return out


def _paired_ci(a: list[list[int]], b: list[list[int]], seed: int = 0) -> tuple[float, float, float]:
    """Mean of a - b over problems (seeds pooled) and a paired bootstrap 95% CI over problems."""
    d = torch.tensor([x - y for ra, rb in zip(a, b, strict=True) for x, y in zip(ra, rb, strict=True)],
                     dtype=torch.float64)  # fmt: skip
    gen = torch.Generator().manual_seed(seed)
    idx = torch.randint(len(d), (2000, len(d)), generator=gen)
    boots = d[idx].mean(1).sort().values
    return float(d.mean()), float(boots[49]), float(boots[1949])


def decide(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> Verdict:
    n = int(config["n_eval"])
    finals = {m: _final(records, m) for m in config["methods"]}
    figures: dict[str, Any] = {}
    for m, f in finals.items():
        if f:
            figures[f"{m}:acc"] = sum(r["acc"] for r in f.values()) / len(f)
            figures[f"{m}:acc_sft"] = sum(r["acc_sft"] for r in f.values()) / len(f)
            if all("critic_loss_mean" in r for r in f.values()):
                figures[f"{m}:critic_loss_mean"] = sum(r["critic_loss_mean"] for r in f.values()) / len(f)
                figures[f"{m}:critic_loss_var"] = sum(r["critic_loss_var"] for r in f.values()) / len(f)
    if not finals.get("sapo"):
        return Verdict("inconclusive", figures, "SAPO has no final records")
    cis = {}
    for bl in (m for m in BASELINES if m in config["methods"]):
        seeds = sorted(set(finals["sapo"]) & set(finals.get(bl, {})))
        if not seeds:
            return Verdict("inconclusive", figures, f"{bl} has no final records")
        mean, lo, hi = _paired_ci(
            [_unpack(finals["sapo"][s], n) for s in seeds], [_unpack(finals[bl][s], n) for s in seeds]
        )
        cis[bl] = (mean, lo, hi)
        figures[f"sapo-{bl}:acc_diff"] = mean
        figures[f"sapo-{bl}:ci_lo"] = lo
        figures[f"sapo-{bl}:ci_hi"] = hi
    text = "; ".join(
        f"SAPO - {k.upper()} = {m:+.3f} [{lo:+.3f}, {hi:+.3f}]" for k, (m, lo, hi) in cis.items()
    )
    if any(hi <= 0 for _, _, hi in cis.values()):
        outcome = "not reproduced"
    elif len(cis) == 1:
        outcome = "reproduced" if next(iter(cis.values()))[1] > 0 else "inconclusive"
    else:
        ok = all(lo > 0 and m >= 0.03 for m, lo, _ in cis.values())
        outcome = "reproduced" if ok else "inconclusive"
    return Verdict(outcome, figures, f"final greedy accuracy paired per problem: {text}")


def plot(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> dict[str, Any]:
    from optarium.harness.figures import panel_grid

    fig, axes = panel_grid(2)
    for i, m in enumerate(config["methods"]):
        for ax, metric in zip(axes, ("reward", "critic_loss"), strict=True):
            pts = sorted((int(r["step"]), float(r[metric])) for r in records
                         if r.get("method") == m and r.get(metric) is not None)  # fmt: skip
            if pts:
                ax.plot([s for s, _ in pts], [v for _, v in pts], marker=".", color=f"C{i}", label=m)
            ax.set_xlabel("RL step")
            ax.set_ylabel(metric.replace("_", " ") + (" (batch mean)" if metric == "reward" else ""))
            ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    return {"training": fig}


EXPERIMENT = register(
    Experiment(
        slug="segment-po",
        claim=CLAIM,
        rule=RULE,
        methods=METHODS,
        baselines=BASELINES,
        configs=CONFIGS,
        run=run,
        decide=decide,
        plot=plot,
        scaled_down=(
            "a 0.1M-parameter TinyLM trained from scratch on synthetic step-by-step modular arithmetic "
            "instead of Qwen2.5-VL on Geo3K; quick: 2-op problems, 300 SFT + 40 RL steps, PPO vs SAPO, "
            "1 seed; no critic comparison on common Monte-Carlo targets, no VC-PPO"
        ),
    )
)
