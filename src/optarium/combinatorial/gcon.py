r"""GCON multi-filter GNN with energy losses and reduction-informed transfer (gcon-neural-co).

Paper: "Can Computational Reducibility Lead to Transferable Models for Graph Combinatorial Optimization?"
(arXiv:2603.02462; official code ``semihcanturk/COPT-MT``, Lightning + Hydra + PyG). Only the abstract of the
paper was read; the layer, losses, decoders and transfer mechanics follow the spec's reading of the official
code, reimplemented here in plain torch (``torch.sparse`` propagation, no torch-geometric).

**GCON layer** (:class:`GCONConv`). :math:`P=\hat D^{-1/2}(A+I)\hat D^{-1/2}`, diffused features
:math:`H_r=P^rX` by repeated sparse products; channels are index lists: ``[r]`` is the low-pass
:math:`H_r`, ``[a, b]`` the band-pass :math:`H_a-H_b` (defaults ``[[0],[1],[2],[4],[0,1],[1,2],[2,4]]``).
Each channel gets its own bias-free linear map and ELU, :math:`Z_c=\mathrm{ELU}(W_cF_c)`; per group
(low / band) the attention score :math:`e_c=\mathrm{ELU}(Z_ca_{ch})+\mathrm{ELU}(Z_{ref}a_{pre})` is
softmaxed over the group and the channels summed; the low group's reference is the identity channel
``[0]`` (excluded from its sum), the band group's its first channel. ``combine="att_bias"``:
:math:`X'=X+x_{low}+x_{band}`; ``skip=True`` concatenates :math:`[X,X']` before the one-layer output map.

**Network** (:class:`GCONNet`): node statistics -> linear pre-MP layer -> ``layers`` x (GCON, batch norm,
GELU, dropout) -> one linear head per task (width 1, ``c`` for colouring) -> sigmoid. Node features are
:math:`[\log(1+\deg), \text{clustering}, \log(1+\#\text{triangles})]` (the code's degree / clustering /
triangle statistics; the log scaling is ours).

**Energies** (:func:`copt_loss`, per graph, averaged over the graphs of a batch; ``E`` = undirected edges,
computed from the directed ``edge_index`` with the factor 1/2 stated in the spec):
MIS :math:`\frac2n(-\alpha\sum p+\beta\sum_E p_ip_j)`; MaxClique = MIS on the complement edges;
MVC :math:`\frac1n(\alpha\sum p+2\beta\sum_E(1-p_i)(1-p_j))`; MaxCut :math:`2\sum_E s_is_j`, :math:`s=2p-1`;
MDS :math:`\sum p+\beta\sum_i(1-p_i)\prod_{N(i)}(1-p_j)` (log space); colouring
:math:`\sum_i(1-\sum_kX_{ik})^2+\sum_E\langle X_i,X_j\rangle`. Defaults :math:`\alpha=1`, :math:`\beta=1.01`
(MIS/MVC/clique; :math:`\beta\le\alpha` is a ``ValueError``), :math:`\beta=1` (MDS).

**Decoders** (:func:`decode`): MIS/clique greedy by decreasing :math:`p` from ``n_starts`` start nodes (the
``n_starts`` highest-scored nodes forced first; best kept); MVC = complement of the MIS decode of
:math:`1-p` (a minimal cover; the code scans by :math:`p` with a coverage check); MDS scans by decreasing
:math:`p` adding nodes that dominate a new node, then drops redundant ones; colouring = argmax then
:func:`~optarium.combinatorial.problems.repair`; MaxCut thresholds at 0.5.

**Transfer** (:func:`transfer`): ``"invert_head"`` copies the source head into the target head with weights
and bias negated (:math:`p_{MIS}=\sigma(-z)=1-p_{MVC}`, the MVC/MIS complement reduction);
``"fresh_head"`` (the control) initialises the target head afresh; ``"complement"`` copies the source head
unchanged (MIS -> MaxClique: the caller feeds :func:`complement_batch` graphs, features recomputed, and
decodes as MIS on the complement, i.e. a clique of the original graph). ``freeze="backbone"`` trains only the
head. Deviation: with a frozen backbone we run it in eval mode (batch-norm running statistics, no
dropout), so fine-tuning updates only the head on fixed embeddings; the code freezes the parameters but
leaves the modules in train mode. **Multi-task**: shared backbone, one head per task, loss = weighted sum
(``strategy="sum"``) or one task per step in turn (``"alternate"``); PCGrad is not implemented. The code's
multi-task weights are :data:`MTL_WEIGHTS`. Leave-one-out pretraining is ``train_unsupervised`` on all tasks
but one followed by :func:`transfer` with ``"fresh_head"`` and full fine-tuning (``freeze=None``).

Defaults of the code not reproduced at laptop scale (16 layers x 64, 200 epochs, batch 256, early stopping)
are left to the caller; AdamW lr 5e-4, weight decay 0 and gradient clipping 0.5 are the defaults here.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from optarium._core.result import Result, Trace
from optarium.combinatorial.graphs import check_graph

__all__ = [
    "MTL_WEIGHTS",
    "TASKS",
    "GCONConv",
    "GCONNet",
    "GraphBatch",
    "collate",
    "complement_batch",
    "copt_loss",
    "decode",
    "graph_data",
    "train_unsupervised",
    "transfer",
]

TASKS = ("mis", "mvc", "maxclique", "maxcut", "mds", "color")
MTL_WEIGHTS = {"maxcut": 0.1, "maxclique": 1.0, "mds": 0.005, "mis": 1.0, "color": 0.001, "mvc": 1.0}
DEFAULT_CHANNELS = ([0], [1], [2], [4], [0, 1], [1, 2], [2, 4])


def _check_task(task: str) -> str:
    if task not in TASKS:
        raise ValueError(f"task: must be one of {TASKS}, got {task!r}")
    return task


# ----------------------------------------------------------------------------------------------- data
@dataclass
class GraphBatch:
    """Disjoint union of graphs: features ``x`` (N, 3), directed ``edge_index`` (2, 2|E|), complement edges
    ``comp_index``, ``batch`` (N,) graph id per node, ``sizes`` (B,), and the normalised propagation ``P``."""

    x: torch.Tensor
    edge_index: torch.Tensor
    comp_index: torch.Tensor
    batch: torch.Tensor
    sizes: torch.Tensor
    P: torch.Tensor
    graphs: list[Any]

    @property
    def num_nodes(self) -> int:
        return int(self.x.shape[0])

    @property
    def num_graphs(self) -> int:
        return int(self.sizes.shape[0])


def _directed(edges: np.ndarray) -> torch.Tensor:
    e = torch.as_tensor(edges, dtype=torch.long).reshape(-1, 2)
    return torch.cat([e, e.flip(1)], 0).T.contiguous()


def graph_data(G: Any) -> dict[str, Any]:
    """Per-graph tensors (features, directed edges, complement edges); cache these across epochs."""
    import networkx as nx

    check_graph(G)
    n = G.number_of_nodes()
    deg = np.array([G.degree(u) for u in range(n)], dtype=np.float64)
    cl = nx.clustering(G)
    tri = nx.triangles(G)
    feat = np.stack(
        [np.log1p(deg), np.array([cl[u] for u in range(n)]), np.log1p([tri[u] for u in range(n)])], 1
    )
    A = np.zeros((n, n), dtype=bool)
    E = np.array(list(G.edges), dtype=np.int64).reshape(-1, 2)
    A[E[:, 0], E[:, 1]] = A[E[:, 1], E[:, 0]] = True
    iu = np.triu_indices(n, 1)
    comp = np.stack([iu[0][~A[iu]], iu[1][~A[iu]]], 1)
    return {
        "graph": G,
        "n": n,
        "x": torch.as_tensor(feat, dtype=torch.float32),
        "ei": _directed(E),
        "ci": _directed(comp),
    }


def collate(items: Sequence[Mapping[str, Any] | Any], dtype: torch.dtype = torch.float32) -> GraphBatch:
    """A :class:`GraphBatch` from graphs or :func:`graph_data` dicts."""
    items = [it if isinstance(it, Mapping) else graph_data(it) for it in items]
    if not items:
        raise ValueError("items: need at least one graph")
    sizes = torch.tensor([it["n"] for it in items], dtype=torch.long)
    off = torch.cumsum(sizes, 0) - sizes
    ei = torch.cat([it["ei"] + o for it, o in zip(items, off.tolist(), strict=True)], 1)
    ci = torch.cat([it["ci"] + o for it, o in zip(items, off.tolist(), strict=True)], 1)
    N = int(sizes.sum())
    batch = torch.repeat_interleave(torch.arange(len(items)), sizes)
    x = torch.cat([it["x"] for it in items], 0).to(dtype)
    loops = torch.arange(N).repeat(2, 1)
    idx = torch.cat([ei, loops], 1)
    deg = torch.zeros(N, dtype=dtype).index_add_(0, idx[0], torch.ones(idx.shape[1], dtype=dtype))
    w = deg[idx[0]].rsqrt() * deg[idx[1]].rsqrt()
    P = torch.sparse_coo_tensor(idx, w, (N, N), check_invariants=False).coalesce()
    return GraphBatch(x, ei, ci, batch, sizes, P, [it["graph"] for it in items])


# ----------------------------------------------------------------------------------------------- model
class GCONConv(nn.Module):
    """One GCON layer (multi-filter low-/band-pass channels with channel attention); width preserved."""

    def __init__(
        self,
        hidden: int,
        channels: Sequence[Sequence[int]] = DEFAULT_CHANNELS,
        combine: str = "att_bias",
        skip: bool = True,
    ) -> None:
        super().__init__()
        if hidden < 1:
            raise ValueError(f"hidden: must be >= 1, got {hidden}")
        if combine not in ("att_bias", "att"):
            raise ValueError(f"combine: must be 'att_bias' or 'att', got {combine!r}")
        chans = [tuple(int(r) for r in c) for c in channels]
        if any(len(c) not in (1, 2) or min(c) < 0 for c in chans):
            raise ValueError("channels: each channel is [r] or [a, b] with powers >= 0")
        self.low = [c for c in chans if len(c) == 1]
        self.band = [c for c in chans if len(c) == 2]
        if (0,) not in self.low or len(self.low) < 2:
            raise ValueError("channels: the low-pass group needs the identity [0] and one other power")
        self.channels = chans
        self.max_power = max(max(c) for c in chans)
        self.combine, self.skip = combine, bool(skip)
        self.W = nn.ModuleList(nn.Linear(hidden, hidden, bias=False) for _ in chans)
        self.a_ch = nn.Parameter(torch.randn(2, hidden) / math.sqrt(hidden))
        self.a_pre = nn.Parameter(torch.randn(2, hidden) / math.sqrt(hidden))
        self.out = nn.Linear(2 * hidden if skip else hidden, hidden)

    def filters(self, x: torch.Tensor, P: torch.Tensor) -> list[torch.Tensor]:
        """``[P^0 x, P^1 x, ..., P^R x]`` by repeated sparse products."""
        H = [x]
        for _ in range(self.max_power):
            H.append(torch.sparse.mm(P, H[-1]))
        return H

    def forward(self, x: torch.Tensor, P: torch.Tensor) -> torch.Tensor:
        H = self.filters(x, P)
        act = nn.functional.elu
        Z = {}
        for c, W in zip(self.channels, self.W, strict=True):
            F = H[c[0]] if len(c) == 1 else H[c[0]] - H[c[1]]
            Z[c] = act(W(F))

        def att(group: list[tuple[int, ...]], ref: tuple[int, ...], g: int) -> torch.Tensor:
            members = [c for c in group if c != ref] if g == 0 else group
            S = torch.stack([Z[c] for c in members], 1)  # (N, C, h)
            e = act(S @ self.a_ch[g]) + act(Z[ref] @ self.a_pre[g])[:, None]
            return (torch.softmax(e, 1)[..., None] * S).sum(1)

        xn = att(self.low, (0,), 0)
        if self.band:
            xn = xn + att(self.band, self.band[0], 1)
        if self.combine == "att_bias":
            xn = x + xn
        return self.out(torch.cat([x, xn], 1) if self.skip else xn)


class GCONNet(nn.Module):
    """Encoder -> ``layers`` GCON blocks (batch norm, GELU, dropout) -> per-task linear heads."""

    def __init__(
        self,
        in_features: int = 3,
        hidden: int = 64,
        layers: int = 16,
        heads: Mapping[str, int] | None = None,
        channels: Sequence[Sequence[int]] = DEFAULT_CHANNELS,
        combine: str = "att_bias",
        skip: bool = True,
        dropout: float = 0.3,
    ) -> None:
        super().__init__()
        if layers < 1:
            raise ValueError(f"layers: must be >= 1, got {layers}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout: must be in [0, 1), got {dropout}")
        heads = dict(heads or {"mis": 1})
        for t, w in heads.items():
            _check_task(t)
            if int(w) < 1:
                raise ValueError(f"heads: width of {t!r} must be >= 1, got {w}")
        self.pre = nn.Linear(in_features, hidden)
        self.convs = nn.ModuleList(GCONConv(hidden, channels, combine, skip) for _ in range(layers))
        self.norms = nn.ModuleList(nn.BatchNorm1d(hidden) for _ in range(layers))
        self.drop = nn.Dropout(dropout)
        self.heads = nn.ModuleDict({t: nn.Linear(hidden, int(w)) for t, w in heads.items()})

    def embed(self, b: GraphBatch) -> torch.Tensor:
        """Backbone node embeddings (N, hidden)."""
        P = b.P
        h = self.pre(b.x)
        for conv, bn in zip(self.convs, self.norms, strict=True):
            h = self.drop(nn.functional.gelu(bn(conv(h, P))))
        return h

    def forward(self, b: GraphBatch, task: str) -> torch.Tensor:
        """Per-node probabilities (N,) (``(N, c)`` for a colouring head)."""
        if task not in self.heads:
            raise ValueError(f"task: no head {task!r}; heads are {sorted(self.heads)}")
        out = torch.sigmoid(self.heads[task](self.embed(b)))
        return out.squeeze(-1) if out.shape[-1] == 1 and task != "color" else out

    @torch.no_grad()
    def predict(self, G: Any, task: str) -> torch.Tensor:
        """Eval-mode probabilities on one graph (dropout off, batch-norm running statistics)."""
        was = self.training
        self.eval()
        try:
            return self(collate([G]), task)
        finally:
            self.train(was)


def complement_batch(b: GraphBatch) -> GraphBatch:
    """The batch of complement graphs (features recomputed; MIS on it = MaxClique on ``b``)."""
    import networkx as nx

    return collate([nx.complement(G) for G in b.graphs], b.x.dtype)


# ----------------------------------------------------------------------------------------------- losses
def _seg(v: torch.Tensor, idx: torch.Tensor, B: int) -> torch.Tensor:
    return torch.zeros(B, *v.shape[1:], dtype=v.dtype, device=v.device).index_add_(0, idx, v)


def copt_loss(
    task: str,
    p: torch.Tensor,
    b: GraphBatch,
    alpha: float = 1.0,
    beta: float | None = None,
    reduce: bool = True,
) -> torch.Tensor:
    """Energy of ``task`` for probabilities ``p`` on batch ``b`` (mean over graphs, or per graph)."""
    _check_task(task)
    if beta is None:
        beta = 1.0 if task == "mds" else 1.01
    if task in ("mis", "mvc", "maxclique") and not beta > alpha:
        raise ValueError(f"beta: must be > alpha ({alpha}) for {task}, got {beta}")
    B, n = b.num_graphs, b.sizes.to(p.dtype)
    ei = b.comp_index if task == "maxclique" else b.edge_index
    eb = b.batch[ei[0]]
    if task == "color":
        if p.dim() != 2:
            raise ValueError("p: colouring needs (N, c) probabilities")
        node = (1 - p.sum(1)) ** 2
        edge = 0.5 * (p[ei[0]] * p[ei[1]]).sum(1)
        out = _seg(node, b.batch, B) + _seg(edge, eb, B)
    elif p.dim() != 1 or p.shape[0] != b.num_nodes:
        raise ValueError(f"p: expected shape ({b.num_nodes},), got {tuple(p.shape)}")
    elif task in ("mis", "maxclique"):
        pair = 0.5 * p[ei[0]] * p[ei[1]]
        out = 2.0 / n * (-alpha * _seg(p, b.batch, B) + beta * _seg(pair, eb, B))
    elif task == "mvc":
        pair = 0.5 * (1 - p[ei[0]]) * (1 - p[ei[1]])
        out = (alpha * _seg(p, b.batch, B) + 2.0 * beta * _seg(pair, eb, B)) / n
    elif task == "maxcut":
        s = 2 * p - 1
        out = _seg(s[ei[0]] * s[ei[1]], eb, B)  # 2 * sum over undirected edges
    else:  # mds
        lq = torch.log1p(-p.clamp(max=1 - 1e-7))
        nb = torch.zeros_like(p).index_add_(0, ei[1], lq[ei[0]])
        out = _seg(p, b.batch, B) + beta * _seg(torch.exp(lq + nb), b.batch, B)
    return out.mean() if reduce else out


# ----------------------------------------------------------------------------------------------- decoders
def _greedy_mis(scores: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
    from optarium.combinatorial.baselines import greedy_decode

    return greedy_decode(scores, A, "mis")


def decode(task: str, p: torch.Tensor, G: Any, n_starts: int = 8) -> Result:
    """A feasible solution of ``task`` on ``G`` from probabilities ``p``; ``value`` = its objective."""
    from optarium.combinatorial.graphs import adjacency
    from optarium.combinatorial.problems import is_feasible, objective, repair

    _check_task(task)
    check_graph(G)
    t0 = time.perf_counter()
    p = p.detach().to(torch.float64).cpu()
    n = G.number_of_nodes()
    prob = "coloring" if task == "color" else task
    if task in ("mis", "maxclique", "mvc"):
        A = adjacency(G)
        if task == "maxclique":
            A = 1.0 - A - torch.eye(n, dtype=A.dtype)
        s = p if task != "mvc" else 1 - p
        k = max(1, min(int(n_starts), n))
        starts = torch.argsort(s, descending=True, stable=True)[:k]
        S = s.repeat(k, 1)
        S[torch.arange(k), starts] = 2.0
        sols = _greedy_mis(S, A)
        best = sols[int(torch.argmax(sols.sum(1)))]  # largest IS = smallest (minimal) cover
        x = ~best if task == "mvc" else best
    elif task == "maxcut":
        x = p > 0.5
    elif task == "mds":
        order = torch.argsort(p, descending=True, stable=True).tolist()
        x = torch.zeros(n, dtype=torch.bool)
        dom = np.zeros(n, dtype=bool)
        for u in order:
            if dom.all():
                break
            cov = [u, *G[u]]
            if not dom[cov].all():
                x[u] = True
                dom[cov] = True
        for u in sorted(np.flatnonzero(x.numpy()).tolist(), key=lambda u: float(p[u])):
            x[u] = False
            if not is_feasible(G, x, "mds"):
                x[u] = True
    else:
        if p.dim() != 2 or p.shape[0] != n:
            raise ValueError(f"p: colouring needs ({n}, c) probabilities")
        x = repair(G, torch.argmax(p, 1), "coloring")
    feas = bool(is_feasible(G, x, prob))
    return Result(
        x=x,
        value=objective(G, x, prob),
        status="converged",
        n_iter=1,
        wall_time_s=time.perf_counter() - t0,
        extras={"feasible": feas},
    )


# ----------------------------------------------------------------------------------------------- training
def train_unsupervised(
    net: GCONNet,
    train: Sequence[Any],
    task: str | Sequence[str] = "mis",
    epochs: int = 200,
    lr: float = 5e-4,
    clip: float = 0.5,
    batch_size: int = 32,
    weights: Mapping[str, float] | None = None,
    strategy: str = "sum",
    seed: int = 0,
    callback: Any = None,
    weight_decay: float = 0.0,
) -> Result:
    """AdamW on the energy of ``task`` (or the weighted multi-task sum); ``history`` per epoch.

    ``train``: graphs or :func:`graph_data` dicts. ``callback(epoch, net)`` runs after each epoch (and at
    epoch 0 before training); it may return a dict of metrics added to the history. Parameters with
    ``requires_grad=False`` are not optimised; if all backbone parameters are frozen the backbone runs in
    eval mode.
    """
    tasks = [task] if isinstance(task, str) else list(task)
    if not tasks:
        raise ValueError("task: need at least one task")
    for t in tasks:
        _check_task(t)
        if t not in net.heads:
            raise ValueError(f"task: net has no head {t!r}")
    if strategy not in ("sum", "alternate"):
        raise ValueError(f"strategy: must be 'sum' or 'alternate', got {strategy!r}")
    if epochs < 0 or batch_size < 1 or lr <= 0:
        raise ValueError("epochs >= 0, batch_size >= 1 and lr > 0 are required")
    w = {t: 1.0 for t in tasks} if weights is None else {t: float(weights[t]) for t in tasks}
    data = [it if isinstance(it, Mapping) else graph_data(it) for it in train]
    params = [q for q in net.parameters() if q.requires_grad]
    if not params:
        raise ValueError("net: has no trainable parameters")
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    frozen_backbone = not any(
        q.requires_grad for name, q in net.named_parameters() if not name.startswith("heads.")
    )
    g = torch.Generator().manual_seed(int(seed))
    batches = [collate(data[i : i + batch_size]) for i in range(0, len(data), batch_size)]
    rows: list[dict[str, float]] = []
    t0 = time.perf_counter()
    step = 0

    def log(e: int, loss: float) -> None:
        extra = callback(e, net) if callback is not None else None
        rows.append({"step": e, "loss": loss, **(extra or {})})

    log(0, math.nan)
    emb: list[torch.Tensor] = []
    if frozen_backbone:  # eval-mode backbone on fixed inputs: its embeddings are constant
        net.eval()
        with torch.no_grad():
            emb = [net.embed(b) for b in batches]

    def probs(bi: int, t: str) -> torch.Tensor:
        if not frozen_backbone:
            return net(batches[bi], t)
        out = torch.sigmoid(net.heads[t](emb[bi]))
        return out.squeeze(-1) if t != "color" else out

    for e in range(1, epochs + 1):
        net.train()
        if frozen_backbone:
            net.eval()
        tot, cnt = 0.0, 0
        for bi in torch.randperm(len(batches), generator=g).tolist():
            b = batches[bi]
            active = tasks if strategy == "sum" else [tasks[step % len(tasks)]]
            loss = sum(w[t] * copt_loss(t, probs(bi, t), b) for t in active)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if clip:
                torch.nn.utils.clip_grad_norm_(params, clip)
            opt.step()
            tot, cnt, step = tot + float(loss.detach()), cnt + 1, step + 1
        log(e, tot / max(cnt, 1))
    net.eval()
    hist = Trace.from_rows(rows)
    return Result(
        x=net,
        value=rows[-1]["loss"],
        status="max_iter",
        n_iter=step,
        history=hist,
        wall_time_s=time.perf_counter() - t0,
    )


def transfer(
    net: GCONNet,
    source: str,
    target: str,
    strategy: str = "invert_head",
    freeze: str | None = "backbone",
    seed: int | None = None,
) -> GCONNet:
    """A copy of ``net`` with a head for ``target`` built from ``source`` (see the module docstring)."""
    _check_task(source)
    _check_task(target)
    if source not in net.heads:
        raise ValueError(f"source: net has no head {source!r}")
    if strategy not in ("invert_head", "fresh_head", "complement", "copy_head"):
        raise ValueError(f"strategy: unknown {strategy!r}")
    if freeze not in (None, "backbone"):
        raise ValueError(f"freeze: must be None or 'backbone', got {freeze!r}")
    new = copy.deepcopy(net)
    src = new.heads[source]
    if strategy == "fresh_head":
        if seed is not None:
            torch.manual_seed(int(seed))
        width = 10 if target == "color" and src.out_features == 1 else src.out_features
        head = nn.Linear(src.in_features, width)
    else:
        head = copy.deepcopy(src)
        if strategy == "invert_head":
            with torch.no_grad():
                head.weight.neg_()
                head.bias.neg_()
    new.heads[target] = head
    if freeze == "backbone":
        for name, q in new.named_parameters():
            q.requires_grad_(name.startswith(f"heads.{target}."))
    return new
