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

**CT-Prompt** (the paper's second variant; the official code ships only CT-KV, so this is rebuilt from the
paper summaries and the spec): a soft prompt P in R^{L x d}, initialised with the input embeddings of the
concatenated demos (:meth:`ContextTuner.init_prompt`), trained by the *same* objective, optimiser and
schedule as CT-KV (one shared loop, :meth:`ContextTuner._train`). Every step runs ``[P; x_i y_i]`` through
all layers, so leave-one-out is a key-padding mask: pair i's prompt positions are hidden as keys from every
query, the other prompt positions included (no leak of y_i through their hidden states); token dropout
hides prompt positions the same way. Prompt positions take position ids 0..L-1, the pair continues at L.
Inference turns the tuned prompt into a KV cache by one forward pass, so option scoring and generation are
CT-KV's; at step 0 that cache *is* the ICL cache (same embeddings in), a test checks it.

**Prompt tuning** (Lester et al. 2021, "The Power of Scale for Parameter-Efficient Prompt Tuning"): a soft
prompt of N virtual tokens at the input layer, initialised as Lester recommends (:func:`lester_init`):
class-label init where the task has a label set (each label's token embeddings averaged; the remaining
positions sampled vocabulary), else sampled vocabulary -- embeddings of random ids among the first
``vocab_top = 5000`` (Lester samples from the 5,000 most common tokens; we have no frequencies, so the
first ids in BPE merge order stand in for them). Trained like the random-init prefix: the same loop,
objective without leave-one-out, dropout, steps and schedule. Deviation: Lester's Adafactor (lr 0.3) is
replaced by the shared AdamW recipe so that every tuned arm has the same tuning budget.

**Deviations / missing.** CT-Prompt's hyperparameters were not found (the spec suggests an lr sweep over
{1e-3, 3e-3, 1e-2}); it uses CT-KV's. The per-pair losses are averaged per pair then over pairs (the
code's token weighting across pairs was not checked). Metric: accuracy (macro-F1 helper provided for
classification). :func:`work_counts` gives the per-step work of both variants analytically.
:func:`evaluate` returns a :class:`Result` with status ``max_iter`` (a fixed step budget, no tolerance);
CT-KV and CT-Prompt join the solver conformance suite through :func:`solver_cases` (tiny random Llama).
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
    "lester_init",
    "macro_f1",
    "mcnemar_exact",
    "solver_cases",
    "work_counts",
]

METHODS = ("zero_shot", "icl", "ct_kv", "ct_prompt", "random_prefix", "prompt_tuning", "ttt_lora")


@dataclass
class ContextState:
    """A (possibly tuned) context: per-layer ``keys``/``values`` [1, heads, L, head_dim] and pair offsets.

    For the soft-prompt variants ``prompt`` holds the trainable input embeddings [L, d]; ``keys``/``values``
    are then its KV cache (what inference attaches).
    """

    keys: list[torch.Tensor]
    values: list[torch.Tensor]
    prefix_len: int
    spans: list[tuple[int, int]] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    seconds_per_step: float = float("nan")
    prompt: torch.Tensor | None = None


def _cache(state: ContextState | None, batch: int) -> Any:
    if state is None:
        return None
    from transformers import DynamicCache

    c = DynamicCache()
    for i, (k, v) in enumerate(zip(state.keys, state.values, strict=True)):
        c.update(k.expand(batch, -1, -1, -1), v.expand(batch, -1, -1, -1), i)
    return c


