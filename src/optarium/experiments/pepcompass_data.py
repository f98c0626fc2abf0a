r"""The cached networks of the pepcompass experiment: a small peptide VAE and two in-silico activity oracles.

**Data.** ``modlamp`` 4.3.3's bundled ``AMPvsUniProt.csv`` (2,600 AMPs vs 2,600 UniProt non-AMPs), kept to
sequences of length <= 25 over the 20 standard residues: 1,819 peptides (1,114 AMP, 705 non-AMP).

**Networks** (made once by :func:`build_artifacts`, run by ``scripts/pepcompass_setup.py``; the float32 state
dicts are committed under ``optarium/experiments/data/pepcompass/`` so runs and CI never retrain):

* :class:`PeptideVAE`: an MLP VAE, one-hot ``(L=25, 21)`` input (20 residues + pad, sequences left-aligned and
  padded at the end), latent ``d = 16``, a tanh MLP decoder ``16 -> 128 -> 128 -> 25*21`` logits (smooth, so
  its Jacobian and second derivatives exist everywhere). Trained on all 1,819 sequences: Adam lr 2e-3, 400
  epochs, batch 128, KL weight annealed linearly 0 -> 0.05 over the first 200 epochs (a small weight keeps the
  reconstruction sharp), torch seed 0.
* :class:`CompositionLogit` "assay" and "predictor": L2-regularised logistic regressions (AMP vs non-AMP) on
  differentiable composition features of a (soft) one-hot sequence: residue counts / 25, residue composition,
  dipeptide composition (400) and length / 25 (441 features). Their output is the **logit** (continuous; a
  probability would saturate near 1 for AMP-like peptides). The two are trained on disjoint halves of the
  data (a seeded permutation, seed 0): the assay oracle only scores evaluated sequences, the predictor is the
  cheap differentiable model used inside PoGS and the mutation ranking of LE-BO.

Both oracles are in-silico proxies of antimicrobial activity, not MIC measurements. Training takes about
40 CPU-s on one core (:func:`build_artifacts`; 0.99 exact VAE reconstructions, held-out oracle accuracy
0.82 / 0.83, assay-predictor logit correlation 0.75: ``meta.json``).
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from pathlib import Path
from typing import Any

import torch
from torch import nn

__all__ = [
    "ALPHABET",
    "LENGTH",
    "CompositionLogit",
    "PeptideVAE",
    "build_artifacts",
    "composition_features",
    "load_artifacts",
    "load_peptides",
    "one_hot",
]

ALPHABET = "ACDEFGHIKLMNPQRSTVWY"
LENGTH = 25
N_SYMBOLS = len(ALPHABET) + 1  # + pad (index 20)
LATENT_DIM = 16
DATA_DIR = "data/pepcompass"


def load_peptides(max_length: int = LENGTH) -> tuple[list[str], torch.Tensor]:
    """The modlamp AMPvsUniProt sequences of length <= ``max_length`` over the 20 standard residues, in file
    order, and their labels (1 = AMP)."""
    import csv

    path = resources.files("modlamp") / "data" / "AMPvsUniProt.csv"
    seqs: list[str] = []
    labels: list[float] = []
    with path.open() as fh:
        rows = list(csv.reader(fh))
    for row in rows[1:]:
        s = row[0].strip().upper()
        if 0 < len(s) <= max_length and set(s) <= set(ALPHABET):
            seqs.append(s)
            labels.append(float(row[1]))
    return seqs, torch.tensor(labels)


def one_hot(seqs: list[str], dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``(n, 25, 21)`` one-hot of left-aligned sequences, pad (index 20) after the last residue
    (:func:`optarium.bo.latent.sequence_one_hot`)."""
    from optarium.bo.latent import sequence_one_hot

    return sequence_one_hot(seqs, LENGTH, ALPHABET, dtype)


def composition_features(p: torch.Tensor) -> torch.Tensor:
    """Differentiable features of ``(..., 25, 21)`` (soft) one-hot sequences: counts / 25 (20), composition
    (20), dipeptide composition (400), length / 25 (1)."""
    aa = p[..., : len(ALPHABET)]
    counts = aa.sum(-2)
    length = counts.sum(-1, keepdim=True).clamp_min(1.0)
    di = torch.einsum("...pa,...pb->...ab", aa[..., :-1, :], aa[..., 1:, :]).flatten(-2)
    di = di / (length - 1.0).clamp_min(1.0)
    return torch.cat([counts / LENGTH, counts / length, di, length / LENGTH], dim=-1)


