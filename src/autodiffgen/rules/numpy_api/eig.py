"""np.linalg.eig and eigvals on traced values (rules/eig.py). NumPy returns complex arrays
when some eigenvalue is complex and real ones otherwise: that is read from the values,
so each result carries a guard on its dtype, and the other kind traces again.
"""

import numpy as np

from ...trace.boxes import Box
from ...trace.context import current_trace
from ..eig import eig_values, eig_vectors
from .dispatch import register_function

_EigResult = type(np.linalg.eig(np.eye(1)))


def kind_guarded(box):
    """box, with a guard on whether NumPy returned complex values (a value's decision)."""
    if type(box) is Box:
        current_trace().guard(box, "iscomplexobj", bool(np.iscomplexobj(box.value)))
    return box


@register_function(np.linalg.eig)
def _eig(a):
    return _EigResult(kind_guarded(eig_values(a)), kind_guarded(eig_vectors(a)))


@register_function(np.linalg.eigvals)
def _eigvals(a):
    return kind_guarded(eig_values(a))