class ContextTuner:
    """CT-KV / CT-Prompt tuner for a frozen HF causal LM (see the module docstring).

    ``pair_format`` must contain ``{x}`` then ``{y}``; up to ``{y}`` is the input, the rest the output.
    :meth:`fit` tunes a KV state (from :meth:`init_state`) or a soft-prompt state (from
    :meth:`init_prompt`); both run through the one training loop :meth:`_train`.
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
        if prefix_ids is None:
            ids, spans = self._demo_ids(demos)
        else:
            ids, spans = list(prefix_ids), []
            if not ids:
                raise ValueError("prefix_ids must be non-empty")
        self._check_len(len(ids))
        out = self.model(torch.tensor([ids], device=self.device), use_cache=True)
        keys, values = self._kv(out.cache)
        return ContextState(keys, values, len(ids), spans)

    def _demo_ids(self, demos: Sequence[tuple[str, str]] | None) -> tuple[list[int], list[tuple[int, int]]]:
        if not demos:
            raise ValueError("demos must be a non-empty sequence of (x, y) pairs")
        ids: list[int] = []
        spans: list[tuple[int, int]] = []
        for x, y in demos:
            xi, yi = self.pair_ids(x, y)
            spans.append((len(ids), len(ids) + len(xi) + len(yi)))
            ids += xi + yi
        return ids, spans

    def _check_len(self, n: int) -> None:
        if n >= self._max_len():
            raise ValueError(f"demos ({n} tokens) exceed the model context ({self._max_len()})")

    @staticmethod
    def _kv(cache: Any) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        keys = [lay.keys.detach().clone() for lay in cache.layers]
        values = [lay.values.detach().clone() for lay in cache.layers]
        return keys, values

    @torch.no_grad()
    def init_prompt(
        self,
        demos: Sequence[tuple[str, str]] | None = None,
        *,
        prompt_embeds: torch.Tensor | None = None,
    ) -> ContextState:
        """A soft-prompt state: the demos' input embeddings (CT-Prompt), or ``prompt_embeds`` [N, d].

        ``keys``/``values`` are the prompt's KV cache, so the untuned state scores like ICL.
        """
        emb = self.model.get_input_embeddings()
        if prompt_embeds is None:
            ids, spans = self._demo_ids(demos)
            P = emb(torch.tensor(ids, device=self.device))
        else:
            if not isinstance(prompt_embeds, torch.Tensor):
                raise TypeError("prompt_embeds must be a torch.Tensor [N, d]")
            if prompt_embeds.ndim != 2 or prompt_embeds.shape[0] < 1:
                raise ValueError(
                    f"prompt_embeds must have shape [N >= 1, d], got {tuple(prompt_embeds.shape)}"
                )
            if prompt_embeds.shape[1] != emb.embedding_dim:
                raise ValueError(
                    f"prompt_embeds width {prompt_embeds.shape[1]} != embedding dim {emb.embedding_dim}"
                )
            P, spans = prompt_embeds.to(self.device, self.dtype), []
        self._check_len(P.shape[0])
        return self._prompt_state(P.detach().clone(), spans)

    @torch.no_grad()
    def _prompt_state(self, P: torch.Tensor, spans: list[tuple[int, int]]) -> ContextState:
        L = P.shape[0]
        out = self.model(
            inputs_embeds=P[None], position_ids=torch.arange(L, device=self.device)[None], use_cache=True
        )
        keys, values = self._kv(out.cache)
        return ContextState(keys, values, L, list(spans), prompt=P)

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
        return self._target_nll(out.logits, ids, tgt)

    def _target_nll(self, logits: torch.Tensor, ids: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        """Per-row mean NLL of the target tokens, ``logits`` [B, T, V] aligned with ``ids`` [B, T]."""
        logp = torch.log_softmax(
            logits[:, :-1].to(torch.float64 if self.dtype == torch.float64 else torch.float32), -1
        )
        tok = logp.gather(-1, ids[:, 1:, None])[..., 0]
        m = tgt[:, 1:].to(tok.dtype)
        return -(tok * m).sum(1) / m.sum(1).clamp_min(1.0)

    def _prompt_nll(
        self, P: torch.Tensor, ids: torch.Tensor, tgt: torch.Tensor, keymask: torch.Tensor
    ) -> torch.Tensor:
        """Per-row mean target NLL of ``[P; ids]`` run through every layer (soft-prompt training).

        ``keymask`` [B, L + T] is a key-padding mask: a hidden prompt position is invisible to every query.
        """
        B, T = ids.shape
        L = P.shape[0]
        x = torch.cat([P[None].expand(B, -1, -1), self.model.get_input_embeddings()(ids)], 1)
        pos = torch.arange(L + T, device=self.device)[None].expand(B, -1)
        out = self.model(
            inputs_embeds=x,
            attention_mask=keymask.to(self.dtype),
            position_ids=pos,
            use_cache=False,
            logits_to_keep=T,
        )
        return self._target_nll(out.logits, ids, tgt)

    def train_masks(
        self, state: ContextState, n_pairs: int, gen: torch.Generator | None, leave_one_out: bool
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
    def _train(
        self,
        params: list[torch.Tensor],
        loss_fn: Any,
        *,
        steps: int | None = None,
        lr: float | None = None,
    ) -> tuple[list[float], float]:
        """The one training loop (CT-KV, CT-Prompt, prefix / prompt tuning, TTT-LoRA).

        AdamW (weight decay 0), cosine schedule without warm-up over ``steps``, gradient-norm clip; each
        step minimises ``loss_fn()``. Returns the per-step losses and the measured seconds per step.
        """
        steps = self.steps if steps is None else steps
        opt = torch.optim.AdamW(params, lr=self.lr if lr is None else lr, weight_decay=0.0)
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: 0.5 * (1 + math.cos(math.pi * s / max(steps, 1)))
        )
        losses: list[float] = []
        t0 = time.perf_counter()
        for _ in range(steps):
            loss = loss_fn()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, self.grad_clip)
            opt.step()
            sched.step()
            losses.append(float(loss.detach()))
        return losses, ((time.perf_counter() - t0) / steps if steps else float("nan"))

    def fit(
        self,
        demos: Sequence[tuple[str, str]],
        *,
        state: ContextState | None = None,
        seed: int = 0,
        leave_one_out: bool | None = None,
    ) -> ContextState:
        """Tune a context on the demos; a new state.

        ``state`` None: CT-KV from the demos' cache. A KV state (``init_state``): its cache is tuned. A
        soft-prompt state (``init_prompt``): its prompt embeddings are tuned (CT-Prompt when built from the
        demos), every step running the prompt through all layers.
        """
        if not demos:
            raise ValueError("demos must be a non-empty sequence of (x, y) pairs")
        loo = self.leave_one_out if leave_one_out is None else leave_one_out
        st = self.init_state(demos) if state is None else state
        seqs = [self.pair_ids(x, y) for x, y in demos]
        ids, tgt, keymask = self._batch(seqs, st.prefix_len)
        if loo and len(st.spans) < len(seqs):
            raise ValueError("leave_one_out needs the state's pair spans (build it from the demos)")
        gen = torch.Generator().manual_seed(int(seed))

        def masks() -> torch.Tensor:
            km = keymask.clone()
            km[:, : st.prefix_len] = self.train_masks(st, len(seqs), gen, loo)
            return km

        if st.prompt is not None:
            P = st.prompt.detach().clone().requires_grad_(True)
            losses, sps = self._train([P], lambda: self._prompt_nll(P, ids, tgt, masks()).mean())
            new = self._prompt_state(P.detach(), st.spans)
        else:
            keys = [k.detach().clone().requires_grad_(True) for k in st.keys]
            values = [v.detach().clone().requires_grad_(True) for v in st.values]
            new = ContextState(keys, values, st.prefix_len, list(st.spans))
            losses, sps = self._train(keys + values, lambda: self._nll(new, ids, tgt, masks()).mean())
            new.keys = [k.detach() for k in keys]
            new.values = [v.detach() for v in values]
        new.losses, new.seconds_per_step = losses, sps
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


def lester_init(
    tuner: ContextTuner,
    n_virtual: int,
    *,
    seed: int = 0,
    labels: Sequence[str] | None = None,
    vocab_top: int = 5000,
) -> torch.Tensor:
    """Lester et al. (2021) soft-prompt initialisation, [n_virtual, d] (detached, the model's dtype).

    Sampled vocabulary: embeddings of ids drawn uniformly from the first ``vocab_top`` ids (a stand-in for
    the 5,000 most common tokens). Class labels (Lester's recommendation where a label set exists): the
    first ``len(labels)`` rows are the labels' embeddings (a multi-token label's token embeddings
    averaged), the rest sampled vocabulary.
    """
    if not isinstance(n_virtual, int) or n_virtual < 1:
        raise ValueError(f"n_virtual must be an int >= 1, got {n_virtual!r}")
    if not isinstance(vocab_top, int) or vocab_top < 1:
        raise ValueError(f"vocab_top must be an int >= 1, got {vocab_top!r}")
    labs = list(labels) if labels is not None else []
    if len(labs) > n_virtual:
        raise ValueError(f"labels ({len(labs)}) must not outnumber n_virtual ({n_virtual})")
    emb = tuner.model.get_input_embeddings()
    top = min(vocab_top, int(emb.num_embeddings))
    g = torch.Generator().manual_seed(int(seed))
    ids = torch.randint(0, top, (n_virtual,), generator=g).to(tuner.device)
    with torch.no_grad():
        P = emb(ids).clone()
        for j, lab in enumerate(labs):
            lid = tuner._ids(lab)
            if not lid:
                raise ValueError(f"label {lab!r} has no tokens")
            P[j] = emb(torch.tensor(lid, device=tuner.device)).mean(0)
    return P.detach()


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
        losses, sps = tuner._train(params, lambda: tuner._nll(None, ids, tgt, km).mean(), steps=steps, lr=lr)
        pm.eval()
        st = tuner.init_state(demos)
        st.losses, st.seconds_per_step = losses, sps
    finally:
        tuner.model = base_model
    return pm, st


def evaluate(
    tuner: ContextTuner,
    task: Any,
    method: str,
    *,
    seed: int = 0,
    lr: float | None = None,
    n_virtual: int | None = None,
) -> Result:
    """Accuracy of ``method`` on ``task`` (an :class:`optarium.problems.llm_tasks.LLMTask`).

    ``lr`` (if given) overrides the tuner's lr for the tuned methods (it is set on ``tuner``) and is
    TTT-LoRA's lr (default 1e-4). ``prompt_tuning`` uses ``n_virtual`` virtual tokens (default: the
    demos' length L, so it has CT-Prompt's size and per-step cost), class-label init when the task has
    options.
    The result: ``x`` the per-query 0/1 outcomes (the model's dtype and device), ``value`` the accuracy,
    status ``max_iter`` (the step budget ran out; there is no tolerance), ``history`` the loss computed in
    step k = 1..n. ``extras``: ``correct`` (per-query 0/1 list), ``losses``, ``seconds_per_step``.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    t0 = time.perf_counter()
    state: ContextState | None = None
    pm = None
    if lr is not None and method != "ttt_lora":
        tuner.lr = float(lr)  # kept on the tuner (later calls use it too)
    if method == "icl":
        state = tuner.init_state(task.demos)
    elif method == "ct_kv":
        state = tuner.fit(task.demos, seed=seed)
    elif method == "ct_prompt":
        state = tuner.fit(task.demos, state=tuner.init_prompt(task.demos), seed=seed)
    elif method == "random_prefix":
        L = len(tuner._demo_ids(task.demos)[0])
        vocab = int(tuner.model.config.vocab_size)
        st0 = tuner.init_state(prefix_ids=random_prefix_ids(L, vocab, seed))
        state = tuner.fit(task.demos, state=st0, seed=seed, leave_one_out=False)
    elif method == "prompt_tuning":
        n = len(tuner._demo_ids(task.demos)[0]) if n_virtual is None else n_virtual
        P0 = lester_init(tuner, n, seed=seed, labels=task.options)
        state = tuner.fit(
            task.demos, state=tuner.init_prompt(prompt_embeds=P0), seed=seed, leave_one_out=False
        )
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
        x=torch.tensor(correct, dtype=tuner.dtype, device=tuner.device),
        value=acc,
        n_iter=len(losses),
        wall_time_s=time.perf_counter() - t0,
        status="max_iter",  # a fixed step budget, no tolerance
        history=Trace(steps=tuple(range(1, len(losses) + 1)), metrics={"loss": tuple(losses)}),
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


def work_counts(
    mode: str, k: int, pair_len: int, n_layers: int, d: int, *, prompt_len: int | None = None
) -> dict[str, float]:
    """Per-step work of one full-batch training step, counted (not timed).

    ``kv``: the k pairs (pair_len tokens each) run against a fixed prefix of L = k * pair_len positions:
    tokens = k * pair_len per layer; query-key pairs = k * pair_len * (L + (pair_len + 1) / 2) per layer.
    ``prompt``: every pair runs behind the L soft-prompt positions, so tokens = k * (L + pair_len) and
    query-key pairs = k * (L + pair_len)(L + pair_len + 1) / 2 per layer. ``prompt_len`` overrides L
    (Lester prompt tuning with N virtual tokens; default L = k * pair_len, CT-Prompt). Projection/MLP
    FLOPs are ``~ 24 d^2`` per token per layer (reported as ``flops_dense``).
    """
    if mode not in ("kv", "prompt"):
        raise ValueError(f"mode must be 'kv' or 'prompt', got {mode!r}")
    if k < 1 or pair_len < 1 or n_layers < 1 or d < 1:
        raise ValueError("k, pair_len, n_layers and d must be >= 1")
    if prompt_len is not None and prompt_len < 1:
        raise ValueError(f"prompt_len must be >= 1, got {prompt_len!r}")
    L = k * pair_len if prompt_len is None else prompt_len
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


class _CharTokenizer:
    """Byte-level tokenizer of the conformance case: id = ord(char) % 120 + 2; 0 = pad, 1 = eos."""

    pad_token_id, eos_token_id = 0, 1

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict[str, list[int]]:
        return {"input_ids": [ord(c) % 120 + 2 for c in text]}

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(chr(i - 2) for i in ids if i >= 2)


def solver_cases() -> list[Any]:
    """Conformance cases (:mod:`optarium.testing.solvers`): CT-KV and CT-Prompt on a tiny random Llama.

    Declared only where ``transformers`` is installed (the ``llm`` extra). Mechanics only: the tiny model
    has no in-context ability, so accuracy is not asserted.
    """
    import importlib.util

    if importlib.util.find_spec("transformers") is None:
        return []
    from optarium._core.solver import SolverCase
    from optarium.problems import llm_tasks

    def solve(*, dtype: torch.dtype, device: Any, seed: int, method: str, **kw: Any) -> Result:
        from transformers import LlamaConfig, LlamaForCausalLM

        cfg = LlamaConfig(
            vocab_size=122,
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            max_position_embeddings=128,
        )
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            model = LlamaForCausalLM(cfg).to(device=device, dtype=dtype).eval()
        for p in model.parameters():
            p.requires_grad_(False)
        args = {"steps": 3, "lr": 1e-2, "token_dropout": 0.1, **kw}
        tuner = ContextTuner(model, _CharTokenizer(), **args)
        task = llm_tasks.remapped_sentiment(3, 4, seed=0, labels=("x", "y"))
        return evaluate(tuner, task, method, seed=seed)

    exempt = {
        "converged": "a fixed step budget, no tolerance: every run ends max_iter (tests/llm checks the loss)",
        "diverged": "no divergence rule: the loss is a bounded NLL of a frozen model and clipped steps",
        "timeout": "no time budget argument: the step budget is the only stop (tests/llm times nothing)",
        "optimality": "no optimality condition: accuracy on a tiny random LM is not a known optimum",
    }
    invalid = (
        ({"lr": 0.0}, "lr"),
        ({"token_dropout": 1.0}, "token_dropout"),
        ({"steps": -1}, "steps"),
        ({"method": "nope"}, "method"),
    )
    return [
        SolverCase(
            name=f"context-tuning-{m.replace('_', '-')}",
            solve=lambda _m=m, **kw: solve(**{"method": _m, **kw}),
            statuses={"max_iter": {}},
            max_iter=3,
            tolerance_holds=lambda r: False,
            optimality=lambda r: float("inf"),
            optimality_tol=0.0,
            invalid=invalid,
            timing_metrics=(),
            exempt=exempt,
        )
        for m in ("ct_kv", "ct_prompt")
    ]