class CompositionLogit(nn.Module):
    """Logistic regression on :func:`composition_features`; ``forward`` returns the AMP logit."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(441, 1)
        self.register_buffer("mean", torch.zeros(441))
        self.register_buffer("scale", torch.ones(441))

    def forward(self, p: torch.Tensor) -> torch.Tensor:
        f = (composition_features(p) - self.mean.to(p)) / self.scale.to(p)
        return torch.nn.functional.linear(f, self.linear.weight.to(p), self.linear.bias.to(p)).squeeze(-1)


class PeptideVAE(nn.Module):
    """MLP VAE on one-hot peptides; :meth:`decode` maps ``(..., 16)`` latents to ``(..., 25, 21)`` logits."""

    def __init__(self, hidden: int = 128, latent: int = LATENT_DIM) -> None:
        super().__init__()
        n = LENGTH * N_SYMBOLS
        self.enc = nn.Sequential(nn.Linear(n, hidden), nn.Tanh(), nn.Linear(hidden, 2 * latent))
        self.dec = nn.Sequential(
            nn.Linear(latent, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, n)
        )
        self.latent = latent

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and log-variance of q(z | x) for ``(n, 25, 21)`` one-hots."""
        h = self.enc(x.flatten(-2).to(self.enc[0].weight))
        return h[..., : self.latent], h[..., self.latent :]

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """Per-position logits ``(..., 25, 21)``, in ``z``'s dtype."""
        out = z
        for layer in self.dec:
            if isinstance(layer, nn.Linear):
                out = torch.nn.functional.linear(out, layer.weight.to(z), layer.bias.to(z))
            else:
                out = layer(out)
        return out.unflatten(-1, (LENGTH, N_SYMBOLS))


def _train_oracle(
    x: torch.Tensor, y: torch.Tensor, seed: int, weight_decay: float = 1e-2
) -> CompositionLogit:
    torch.manual_seed(seed)
    model = CompositionLogit()
    f = composition_features(x)
    model.mean.copy_(f.mean(0))
    model.scale.copy_(f.std(0).clamp_min(1e-3))
    opt = torch.optim.LBFGS(model.parameters(), lr=1.0, max_iter=500, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = nn.functional.binary_cross_entropy_with_logits(model(x), y)
        loss = loss + weight_decay * model.linear.weight.pow(2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    return model


def build_artifacts(out_dir: str | Path, seed: int = 0, epochs: int = 400) -> dict[str, Any]:
    """Train the VAE and the two oracles deterministically and write ``vae.pt``, ``assay.pt``,
    ``predictor.pt`` (float32 state dicts) and ``meta.json`` (split sizes, accuracies) to ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    seqs, labels = load_peptides()
    x = one_hot(seqs)
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(len(seqs), generator=g)
    half = len(seqs) // 2
    idx_a, idx_p = perm[:half], perm[half:]
    assay = _train_oracle(x[idx_a], labels[idx_a], seed)
    predictor = _train_oracle(x[idx_p], labels[idx_p], seed + 1)

    torch.manual_seed(seed)
    vae = PeptideVAE()
    opt = torch.optim.Adam(vae.parameters(), lr=2e-3)
    target = x.argmax(-1)
    for epoch in range(epochs):
        beta = 0.05 * min(1.0, epoch / (epochs / 2))
        order = torch.randperm(len(seqs), generator=g)
        for i in range(0, len(seqs), 128):
            b = order[i : i + 128]
            mu, logvar = vae.encode(x[b])
            z = mu + torch.randn(mu.shape, generator=g) * (0.5 * logvar).exp()
            logits = vae.decode(z)
            rec = nn.functional.cross_entropy(logits.flatten(0, 1), target[b].flatten(), reduction="sum")
            kl = -0.5 * (1 + logvar - mu.pow(2) - logvar.exp()).sum()
            loss = (rec + beta * kl) / len(b)
            opt.zero_grad()
            loss.backward()
            opt.step()
    with torch.no_grad():
        mu, _ = vae.encode(x)
        recon = (vae.decode(mu).argmax(-1) == target).all(-1).float().mean().item()
        pos = (vae.decode(mu).argmax(-1) == target).float().mean().item()
        acc_a = ((assay(x[idx_p]) > 0).float() == labels[idx_p]).float().mean().item()
        acc_p = ((predictor(x[idx_a]) > 0).float() == labels[idx_a]).float().mean().item()
        corr = torch.corrcoef(torch.stack([assay(x), predictor(x)]))[0, 1].item()
    for name, model in (("vae", vae), ("assay", assay), ("predictor", predictor)):
        torch.save({k: v.float().clone() for k, v in model.state_dict().items()}, out / f"{name}.pt")
    meta = {
        "n_sequences": len(seqs),
        "n_amp": int(labels.sum()),
        "n_assay_train": int(half),
        "n_predictor_train": len(seqs) - half,
        "vae_exact_reconstruction": recon,
        "vae_position_accuracy": pos,
        "assay_heldout_accuracy": acc_a,
        "predictor_heldout_accuracy": acc_p,
        "assay_predictor_logit_correlation": corr,
        "seed": seed,
        "epochs": epochs,
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    return meta


def artifact_dir() -> Path:
    """Where the committed networks live (package data)."""
    return Path(str(resources.files("optarium.experiments"))) / DATA_DIR


@functools.lru_cache(maxsize=2)
def load_artifacts(path: str | None = None) -> tuple[PeptideVAE, CompositionLogit, CompositionLogit]:
    """The cached ``(vae, assay, predictor)`` in float64 eval mode (read once per process)."""
    d = Path(path) if path is not None else artifact_dir()
    vae, assay, predictor = PeptideVAE(), CompositionLogit(), CompositionLogit()
    for name, model in (("vae", vae), ("assay", assay), ("predictor", predictor)):
        model.load_state_dict(torch.load(d / f"{name}.pt", weights_only=True))
        model.double().eval()
        for p in model.parameters():
            p.requires_grad_(False)
    return vae, assay, predictor
