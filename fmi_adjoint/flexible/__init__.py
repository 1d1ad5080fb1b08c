"""Flexible bodies from finite-element models (issue 25, parts 1 and 2).

* :mod:`.fe` -- :class:`FEModel`, a checked FE model (nodes, DOF numbering, sparse ``M``, ``K``);
* :mod:`.beams` -- built-in 3D Euler-Bernoulli and Timoshenko beam elements on a line mesh;
* :mod:`.importers` -- ``M`` and ``K`` from Matrix Market (Ansys), Abaqus ``*MATRIX GENERATE``
  COORDINATE output and Nastran OUTPUT4 (pyNastran, the ``fe`` extra);
* :mod:`.reduction` -- Craig-Bampton and free-interface reductions, damping, cached.

Pure numpy/scipy; the formulations that turn a reduced model into a body (flexible natural
coordinates, floating frame of reference) build on these values.  Nothing runs at import time.
"""

from __future__ import annotations

from .beams import (BeamMesh, BeamModel, BeamSection, ConsistentMass, EulerBernoulli, LumpedMass, Timoshenko,
                    beam_model, line_mesh)
from .fe import DOF_NAMES, FEModel, ScaledMatrix, natural_frequencies
from .importers import read_abaqus, read_dof_map, read_matrix_market, read_nastran_op4, read_nodes
from .reduction import (CraigBampton, FreeInterfaceModes, FrequencyLimit, ModalDamping, ModeCount, NoDamping,
                        RayleighDamping, ReducedModel, reduce)

__all__ = ["DOF_NAMES", "BeamMesh", "BeamModel", "BeamSection", "ConsistentMass", "CraigBampton", "EulerBernoulli",
           "FEModel", "FreeInterfaceModes", "FrequencyLimit", "LumpedMass", "ModalDamping", "ModeCount", "NoDamping",
           "RayleighDamping", "ReducedModel", "ScaledMatrix", "Timoshenko", "beam_model", "line_mesh",
           "natural_frequencies", "read_abaqus", "read_dof_map", "read_matrix_market", "read_nastran_op4",
           "read_nodes", "reduce"]
