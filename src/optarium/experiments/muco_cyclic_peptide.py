r"""MuCO in miniature: is a learned torsion sampler + proximal MMFF94 refinement non-inferior to ETKDG, and
is tree-structured K x M sampling non-inferior to independent draws?

Paper: Wang et al., "Generative Peptide Cyclization Empowered by Multi-stage Conformation Optimization",
arXiv 2602.11189 (method: :mod:`optarium.science.muco`). The paper's claim (CPSea, CHARMM36): three stages
(generative backbone, generative side chains, force-field refinement from many samples) give low-energy,
diverse, closed cyclic conformers, and the tree-structured K x M sampling is efficient.

**Problem** (the spec's quick scale, reduced to fit 60 CPU-s). Each seed is one random head-to-tail cyclic
peptide (no Pro/Cys/Trp, length ``L``); its reference ensemble is ETKDGv3 (macrocycle torsions) + MMFF94
minimisation, generated inside the run (untimed for the units; the spec's cached test-data ensembles were not
built). One pair of tiny torsional flows (stage 1 backbone, stage 2 chi | backbone) is trained once per
process on the reference ensembles of all sequences (train = test sequences, as in the spec's quick).

**Methods** (the same stage 3 for all: MMFF94 + harmonic heavy-atom anchor 0.1 kJ/mol/A^2, ``max_steps``
BFGS iterations, the ``"repo"`` success rule plus a clash check): ``muco-9x1`` (9 backbones x 1 side chain),
``muco-3x3`` (tree: 3 backbones x 3 side chains), ``etkdg`` (9 ETKDGv3 embeddings, the classical baseline).

**Metrics**: success fraction, best and mean MMFF energy over successes (kcal/mol; best falls back to the
lowest energy over all samples when none succeeds), pre-relaxation N(1)-C(L) distance (median, fraction
< 2 A), Shannon entropy of backbone-torsion clusters (sign pattern of phi/psi), CPU seconds per conformer.

**Rule** (the spec's, stated up front): per-sequence paired differences over seeds, mean +- SE.
Non-inferior: mean(method - comparator) + 2 SE <= 2 kcal/mol in best energy and mean - 2 SE >= -0.1 in success
fraction; worse: energy difference - 2 SE > 2 kcal/mol or success difference + 2 SE < -0.1. (a) muco-9x1 vs
etkdg, (b) muco-3x3 vs muco-9x1. Reproduced if (a) and (b) are non-inferior; not reproduced if either is
worse; otherwise inconclusive. Lower cost is reported, not evidence (cheaper by construction).

Scaled down: CPSea, ESM-2, FoldFlow-2/EquiformerV2, CHARMM36/OpenMM, AF2 baselines are not used (see the
module docstring); quick: 6 sequences of length 5, 6 reference conformers each, 9 refined conformers per arm.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from optarium._core.seeding import derive_seed
from optarium.harness.experiment import Experiment, Verdict, register
from optarium.harness.stats import paired_effect
from optarium.harness.verdicts import last_values

__all__ = ["CONFIGS", "EXPERIMENT", "decide", "plot", "run", "sequence_for"]

CLAIM = (
    "A learned (flow-matching) torsion sampler followed by proximal force-field refinement gives closed, "
    "low-energy cyclic-peptide conformers, and tree-structured K x M sampling matches independent draws."
)
RULE = (
    "Per-sequence paired differences (mean, SE over sequences) in best MMFF energy (kcal/mol) and success "
    "fraction at 9 refined conformers per arm: non-inferior if energy diff + 2 SE <= 2 and success diff "
    "- 2 SE >= -0.1; worse if energy diff - 2 SE > 2 or success diff + 2 SE < -0.1. (a) muco-9x1 vs etkdg, "
    "(b) muco-3x3 vs muco-9x1. Reproduced if both non-inferior; not reproduced if either worse; else "
    "inconclusive."
)
METHODS = ("muco-9x1", "muco-3x3", "etkdg")
BASELINES = ("etkdg",)
KM = {"muco-9x1": (9, 1), "muco-3x3": (3, 3)}
MARGIN_E, MARGIN_S = 2.0, 0.1
ALPHABET = "ADEFGHIKLMNQRSTVY"

_BASE: dict[str, Any] = {
    "length": 5,
    "n_ref": 6,
    "epochs": 150,
    "width": 64,
    "flow_steps": 20,
    "max_steps": 500,
    "methods": list(METHODS),
}
CONFIGS: dict[str, dict[str, Any]] = {
    "smoke": {**_BASE, "n_ref": 3, "epochs": 20, "max_steps": 100, "seeds": 2},
    "quick": {**_BASE, "seeds": 6},
    "full": {**_BASE, "length": 6, "n_ref": 10, "epochs": 600, "width": 128, "max_steps": 2000, "seeds": 20},
}


def sequence_for(seed: int, length: int) -> str:
    rng = np.random.default_rng(derive_seed(int(seed), "muco-sequence"))
    return "".join(rng.choice(list(ALPHABET), size=int(length)))


@functools.lru_cache(maxsize=64)
def _reference(seq: str, n_ref: int, max_steps: int) -> tuple[np.ndarray, ...]:
    from optarium.science.muco import CyclicPeptide, ForceFieldRefiner, etkdg_conformers

    pep = CyclicPeptide(seq)
    ref = ForceFieldRefiner(restraint_weight=0.0, max_steps=max_steps)
    confs = [
        ref.refine(pep, c) for c in etkdg_conformers(pep, n_ref, derive_seed(0, "muco-ref", seq) % 2**31)
    ]
    confs.sort(key=lambda c: c.energy)
    return tuple(c.coords for c in confs)


@functools.lru_cache(maxsize=4)
def _model(key: tuple) -> Any:
    from optarium.science.muco import CyclicPeptide, ForceFieldRefiner, MuCO

    length, n_ref, epochs, width, steps, max_steps, seeds = key
    data = []
    for s in range(seeds):
        seq = sequence_for(s, length)
        data.append((CyclicPeptide(seq), list(_reference(seq, n_ref, max_steps))))
    torch.manual_seed(derive_seed(0, "muco-init") % 2**31)
    model = MuCO(length, ForceFieldRefiner(max_steps=max_steps), width=width, steps=steps)
    model.fit(data, epochs, torch.Generator().manual_seed(derive_seed(0, "muco-train")))
    return model


def _key(config: Mapping[str, Any]) -> tuple:
    ks = ("length", "n_ref", "epochs", "width", "flow_steps", "max_steps", "seeds")
    return tuple(int(config[k]) for k in ks)


def _clusters(pep: Any, confs: Sequence[Any]) -> list[str]:
    n = 2 * (pep.length - 1)  # phi_2..phi_L, psi_1..psi_{L-1}
    return ["".join("+" if a > 0 else "-" for a in pep.get_torsions(c.coords)[:n]) for c in confs]


def run(ctx: Any, method: str, seed: int, config: Mapping[str, Any]) -> None:
    """One (method, sequence) unit: 9 refined conformers, scored."""
    from optarium.science.muco import CyclicPeptide, ForceFieldRefiner, etkdg_conformers, shannon_entropy

    seq = sequence_for(seed, int(config["length"]))
    pep = CyclicPeptide(seq)
    with ctx.untimed():
        model = _model(_key(config))
    t0 = time.process_time()
    if method == "etkdg":
        refiner = ForceFieldRefiner(max_steps=int(config["max_steps"]))
        starts = etkdg_conformers(pep, 9, derive_seed(seed, "muco-etkdg") % 2**31)
        confs = [refiner.refine(pep, x, k=i) for i, x in enumerate(starts)]
    else:
        K, M = KM[method]
        confs = model.sample(pep, K, M, torch.Generator().manual_seed(derive_seed(seed, "muco-sample")))
    cpu = (time.process_time() - t0) / max(len(confs), 1)
    with ctx.evaluating():
        ok = [c for c in confs if c.success]
        best = min(c.energy for c in ok) if ok else min(c.energy for c in confs)
        before = np.array([c.closure_before for c in confs])
        ctx.log(
            0,
            best_energy=best,
            mean_energy=float(np.mean([c.energy for c in ok])) if ok else best,
            success=len(ok) / len(confs),
            closure_before_median=float(np.median(before)),
            closure_before_lt2=float((before < 2.0).mean()),
            entropy=shannon_entropy(_clusters(pep, confs)),
            cpu_per_conformer=cpu,
            n_conformers=float(len(confs)),
        )


def _compare(records: Sequence[Mapping[str, Any]], method: str, comp: str, tag: str, fig: dict) -> str:
    # better="higher" makes each gap method - comparator
    e = paired_effect(
        last_values(records, "best_energy", method),
        last_values(records, "best_energy", comp),
        better="higher",
    )
    s = paired_effect(
        last_values(records, "success", method), last_values(records, "success", comp), better="higher"
    )
    de, ds = e.mean, s.mean
    fig.update(
        {
            f"{tag}:energy_diff": de,
            f"{tag}:energy_se": e.se,
            f"{tag}:success_diff": ds,
            f"{tag}:success_se": s.se,
            f"{tag}:n": e.n,
        }
    )
    if e.n < 2 or not (math.isfinite(e.se) and math.isfinite(s.se)):
        return "inconclusive"
    if de - 2 * e.se > MARGIN_E or ds + 2 * s.se < -MARGIN_S:
        return "worse"
    if de + 2 * e.se <= MARGIN_E and ds - 2 * s.se >= -MARGIN_S:
        return "non-inferior"
    return "inconclusive"


def decide(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> Verdict:
    """The rule of :data:`RULE`."""
    fig: dict[str, Any] = {}
    for m in METHODS:
        for metric in (
            "best_energy",
            "mean_energy",
            "success",
            "closure_before_median",
            "closure_before_lt2",
            "entropy",
            "cpu_per_conformer",
        ):
            v = list(last_values(records, metric, m).values())
            fig[f"{m}:{metric}_mean"] = float(np.mean(v)) if v else math.nan
    a = _compare(records, "muco-9x1", "etkdg", "a", fig)
    b = _compare(records, "muco-3x3", "muco-9x1", "b", fig)
    if a == "worse" or b == "worse":
        outcome = "not reproduced"
    elif a == "non-inferior" and b == "non-inferior":
        outcome = "reproduced"
    else:
        outcome = "inconclusive"
    summary = (
        f"(a) muco-9x1 - etkdg: best energy {fig['a:energy_diff']:+.2f} ± {fig['a:energy_se']:.2f} kcal/mol, "
        f"success {fig['a:success_diff']:+.2f} ± {fig['a:success_se']:.2f} -> {a}; (b) muco-3x3 - muco-9x1: "
        f"{fig['b:energy_diff']:+.2f} ± {fig['b:energy_se']:.2f}, success {fig['b:success_diff']:+.2f} ± "
        f"{fig['b:success_se']:.2f} -> {b}; n={fig['a:n']} sequences -> {outcome}"
    )
    return Verdict(outcome, fig, summary)


def plot(records: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> dict[str, Any]:
    """Best energy and success fraction per sequence, per method."""
    from optarium.harness.figures import panel_grid

    fig, (ax, ax2) = panel_grid(2)
    for i, m in enumerate(METHODS):
        be = last_values(records, "best_energy", m)
        ax.scatter([s + 0.15 * i for s in be], list(be.values()), label=m)
        su = last_values(records, "success", m)
        ax2.bar([s + 0.28 * i for s in su], list(su.values()), width=0.28, label=m)
    ax.set_xlabel("sequence (seed)")
    ax.set_ylabel("best MMFF94 energy of successes (kcal/mol)")
    ax.set_title("best energy, 9 refined conformers")
    ax.legend(fontsize=7)
    ax2.set_xlabel("sequence (seed)")
    ax2.set_ylabel("success fraction")
    ax2.set_title("closure (repo rule) and no clash")
    ax2.legend(fontsize=7)
    return {"energy_and_success": fig}


EXPERIMENT = register(
    Experiment(
        slug="muco-cyclic-peptide",
        claim=CLAIM,
        rule=RULE,
        methods=METHODS,
        baselines=BASELINES,
        configs=CONFIGS,
        run=run,
        decide=decide,
        plot=plot,
        scaled_down=(
            "MMFF94 (RDKit) instead of CHARMM36; tiny MLP torsion flows instead of FoldFlow-2/EquiformerV2 "
            "with ESM-2; random 5-residue H2T peptides with ETKDG+MMFF reference ensembles built in the run "
            "instead of CPSea; quick 6 sequences x 9 conformers per arm, 500 BFGS steps"
        ),
    )
)
