r"""Context Tuning (CT-KV): optimise the key-value prefix of a frozen LM, initialised from the demonstrations.

Paper: J. Lu, R. Teehan, Z. Yang, M. Ren, "Context Tuning for In-Context Optimization", arXiv:2507.04221
(ICML 2026 seed list); CT-KV follows the official code (``train.py`` of
github.com/agentic-learning-ai-lab/context-tuning, read only, nothing copied).

**CT-KV.** The k demonstration pairs are formatted MetaICL style (``"{x}\n{y}\n"``), concatenated into one
prefix of L tokens, and one forward pass gives every layer's key/value cache; those tensors are the only
trainable parameters (the model is frozen). The objective is the mean, over pairs i, of the token-mean NLL of
y_i given the cache and x_i, with (a) *leave-one-out*: the attention mask hides pair i's cache positions from
pair i, (b) *token dropout*: every cache position is hidden with probability p (default 0.05, fresh each step,
never at inference), (c) the pair's position ids continuing after the prefix (L, L+1, ...). Optimiser (code
defaults): AdamW lr 1e-3, weight decay 0, cosine schedule without warm-up, gradient-norm clip 1.0, full batch
(one step per epoch). Inference attaches the tuned cache unmasked; options are scored by their mean token NLL
(lowest wins); free-form answers by greedy decoding.

**Baselines here.** Zero-shot (no prefix), ICL (the initial cache, untuned; CT-KV at step 0 *is* ICL, a test
checks the logits agree with one forward pass over demos + query), random-init prefix tuning (Li & Liang
2021 with the paper's "irrelevant tokens" initialisation: the same trainable per-layer cache built from L
random vocabulary tokens, same objective without leave-one-out -- no pair lives in the prefix -- dropout,
steps and schedule), and test-time training with LoRA through ``peft`` (Akyürek et al. 2024, r = 8 on
q/v projections; training sequences are leave-one-out ICL tasks: the other demos followed by pair i, loss on
y_i; inference is ICL with all demos under the adapted weights; the adapter is removed afterwards so the
shared model is unchanged).

**Deviations / missing.** CT-Prompt (the soft-prompt variant) is not implemented; :func:`work_counts` gives
its per-step work analytically (the complexity argument of the spec). The per-pair losses are averaged per
pair then over pairs (the code's token weighting across pairs was not checked). Metric: accuracy (macro-F1
helper provided for classification).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from optarium._core.result import Result, Trace

__all__ = [
    "ContextState",
    "ContextTuner",
    "evaluate",
    "macro_f1",
    "mcnemar_exact",
    "work_counts",
]

METHODS = ("zero_shot", "icl", "ct_kv", "random_prefix", "ttt_lora")


@dataclass
class ContextState:
    """A (possibly tuned) KV prefix: per-layer ``keys``/``values`` [1, heads, L, head_dim], pair offsets."""

    keys: list[torch.Tensor]
    values: list[torch.Tensor]
    prefix_len: int
    spans: list[tuple[int, int]] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    seconds_per_step: float = float("nan")


def _cache(state: ContextState | None, batch: int) -> Any:
    if state is None:
        return None
    from transformers import DynamicCache

    c = DynamicCache()
    for i, (k, v) in enumerate(zip(state.keys, state.values, strict=True)):
        c.update(k.expand(batch, -1, -1, -1), v.expand(batch, -1, -1, -1), i)
    return c


class ContextTuner:
    """CT-KV tuner for a frozen HF causal LM (see the module docstring).

    ``pair_format`` must contain ``{x}`` then ``{y}``; up to ``{y}`` is the input, the rest the output.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        steps: int = 200,
        lr: float = 1e-3,
        token_dropout: float = 0.05,
        leave_one_out: bool = True,
        grad_clip: float = 1.0,
        pair_format: str = "{x}\n{y}\n",
    ) -> None:
        if not isinstance(steps, int) or steps < 0:
            raise ValueError(f"steps must be a non-negative int, got {steps!r}")
        if not lr > 0:
            raise ValueError(f"lr must be > 0, got {lr!r}")
        if not 0.0 <= token_dropout < 1.0:
            raise ValueError(f"token_dropout must lie in [0, 1), got {token_dropout!r}")
        if not grad_clip > 0:
            raise ValueError(f"grad_clip must be > 0, got {grad_clip!r}")
        if "{x}" not in pair_format or "{y}" not in pair_format:
            raise ValueError("pair_format must contain {x} and {y}")
        self.model, self.tokenizer = model, tokenizer
        self.steps, self.lr, self.token_dropout = steps, float(lr), float(token_dropout)
        self.leave_one_out, self.grad_clip, self.pair_format = leave_one_out, float(grad_clip), pair_format
        self._xfmt, rest = pair_format.split("{y}", 1)
        self._yfmt = "{y}" + rest
        p = next(model.parameters())
        self.device, self.dtype = p.device, p.dtype

    # -- tokens -----------------------------------------------------------------------------------------
    def _ids(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def pair_ids(self, x: str, y: str | None = None) -> tuple[list[int], list[int]]:
        """Token ids of the input part and (if ``y`` given) the output part of one formatted pair."""
        xi = self._ids(self._xfmt.format(x=x))
        yi = self._ids(self._yfmt.format(y=y)) if y is not None else []
        return xi, yi

    def _max_len(self) -> int:
        return int(getattr(self.model.config, "max_position_embeddings", 10**9))

    # -- prefix -----------------------------------------------------------------------------------------
    @torch.no_grad()
    def init_state(
        self, demos: Sequence[tuple[str, str]] | None = None, *, prefix_ids: Sequence[int] | None = None
    ) -> ContextState:
        """The KV cache of the concatenated demos (ICL), or of ``prefix_ids`` (e.g. random tokens)."""
        spans: list[tuple[int, int]] = []
        if prefix_ids is None:
            if not demos:
                raise ValueError("demos must be a non-empty sequence of (x, y) pairs")
            ids: list[int] = []
            for x, y in demos:
                xi, yi = self.pair_ids(x, y)
                spans.append((len(ids), len(ids) + len(xi) + len(yi)))
                ids += xi + yi
        else:
            ids = list(prefix_ids)
            if not ids:
                raise ValueError("prefix_ids must be non-empty")
        if len(ids) >= self._max_len():
            raise ValueError(f"demos ({len(ids)} tokens) exceed the model context ({self._max_len()})")
        t = torch.tensor([ids], device=self.device)
        out = self.model(t, use_cache=True)
        c = out.cache
        keys = [lay.keys.detach().clone() for lay in c.layers]
        values = [lay.values.detach().clone() for lay in c.layers]
        return ContextState(keys, values, len(ids), spans)

    # -- batches ----------------------------------------------------------------------------------------
    def _batch(
        self, seqs: Sequence[tuple[list[int], list[int]]], prefix_len: int
    ) -> tuple[torch.Tensor, ...]:
        """Right-padded ids [B, T], target mask [B, T] (1 on output tokens), key mask [B, prefix + T]."""
        T = max(len(a) + len(b) for a, b in seqs)
        B = len(seqs)
        pad = int(self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0)
        ids = torch.full((B, T), pad, dtype=torch.long)
        tgt = torch.zeros(B, T, dtype=torch.bool)
        valid = torch.zeros(B, T, dtype=torch.bool)
        for r, (a, b) in enumerate(seqs):
            ids[r, : len(a) + len(b)] = torch.tensor(a + b)
            tgt[r, len(a) : len(a) + len(b)] = True
            valid[r, : len(a) + len(b)] = True
        keymask = torch.cat([torch.ones(B, prefix_len, dtype=torch.bool), valid], 1)
        return ids.to(self.device), tgt.to(self.device), keymask.to(self.device)

    def _nll(
        self, state: ContextState | None, ids: torch.Tensor, tgt: torch.Tensor, keymask: torch.Tensor
    ) -> torch.Tensor:
        """Per-row mean NLL of the target tokens."""
        B, T = ids.shape
        L = state.prefix_len if state is not None else 0
        pos = (torch.arange(T, device=self.device) + L)[None].expand(B, -1)
        out = self.model(
            input_ids=ids,
            attention_mask=keymask.to(self.dtype),
            position_ids=pos,
            cache=_cache(state, B),
            use_cache=state is not None,
        )
        logp = torch.log_softmax(
            out.logits[:, :-1].to(torch.float64 if self.dtype == torch.float64 else torch.float32), -1
        )
        tok = logp.gather(-1, ids[:, 1:, None])[..., 0]
        m = tgt[:, 1:].to(tok.dtype)
        return -(tok * m).sum(1) / m.sum(1).clamp_min(1.0)

    def train_masks(
        self, state: ContextState, n_pairs: int, T: int, gen: torch.Generator | None, leave_one_out: bool
    ) -> torch.Tensor:
        """Prefix part of the key mask [n_pairs, L]: leave-one-out on pair spans and token dropout."""
        L = state.prefix_len
        m = torch.ones(n_pairs, L, dtype=torch.bool)
        if leave_one_out:
            for i, (a, b) in enumerate(state.spans[:n_pairs]):
                m[i, a:b] = False
        if self.token_dropout > 0:
            m &= torch.rand(n_pairs, L, generator=gen) >= self.token_dropout
        return m.to(self.device)

    # -- training ---------------------------------------------------------------------------------------
    def fit(
        self,
        demos: Sequence[tuple[str, str]],
        *,
        state: ContextState | None = None,
        seed: int = 0,
        leave_one_out: bool | None = None,
    ) -> ContextState:
        """Tune the KV prefix (CT-KV from the demos' cache, or from ``state``) on the demos; a new state."""
        if not demos:
            raise ValueError("demos must be a non-empty sequence of (x, y) pairs")
        loo = self.leave_one_out if leave_one_out is None else leave_one_out
        st = self.init_state(demos) if state is None else state
        keys = [k.detach().clone().requires_grad_(True) for k in st.keys]
        values = [v.detach().clone().requires_grad_(True) for v in st.values]
        params = keys + values
        new = ContextState(keys, values, st.prefix_len, list(st.spans))
        seqs = [self.pair_ids(x, y) for x, y in demos]
        ids, tgt, keymask = self._batch(seqs, st.prefix_len)
        if loo and len(new.spans) < len(seqs):
            raise ValueError("leave_one_out needs the state's pair spans (build it from the demos)")
        opt = torch.optim.AdamW(params, lr=self.lr, weight_decay=0.0)
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: 0.5 * (1 + math.cos(math.pi * s / max(self.steps, 1)))
        )
        gen = torch.Generator().manual_seed(int(seed))
        t0 = time.perf_counter()
        for _ in range(self.steps):
            km = keymask.clone()
            km[:, : st.prefix_len] = self.train_masks(st, len(seqs), ids.shape[1], gen, loo)
            loss = self._nll(new, ids, tgt, km).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, self.grad_clip)
            opt.step()
            sched.step()
            new.losses.append(float(loss.detach()))
        if self.steps:
            new.seconds_per_step = (time.perf_counter() - t0) / self.steps
        new.keys = [k.detach() for k in keys]
        new.values = [v.detach() for v in values]
        return new

    # -- inference --------------------------------------------------------------------------------------
    @torch.no_grad()
    def score_options(
        self, state: ContextState | None, queries: Sequence[str] | str, options: Sequence[str]
    ) -> torch.Tensor:
        """Mean token NLL of every option after every query: [n_queries, n_options] (or [n_options])."""
        single = isinstance(queries, str)
        qs = [queries] if single else list(queries)
        if not options:
            raise ValueError("options must be non-empty")
        seqs = [self.pair_ids(q, o) for q in qs for o in options]
        L = state.prefix_len if state is not None else 0
        ids, tgt, km = self._batch(seqs, L)
        s = self._nll(state, ids, tgt, km).reshape(len(qs), len(options))
        return s[0] if single else s

    @torch.no_grad()
    def predict(
        self, state: ContextState | None, queries: Sequence[str], options: Sequence[str]
    ) -> list[str]:
        """The lowest-NLL option per query."""
        idx = self.score_options(state, list(queries), options).argmin(-1)
        return [options[int(i)] for i in idx]

    @torch.no_grad()
    def generate(self, state: ContextState | None, query: str, max_new_tokens: int = 8) -> str:
        """Greedy continuation of the query's input part, up to the pair format's first newline."""
        xi, _ = self.pair_ids(query)
        L = state.prefix_len if state is not None else 0
        ids = list(xi)
        out_ids: list[int] = []
        for _ in range(max_new_tokens):
            t = torch.tensor([ids], device=self.device)
            pos = (torch.arange(len(ids), device=self.device) + L)[None]
            km = torch.ones(1, L + len(ids), device=self.device, dtype=self.dtype)
            logits = self.model(
                input_ids=t,
                attention_mask=km,
                position_ids=pos,
                cache=_cache(state, 1),
                use_cache=state is not None,
            ).logits
            nxt = int(logits[0, -1].argmax())
            if nxt == self.tokenizer.eos_token_id:
                break
            ids.append(nxt)
            out_ids.append(nxt)
            if "\n" in self.tokenizer.decode(out_ids):
                break
        return self.tokenizer.decode(out_ids).split("\n")[0].strip()


