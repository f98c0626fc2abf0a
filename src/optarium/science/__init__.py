"""Scientific applications of optimization: cyclic-peptide conformations (MuCO, :mod:`.muco`).

RDKit (the ``science`` extra) is imported inside the functions that use it, so ``import optarium.science``
needs only torch and numpy.
"""

from optarium.science.muco import (
    Conformer,
    CyclicPeptide,
    ForceFieldRefiner,
    MuCO,
    TorsionFlow,
    closure_ok,
    detect_topology,
    dssp_reduced,
    etkdg_conformers,
    secondary_structure,
    ss_entropy,
)

__all__ = [
    "Conformer",
    "CyclicPeptide",
    "ForceFieldRefiner",
    "MuCO",
    "TorsionFlow",
    "closure_ok",
    "detect_topology",
    "dssp_reduced",
    "etkdg_conformers",
    "secondary_structure",
    "ss_entropy",
]
