"""Reduced DSSP of optarium.science.muco (Kabsch & Sander 1983) on idealised backbones, and against mdtraj."""

from __future__ import annotations

import math

import numpy as np
import pytest

from optarium.science.muco import (
    DSSP_COUPLING,
    dssp_hbond_energy,
    dssp_reduced,
    ss_entropy,
)


def _place(a: np.ndarray, b: np.ndarray, c: np.ndarray, bond: float, angle: float, tors: float) -> np.ndarray:
    """Atom ``d`` with |cd| = bond, angle bcd, torsion abcd (NeRF)."""
    bc = (c - b) / np.linalg.norm(c - b)
    n = np.cross(b - a, bc)
    n /= np.linalg.norm(n)
    m = np.cross(n, bc)
    d = np.array(
        [
            -bond * math.cos(angle),
            bond * math.sin(angle) * math.cos(tors),
            bond * math.sin(angle) * math.sin(tors),
        ]
    )
    return c + d[0] * bc + d[1] * m + d[2] * n


def backbone(phi_deg: np.ndarray, psi_deg: np.ndarray) -> list[np.ndarray]:
    """N, CA, C, O ``[L, 3]`` of a trans (omega = 180) chain with Engh-Huber bond lengths and angles."""
    phi, psi = np.radians(phi_deg), np.radians(psi_deg)
    a_nac, a_can, a_cna = np.radians(111.2), np.radians(116.2), np.radians(121.7)
    N, CA = [np.zeros(3)], [np.array([1.458, 0.0, 0.0])]
    C = [CA[0] + 1.525 * np.array([math.cos(math.pi - a_nac), math.sin(math.pi - a_nac), 0.0])]
    OX: list[np.ndarray] = []
    for i in range(len(phi)):
        if i:
            N.append(_place(N[i - 1], CA[i - 1], C[i - 1], 1.329, a_can, psi[i - 1]))
            CA.append(_place(CA[i - 1], C[i - 1], N[i], 1.458, a_cna, math.pi))
            C.append(_place(C[i - 1], N[i], CA[i], 1.525, a_nac, phi[i]))
        OX.append(_place(N[i], CA[i], C[i], 1.231, np.radians(120.5), psi[i] + math.pi))
    return [np.array(v) for v in (N, CA, C, OX)]


def helix(L: int = 12) -> list[np.ndarray]:
    return backbone(np.full(L, -57.0), np.full(L, -47.0))


def hairpin_pair(L: int = 7) -> list[np.ndarray]:
    """Two flat (phi = psi = 180) strands, the second the first's point image, so that the middle residue m
    of both strands is a narrow pair: O(m) ... H(m') = 1.9 A along the C=O direction, both ways."""
    N, CA, C, OX = backbone(np.full(L, 180.0), np.full(L, 180.0))
    m = L // 2
    co = C[m - 1] - OX[m - 1]
    h = N[m] + co / np.linalg.norm(co)  # DSSP's amide H of residue m
    u = (OX[m] - C[m]) / np.linalg.norm(OX[m] - C[m])
    p = (OX[m] + h) / 2 + 0.95 * u  # point reflection centre: |O(m) - H'(m)| = 2 * 0.95 A
    return [np.concatenate([x, 2 * p - x]) for x in (N, CA, C, OX)]