def random_prefix_ids(n: int, vocab_size: int, seed: int) -> list[int]:
    """``n`` random vocabulary ids (the random-init prefix of Prefix Tuning's "irrelevant tokens")."""
    g = torch.Generator().manual_seed(int(seed))
    return torch.randint(0, vocab_size, (n,), generator=g).tolist()


def ttt_lora_state(
    tuner: ContextTuner,
    demos: Sequence[tuple[str, str]],
    *,
    steps: int,
    lr: float = 1e-4,
    r: int = 8,
    seed: int = 0,
) -> tuple[Any, ContextState]:
    """Test-time training with peft LoRA (r on q/v) on leave-one-out ICL tasks built from the demos.

    Returns ``(peft_model, state)``: the adapted model (call ``peft_model.unload()`` to restore the base
    model) and the ICL cache of all demos computed under the adapted weights.
    """
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(int(seed))
    cfg = LoraConfig(r=r, lora_alpha=2 * r, target_modules=["q_proj", "v_proj"], lora_dropout=0.0)
    pm = get_peft_model(tuner.model, cfg)
    base_model = tuner.model
    tuner.model = pm
    try:
        pairs = [tuner.pair_ids(x, y) for x, y in demos]
        seqs = []
        for i in range(len(pairs)):
            ctx = [t for j, (a, b) in enumerate(pairs) if j != i for t in a + b]
            seqs.append((ctx + pairs[i][0], pairs[i][1]))
        ids, tgt, km = tuner._batch(seqs, 0)
        params = [p for p in pm.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: 0.5 * (1 + math.cos(math.pi * s / max(steps, 1)))
        )
        losses = []
        t0 = time.perf_counter()
        for _ in range(steps):
            loss = tuner._nll(None, ids, tgt, km).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, tuner.grad_clip)
            opt.step()
            sched.step()
            losses.append(float(loss.detach()))
        pm.eval()
        st = tuner.init_state(demos)
        st.losses = losses
        st.seconds_per_step = (time.perf_counter() - t0) / max(steps, 1)
    finally:
        tuner.model = base_model
    return pm, st


