"""Tests of optarium.science.muco (RDKit/MMFF94 miniature of MuCO)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

pytest.importorskip("rdkit", reason="rdkit is in the science extra")

from optarium.science.muco import (
    CHARMM_AMIDE_CN,
    DISULFIDE_SS,
    KCAL_PER_KJ,
    Conformer,
    CyclicPeptide,
    ForceFieldRefiner,
    MuCO,
    TorsionFlow,
    closure_ok,
    cyclic_distance,
    detect_topology,
    etkdg_conformers,
    fold_pi_symmetric,
    shannon_entropy,
    torus_interpolate,
    torus_target_velocity,
    unfold_pi_symmetric,
    wrap_angle,
)


@pytest.fixture(scope="module")
def pep() -> CyclicPeptide:
    return CyclicPeptide("GAFKDA")


@pytest.fixture(scope="module")
def minimised(pep: CyclicPeptide) -> list[Conformer]:
    ref = ForceFieldRefiner(restraint_weight=0.0, max_steps=2000)
    return [ref.refine(pep, x) for x in etkdg_conformers(pep, 3, seed=7)]


def test_forward_kinematics_round_trip(pep: CyclicPeptide, minimised: list[Conformer]) -> None:
    _, mask = pep.torsion_layout()
    rng = np.random.default_rng(0)
    target = np.where(mask, rng.uniform(-math.pi, math.pi, mask.shape), 0.0)
    x = pep.forward_kinematics(target, minimised[0].coords)
    got = pep.get_torsions(x)
    assert np.abs(np.angle(np.exp(1j * (got - target))))[mask].max() < 1e-3
    # bond lengths of the open chain are those of the template
    for b in pep.open_chain.GetBonds():
        i, j = b.GetBeginAtomIdx(), b.GetEndAtomIdx()
        t = minimised[0].coords
        assert abs(np.linalg.norm(x[i] - x[j]) - np.linalg.norm(t[i] - t[j])) < 1e-6


def test_torsion_layout_counts(pep: CyclicPeptide) -> None:
    quads, mask = pep.torsion_layout()
    assert len(quads) == 3 * 5 + 4 * 6
    # backbone 15 + chi: F 2, K 4, D 2 (G and A have none)
    assert int(mask.sum()) == 15 + 8


def test_torus_geometry_wraps() -> None:
    x0 = torch.tensor([3.0, -3.0])
    x1 = torch.tensor([-3.0, 3.0])
    # shortest way crosses +-pi: the midpoint is at pi, not at 0
    mid = torus_interpolate(x0, x1, torch.tensor(0.5))
    assert torch.allclose(mid.abs(), torch.full((2,), math.pi), atol=1e-6)
    u = torus_target_velocity(x0, x1, torch.tensor(0.0))
    assert torch.allclose(u, torch.tensor([2 * math.pi - 6.0, -(2 * math.pi - 6.0)]), atol=1e-6)
    w = wrap_angle(torch.tensor([math.pi, -math.pi, 3 * math.pi, 0.1]))
    assert (w > -math.pi).all() and (w <= math.pi).all()
    assert torch.allclose(w, torch.tensor([math.pi, math.pi, math.pi, 0.1]), atol=1e-6)


def test_cyclic_relative_position() -> None:
    L = 7
    i, j = torch.meshgrid(torch.arange(L), torch.arange(L), indexing="ij")
    d = cyclic_distance(i, j, L)
    assert int(d[0, L - 1]) == 1 and torch.equal(d, d.T)
    # shortest path on the ring graph (Floyd-Warshall)
    sp = torch.full((L, L), 10**6)
    for a in range(L):
        sp[a, a] = 0
        sp[a, (a + 1) % L] = sp[(a + 1) % L, a] = 1
    for k in range(L):
        sp = torch.minimum(sp, sp[:, k : k + 1] + sp[k : k + 1, :])
    assert torch.equal(d, sp)


def test_closure_check_mmff(pep: CyclicPeptide, minimised: list[Conformer]) -> None:
    for c in minimised:
        assert abs(c.closure_after - 1.38) <= 0.03
        assert c.success and closure_ok(c.closure_after, c.energy, rule="paper")
    # a linear peptide fails the check: its N-terminus is far from its C-terminus
    from rdkit import Chem
    from rdkit.Chem import AllChem

    heavy = Chem.MolFromSequence("GAFKDA")
    names = [
        (a.GetPDBResidueInfo().GetResidueNumber(), a.GetPDBResidueInfo().GetName().strip())
        for a in heavy.GetAtoms()
    ]
    lin = Chem.AddHs(heavy)  # hydrogens are appended: heavy-atom indices unchanged
    AllChem.EmbedMolecule(lin, randomSeed=1)
    xyz = lin.GetConformer().GetPositions()
    d = float(np.linalg.norm(xyz[names.index((1, "N"))] - xyz[names.index((6, "C"))]))
    assert not closure_ok(d, 0.0, rule="repo") and not closure_ok(d, 0.0, rule="paper")


def test_success_rules() -> None:
    assert closure_ok(1.43, rule="repo") and not closure_ok(1.44, rule="repo")
    assert closure_ok(2.15, mode="C2C", rule="repo") and not closure_ok(2.2, mode="C2C", rule="repo")
    assert closure_ok(1.40, 10.0, rule="paper") and not closure_ok(1.50, 10.0, rule="paper")
    cap = 1e3 * KCAL_PER_KJ
    assert closure_ok(1.38, cap - 1, rule="paper") and not closure_ok(1.38, cap + 1, rule="paper")
    with pytest.raises(ValueError, match="rule"):
        closure_ok(1.38, rule="other")
    with pytest.raises(ValueError, match="energy"):
        closure_ok(1.38, rule="paper")


def test_refiner_flags_open_ring_as_failure(pep: CyclicPeptide, minimised: list[Conformer]) -> None:
    # a torsion sample that leaves the ring far open, refined for one step only, must not be a success
    _, mask = pep.torsion_layout()
    t = np.where(mask, math.pi, 0.0)
    x = pep.forward_kinematics(t, minimised[0].coords)
    c = ForceFieldRefiner(max_steps=1).refine(pep, x)
    assert c.closure_after > 1.43 and not c.success
    assert MuCO.best([c]) is None


def test_charmm36_stage3_closes_rings_at_charmm_lengths_with_an_exact_harmonic_anchor(
    pep: CyclicPeptide,
) -> None:
    pytest.importorskip("openmm", reason="openmm (CHARMM36) is in the science extra")
    ref = ForceFieldRefiner(forcefield="charmm36", success_rule="paper")
    w = ref.restraint_weight * KCAL_PER_KJ  # kcal/mol/A^2
    for x in etkdg_conformers(pep, 1, seed=7):
        c = ref.refine(pep, x)
        # spec test 4: CHARMM36's closing amide is 1.33 +- 0.05 A (MMFF94's 1.38)
        assert c.success and abs(c.closure_after - CHARMM_AMIDE_CN) <= 0.05, c.closure_after
        assert c.objective < c.objective_start and math.isfinite(c.energy)
        # the restraint is exactly w/2 sum |x - x~|^2 over heavy atoms, in the same kcal/mol as the energy
        d2 = ((c.coords[pep.heavy] - x[pep.heavy]) ** 2).sum()
        assert c.objective - c.energy == pytest.approx(0.5 * w * d2, rel=1e-6, abs=1e-8)
        # deterministic, and a refinement in between leaves no stale anchor behind
        ref.refine(pep, etkdg_conformers(pep, 2, seed=11)[1])
        again = ref.refine(pep, x)
        assert np.array_equal(again.coords, c.coords)
    c2c = CyclicPeptide("CAGFAC", "C2C")
    c = ref.refine(c2c, etkdg_conformers(c2c, 1, seed=3)[0])
    assert c.success and c.mode == "C2C" and abs(c.closure_after - DISULFIDE_SS) <= 0.1
    k2de = CyclicPeptide("KAGFAD", "K2DE")
    with pytest.raises(ValueError, match="K2DE"):
        ref.refine(k2de, np.zeros((k2de.mol.GetNumAtoms(), 3)))
    with pytest.raises(ValueError, match=r"^forcefield"):
        ForceFieldRefiner(forcefield="amber")


def test_topology_priority() -> None:
    pep = CyclicPeptide("CKADC")
    x = np.zeros((pep.mol.GetNumAtoms(), 3))
    ix = pep.index
    x[:, 0] = np.arange(len(x)) * 10.0  # everything far apart
    n1, cl = pep.closure_atoms
    x[cl] = x[n1] + [1.3, 0, 0]
    assert detect_topology(pep, x) == "H2T"
    x[ix[(2, "NZ")]] = x[ix[(4, "CG")]] + [1.0, 0, 0]  # isopeptide closer than N1-CL
    assert detect_topology(pep, x) == "K2DE"
    x[ix[(5, "SG")]] = x[ix[(1, "SG")]] + [2.0, 0, 0]  # disulfide wins
    assert detect_topology(pep, x) == "C2C"
    # official-code rule inspects only the termini: K2 / D4 are internal, Cys 1 and 5 are the termini
    assert detect_topology(pep, x, rule="repo") == "C2C"
    x[ix[(5, "SG")]] = x[ix[(1, "SG")]] + [3.0, 0, 0]
    assert detect_topology(pep, x, rule="repo") == "H2T"
    with pytest.raises(ValueError, match="rule"):
        detect_topology(pep, x, rule="bad")


def test_restraint_is_harmonic_and_refinement_monotone(
    pep: CyclicPeptide, minimised: list[Conformer]
) -> None:
    ref = ForceFieldRefiner(restraint_weight=0.1)
    x0 = minimised[1].coords
    ff, _ = ref.force_field(pep, x0)
    y = x0.copy()
    y[pep.heavy] += 0.05
    e_plain = ref.energy(pep, y)
    e_restr = ff.CalcEnergy(y.ravel().tolist())
    expected = 0.5 * 0.1 * KCAL_PER_KJ * float(((y - x0)[pep.heavy] ** 2).sum())
    assert abs((e_restr - e_plain) - expected) < 1e-8
    # refinement from a perturbed FK sample lowers the restrained objective
    _, mask = pep.torsion_layout()
    t = pep.get_torsions(x0) + np.where(mask, 0.3, 0.0)
    c = ref.refine(pep, pep.forward_kinematics(t, x0))
    assert c.objective <= c.objective_start
    assert c.energy <= c.objective + 1e-9


def test_entropy() -> None:
    assert shannon_entropy(["a"] * 5) == 0.0
    assert math.isclose(shannon_entropy(["a", "b", "c", "d"]), math.log(4))
    with pytest.raises(ValueError, match="labels"):
        shannon_entropy([])


def _tiny_model(pep: CyclicPeptide, minimised: list[Conformer]) -> MuCO:
    torch.manual_seed(0)
    model = MuCO(pep.length, ForceFieldRefiner(max_steps=20), width=16, steps=4)
    res = model.fit(
        [(pep, [c.coords for c in minimised])], epochs=3, generator=torch.Generator().manual_seed(0)
    )
    assert res.history.metrics["backbone_loss"] and math.isfinite(res.value)
    return model


def test_hierarchical_bookkeeping_and_best(pep: CyclicPeptide, minimised: list[Conformer]) -> None:
    model = _tiny_model(pep, minimised)
    tors = model.sample_torsions(pep, 2, 3, torch.Generator().manual_seed(1))
    assert tors.shape == (6, 3 * 5 + 4 * 6)
    nb = 15
    # the M side-chain draws of one backbone share it; different backbones differ
    assert torch.equal(tors[0, :nb], tors[2, :nb]) and not torch.equal(tors[0, :nb], tors[3, :nb])
    confs = model.sample(pep, 2, 2, torch.Generator().manual_seed(1))
    assert [(c.k, c.m) for c in confs] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    best = MuCO.best(confs)
    ok = [c for c in confs if c.success]
    if ok:
        assert best is not None and best.energy == min(c.energy for c in ok)
    else:
        assert best is None


def test_flow_learns_a_point_mass_across_the_seam() -> None:
    torch.manual_seed(0)
    flow = TorsionFlow(2, 0, width=64, steps=20)
    x1 = torch.tensor([[math.pi - 0.05, -math.pi + 0.05]]).repeat(256, 1)
    g = torch.Generator().manual_seed(0)
    flow.fit(x1, torch.zeros(256, 0), torch.ones(256, 2), epochs=300, generator=g, lr=3e-3)
    s = flow.sample(torch.zeros(200, 0), torch.Generator().manual_seed(1))
    err = wrap_angle(s - x1[:200]).abs()
    assert float(err.median()) < 0.2


def test_pi_symmetric_chi_is_the_aromatic_ring_flip(pep: CyclicPeptide, minimised: list[Conformer]) -> None:
    sym = pep.pi_symmetric_mask()
    assert sym.shape == (4 * 6,) and np.flatnonzero(sym).tolist() == [2 * 4 + 1]  # GAFKDA: Phe chi2 only
    # physically a symmetry: a ring flip (chi2 + pi) leaves the MMFF energy unchanged up to the template's
    # slight ring asymmetry, a quarter turn does not
    ref, nb = ForceFieldRefiner(), pep.n_backbone
    for c in minimised:
        t, e0 = pep.get_torsions(c.coords), ref.energy(pep, c.coords)
        de = {}
        for d in (math.pi, math.pi / 2):
            t2 = t.copy()
            t2[nb:][sym] += d
            de[d] = ref.energy(pep, pep.forward_kinematics(t2, c.coords)) - e0
        assert abs(de[math.pi]) < 0.5 and de[math.pi / 2] > 5.0, de


def test_fold_pi_symmetric_identifies_chi_and_chi_plus_pi() -> None:
    g = torch.Generator().manual_seed(0)
    chi = (torch.rand(50, 6, generator=g, dtype=torch.float64) * 2 - 1) * math.pi
    sym = torch.tensor([False, True, False, False, True, False])
    a, b = fold_pi_symmetric(chi, sym), fold_pi_symmetric(wrap_angle(chi + math.pi), sym)
    assert torch.allclose(wrap_angle(a - b)[:, sym], torch.zeros(50, 2, dtype=torch.float64), atol=1e-12)
    assert torch.equal(a[:, ~sym], chi[:, ~sym])
    back = unfold_pi_symmetric(a, sym)
    assert back[:, sym].abs().max() <= math.pi / 2 + 1e-12
    # the representative differs from chi by 0 or pi
    assert torch.allclose(torch.sin(back - chi), torch.zeros_like(chi), atol=1e-12)
    with pytest.raises(ValueError, match=r"^sym"):
        fold_pi_symmetric(chi, sym.double())


def test_stage_two_treats_a_ring_flip_as_the_same_target(
    pep: CyclicPeptide, minimised: list[Conformer]
) -> None:
    sym = pep.pi_symmetric_mask()
    flipped = []
    for c in minimised:
        t = pep.get_torsions(c.coords)
        t[pep.n_backbone :][sym] += math.pi
        flipped.append(pep.forward_kinematics(t, c.coords))

    def losses(confs: list[np.ndarray]) -> list[float]:
        torch.manual_seed(0)
        model = MuCO(pep.length, ForceFieldRefiner(max_steps=20), width=16, steps=4)
        res = model.fit([(pep, confs)], epochs=3, generator=torch.Generator().manual_seed(0))
        return res.history.metrics["sidechain_loss"]

    a, b = losses([c.coords for c in minimised]), losses(flipped)
    assert np.allclose(a, b, rtol=1e-4, atol=1e-5)
    model = _tiny_model(pep, minimised)
    chi2 = model.sample_torsions(pep, 3, 4, torch.Generator().manual_seed(2))[:, pep.n_backbone :][:, sym]
    assert chi2.abs().max() <= math.pi / 2 + 1e-6


def test_determinism(pep: CyclicPeptide, minimised: list[Conformer]) -> None:
    m1, m2 = _tiny_model(pep, minimised), _tiny_model(pep, minimised)
    a = m1.sample_torsions(pep, 2, 2, torch.Generator().manual_seed(3))
    b = m2.sample_torsions(pep, 2, 2, torch.Generator().manual_seed(3))
    assert torch.equal(a, b)
    e1 = etkdg_conformers(pep, 2, seed=5)
    e2 = etkdg_conformers(pep, 2, seed=5)
    assert all(np.array_equal(u, v) for u, v in zip(e1, e2, strict=True))


def test_bad_input(pep: CyclicPeptide, minimised: list[Conformer]) -> None:
    with pytest.raises(ValueError, match="non-canonical"):
        CyclicPeptide("GAXB")
    with pytest.raises(ValueError, match="length"):
        CyclicPeptide("GA")
    with pytest.raises(TypeError, match="sequence"):
        CyclicPeptide(5)  # type: ignore[arg-type]
    model = MuCO(pep.length, width=8, steps=2)
    with pytest.raises(ValueError, match="K and M"):
        model.sample_torsions(pep, 0, 1, torch.Generator())
    with pytest.raises(ValueError, match="K and M"):
        model.sample_torsions(pep, 1, 0, torch.Generator())
    with pytest.raises(ValueError, match="length"):
        model.sample_torsions(CyclicPeptide("GAG"), 1, 1, torch.Generator())
    with pytest.raises(ValueError, match="restraint_weight"):
        ForceFieldRefiner(restraint_weight=-1.0)
    with pytest.raises(ValueError, match="success_rule"):
        ForceFieldRefiner(success_rule="x")
    with pytest.raises(ValueError, match="coords"):
        ForceFieldRefiner().refine(pep, np.zeros((3, 3)))
    with pytest.raises(ValueError, match="length"):
        MuCO(2)


def _linear_formula(seq: str) -> dict[str, int]:
    from rdkit import Chem

    mol = Chem.AddHs(Chem.MolFromSequence(seq))
    out: dict[str, int] = {}
    for a in mol.GetAtoms():
        out[a.GetSymbol()] = out.get(a.GetSymbol(), 0) + 1
    return out


def _formula(pep: CyclicPeptide) -> dict[str, int]:
    out: dict[str, int] = {}
    for a in pep.mol.GetAtoms():
        out[a.GetSymbol()] = out.get(a.GetSymbol(), 0) + 1
    return out


@pytest.mark.parametrize(
    ("seq", "mode", "atoms", "loss"),
    [
        ("GAHKDA", "H2T", ((1, "N"), (6, "C")), {"H": 2, "O": 1}),  # dehydration
        ("CAHGAC", "C2C", ((1, "SG"), (6, "SG")), {"H": 2}),  # oxidation: both HG leave
        ("KAFGSD", "K2DE", ((1, "NZ"), (6, "CG")), {"H": 2, "O": 1}),  # isopeptide with Asp
        ("KAFGSE", "K2DE", ((1, "NZ"), (6, "CD")), {"H": 2, "O": 1}),  # ... and with Glu
    ],
)
def test_cyclisation_builds_the_ring_bond_and_formula(
    seq: str, mode: str, atoms: tuple, loss: dict[str, int]
) -> None:
    pep = CyclicPeptide(seq, mode)
    a, b = pep.closure_atoms
    assert (a, b) == (pep.index[atoms[0]], pep.index[atoms[1]])
    bond = pep.mol.GetBondBetweenAtoms(a, b)
    assert bond is not None and pep.mol.GetRingInfo().NumBondRings(bond.GetIdx()) == 1
    want = _linear_formula(seq)
    for el, n in loss.items():
        want[el] -= n
    assert _formula(pep) == want
    # the open chain (closing bond removed) is acyclic along the backbone: every backbone torsion is settable
    _, mask = pep.torsion_layout()
    assert mask[: pep.n_backbone].sum() == pep.n_backbone
    if mode != "H2T":  # free termini: the N-terminal NH2 and the C-terminal COOH stay
        assert (1, "N") in pep.index and (len(seq), "OXT") in pep.index


@pytest.mark.parametrize(("seq", "mode", "target"), [("CAFGAC", "C2C", 2.05), ("KAFGSD", "K2DE", 1.38)])
def test_side_chain_closures_are_closed_by_mmff(seq: str, mode: str, target: float) -> None:
    pep = CyclicPeptide(seq, mode)
    (x,) = etkdg_conformers(pep, 1, seed=3)
    c = ForceFieldRefiner(restraint_weight=0.0, max_steps=500).refine(pep, x)
    assert abs(c.closure_after - target) <= 0.03
    assert c.mode == mode and c.success and closure_ok(c.closure_after, c.energy, mode=mode, rule="paper")
    # FK round trip on the open (linear) chain of a side-chain-closed peptide
    _, mask = pep.torsion_layout()
    t = np.where(mask, np.random.default_rng(1).uniform(-math.pi, math.pi, mask.shape), 0.0)
    y = pep.forward_kinematics(t, c.coords)
    assert np.abs(np.angle(np.exp(1j * (pep.get_torsions(y) - t))))[mask].max() < 1e-3
    # that random sample leaves the ring open; one refinement step cannot close it: flagged, not returned
    assert pep.closure_distance(y) > 3.0
    assert not ForceFieldRefiner(max_steps=1).refine(pep, y).success


def test_cyclisation_bad_input() -> None:
    with pytest.raises(ValueError, match="mode"):
        CyclicPeptide("GAFA", mode="XYZ")
    with pytest.raises(ValueError, match="two Cys"):
        CyclicPeptide("CAFA", mode="C2C")
    with pytest.raises(ValueError, match="Lys and an Asp/Glu"):
        CyclicPeptide("GAFD", mode="K2DE")
    # the same sequence in two modes are different molecules with different caches
    h, k = CyclicPeptide("KAFD"), CyclicPeptide("KAFD", mode="K2DE")
    assert h.key != k.key and h.closure_atoms != k.closure_atoms