def test_hbond_energy_is_the_kabsch_sander_formula() -> None:
    N, CA, C, OX = helix(8)
    e = dssp_hbond_energy(N, CA, C, OX)
    i, j = 1, 5  # C=O(1) ... H-N(5): the alpha-helical i -> i + 4 bond
    co = C[j - 1] - OX[j - 1]
    h = N[j] + co / np.linalg.norm(co)
    d = np.linalg.norm
    want = DSSP_COUPLING * (1 / d(OX[i] - N[j]) + 1 / d(C[i] - h) - 1 / d(OX[i] - h) - 1 / d(C[i] - N[j]))
    assert math.isclose(e[i, j], want, rel_tol=1e-12)
    assert -3.5 < e[i, j] < -0.5  # an ideal helical H-bond: about -3 kcal/mol
    assert e[i, i] == 0.0 and e[i, i + 1] == 0.0  # own and next amide are not evaluated
    assert (e[:, 0] == 0.0).all()  # residue 1 has no amide H in a linear chain
    # batched input gives the same energies per item
    eb = dssp_hbond_energy(*[np.stack([x, x]) for x in (N, CA, C, OX)])
    assert eb.shape == (2, 8, 8) and np.array_equal(eb[1], e)


def test_alpha_helix_is_helix_inside() -> None:
    ss = dssp_reduced(*helix(12))
    assert "".join(ss[1:-1]) == "H" * 10 and ss[0] == "C" and ss[-1] == "C"


def test_strand_pair_is_sheet() -> None:
    N, CA, C, OX = hairpin_pair(7)
    ss = "".join(dssp_reduced(N, CA, C, OX))
    # both strands' interior residues are bridge partners, the chain ends are coil
    assert ss[1:6] == "EEEEE" and ss[8:13] == "EEEEE" and ss.count("H") == 0
    # without the amide hydrogens (all donors off) no H-bond, no sheet
    assert set(dssp_reduced(N, CA, C, OX, donor=np.zeros(14, dtype=bool))) == {"C"}


def test_short_random_coil_is_coil() -> None:
    rng = np.random.default_rng(0)
    # phi/psi in the extended / polyproline region: no i -> i + 3..5 H-bonds, no partner strand
    for _ in range(5):
        L = 6
        bb = backbone(rng.uniform(-160, -60, L), rng.uniform(110, 170, L))
        assert set(dssp_reduced(*bb)) == {"C"}


def test_cyclic_wraps_the_helix_across_the_ring_seam() -> None:
    # rolling a linear helix's residues: in cyclic mode the classes roll with them (the seam is an
    # ordinary peptide bond there); in linear mode the cut breaks the helix
    N, CA, C, OX = helix(12)
    lin = dssp_reduced(N, CA, C, OX, cyclic=True)
    rolled = [np.roll(x, 3, axis=0) for x in (N, CA, C, OX)]
    assert np.array_equal(dssp_reduced(*rolled, cyclic=True), np.roll(lin, 3))
    assert not np.array_equal(dssp_reduced(*rolled, cyclic=False), np.roll(lin, 3))


def test_entropy_and_bad_input() -> None:
    assert ss_entropy(np.array(["C", "C", "C"])) == 0.0
    assert math.isclose(ss_entropy(np.array(["H", "E", "C"])), math.log(3))
    with pytest.raises(ValueError, match="classes"):
        ss_entropy(np.array(["X"]))
    N, CA, C, OX = helix(5)
    with pytest.raises(ValueError, match="shape"):
        dssp_hbond_energy(N, CA, C, OX[:4])
    with pytest.raises(ValueError, match="donor"):
        dssp_hbond_energy(N, CA, C, OX, donor=np.ones(3, dtype=bool))


def test_matches_mdtraj_when_available() -> None:
    pytest.importorskip("mdtraj", reason="mdtraj is optional (not an optarium dependency)")
    from optarium.science.muco import _mdtraj_dssp

    rng = np.random.default_rng(1)
    cases = [helix(12), hairpin_pair(7)]
    cases += [backbone(rng.uniform(-180, 180, 9), rng.uniform(-180, 180, 9)) for _ in range(10)]
    cases += [backbone(rng.normal(-60, 15, 10), rng.normal(-45, 15, 10)) for _ in range(10)]
    for bb in cases:
        ours = dssp_reduced(*bb)
        theirs = _mdtraj_dssp(*[x[None] for x in bb], ["ALA"] * len(bb[0]))[0]
        assert "".join(ours) == "".join(theirs)