def evaluate(
    tuner: ContextTuner, task: Any, method: str, *, seed: int = 0, lr: float | None = None
) -> Result:
    """Accuracy of ``method`` on ``task`` (an :class:`optarium.problems.llm_tasks.LLMTask`).

    ``extras``: ``correct`` (per-query 0/1 list), ``losses``, ``seconds_per_step``.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    t0 = time.perf_counter()
    state: ContextState | None = None
    pm = None
    if method == "icl":
        state = tuner.init_state(task.demos)
    elif method == "ct_kv":
        if lr is not None:
            tuner.lr = float(lr)
        state = tuner.fit(task.demos, seed=seed)
    elif method == "random_prefix":
        if lr is not None:
            tuner.lr = float(lr)
        L = tuner.init_state(task.demos).prefix_len
        vocab = int(tuner.model.config.vocab_size)
        st0 = tuner.init_state(prefix_ids=random_prefix_ids(L, vocab, seed))
        state = tuner.fit(task.demos, state=st0, seed=seed, leave_one_out=False)
    elif method == "ttt_lora":
        pm, state = ttt_lora_state(tuner, task.demos, steps=tuner.steps, lr=lr or 1e-4, seed=seed)
    base_model = tuner.model
    if pm is not None:
        tuner.model = pm
    try:
        xs = [q for q, _ in task.queries]
        if task.options:
            preds = tuner.predict(state, xs, task.options)
        else:
            preds = [tuner.generate(state, q, max_new_tokens=task.max_new_tokens) for q in xs]
    finally:
        tuner.model = base_model
        if pm is not None:
            pm.unload()
    correct = [int(p.strip() == y.strip()) for p, (_, y) in zip(preds, task.queries, strict=True)]
    acc = sum(correct) / len(correct)
    losses = state.losses if state is not None else []
    return Result(
        x=torch.tensor(correct, dtype=torch.float64),
        value=acc,
        n_iter=len(losses),
        wall_time_s=time.perf_counter() - t0,
        status="converged",
        history=Trace(steps=tuple(range(len(losses))), metrics={"loss": tuple(losses)}),
        extras={
            "correct": correct,
            "losses": losses,
            "seconds_per_step": state.seconds_per_step if state is not None else float("nan"),
            "predictions": preds,
        },
    )


def mcnemar_exact(a: Sequence[int], b: Sequence[int]) -> dict[str, float]:
    """Exact one-sided McNemar test of "a better than b" on paired 0/1 outcomes.

    Returns the discordant counts ``n10`` (a right, b wrong), ``n01``, ``p_greater`` = P(Bin(n, 1/2) >= n10)
    and ``p_less`` = P(Bin(n, 1/2) <= n10) with n = n10 + n01.
    """
    if len(a) != len(b):
        raise ValueError("a and b must have the same length")
    n10 = sum(1 for u, v in zip(a, b, strict=True) if u and not v)
    n01 = sum(1 for u, v in zip(a, b, strict=True) if v and not u)
    n = n10 + n01
    pmf = [math.comb(n, j) / 2**n for j in range(n + 1)]
    return {
        "n10": float(n10),
        "n01": float(n01),
        "p_greater": float(sum(pmf[n10:])),
        "p_less": float(sum(pmf[: n10 + 1])),
    }


def macro_f1(y_true: Sequence[str], y_pred: Sequence[str], labels: Sequence[str] | None = None) -> float:
    """Macro-averaged F1 over ``labels`` (default: the labels seen in ``y_true``)."""
    labs = list(labels) if labels is not None else sorted(set(y_true))
    f1s = []
    for c in labs:
        tp = sum(1 for t, p in zip(y_true, y_pred, strict=True) if t == c and p == c)
        fp = sum(1 for t, p in zip(y_true, y_pred, strict=True) if t != c and p == c)
        fn = sum(1 for t, p in zip(y_true, y_pred, strict=True) if t == c and p != c)
        f1s.append(0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn))
    return sum(f1s) / len(f1s)


def work_counts(mode: str, k: int, pair_len: int, n_layers: int, d: int) -> dict[str, float]:
    """Per-step work of one full-batch training step, counted (not timed).

    ``kv``: the k pairs (pair_len tokens each) run against a fixed prefix of L = k * pair_len positions:
    tokens = k * pair_len per layer; query-key pairs = k * pair_len * (L + (pair_len + 1) / 2) per layer.
    ``prompt``: every pair runs behind the L soft-prompt positions, so tokens = k * (L + pair_len) and
    query-key pairs = k * (L + pair_len)(L + pair_len + 1) / 2 per layer. Projection/MLP FLOPs are
    ``~ 24 d^2`` per token per layer (reported as ``flops_dense``).
    """
    if mode not in ("kv", "prompt"):
        raise ValueError(f"mode must be 'kv' or 'prompt', got {mode!r}")
    if k < 1 or pair_len < 1 or n_layers < 1 or d < 1:
        raise ValueError("k, pair_len, n_layers and d must be >= 1")
    L = k * pair_len
    if mode == "kv":
        tokens = k * pair_len
        qk = k * (pair_len * L + pair_len * (pair_len + 1) / 2)
    else:
        T = L + pair_len
        tokens = k * T
        qk = k * T * (T + 1) / 2
    return {
        "tokens": float(tokens * n_layers),
        "qk_pairs": float(qk * n_layers),
        "flops_dense": float(24 * d * d * tokens * n_layers),
    }
