"""A function of Python floats written with the math module (codegen/scalar.py), and the
NumPy twin it falls back to where math's values or errors differ from NumPy's; a NumPy
call kept where Python's operators would give a Python number instead of NumPy's scalar.
"""


import dataclasses

import numpy as np

from ..graph import Node, op
from ..rules.buffers import ufunc_of
from .scalar import MATH_ERRORS, OVERFLOWS, PROPAGATES, SCALAR

_PYTHON_TYPES = {"f": "float", "i": "int", "b": "bool"}  # a Python number's, by its dtype's kind


def _finite_checks(graph):
    """The values whose finiteness a scalar function checks (numpy_fallback): the float
    inputs and the values of OVERFLOWS, but those a later checked value of PROPAGATES
    reads, as its being finite says they are (last first, as read in the code)."""
    known, checked = set(), []
    for node in reversed(graph.nodes):
        if node not in known and op(node) in OVERFLOWS:
            checked.append(node)
            known.add(node)
        if node in known and op(node) in PROPAGATES:
            known.update(a for a in node.args if type(a) is Node)
    checked += [n for n in reversed(graph.inputs) if n.dtype.kind == "f" and n not in known]
    return checked[::-1]


def twin_graph(graph, name):
    """The graph written with NumPy calls, which a scalar function (Emitter.scalar) runs
    where the math module's forms would not give NumPy's values and warnings."""
    return dataclasses.replace(
        graph, name=name, scalar=False, signature="",
        doc=f"{graph.name} with NumPy calls: its values where math raises or a value "
            "is not finite (NumPy's infinities, nans and warnings)")


def all_python_floats(graph):
    """Every value is a Python-float scalar with a math-module form (emit_scalar.py), and
    every constant is a finite number (Emitter.numpy_fallback checks computed values)."""
    def scalar_constant(a):
        return type(a) is Node or np.ndim(a) == 0 and \
            isinstance(a, (int, float, np.generic, np.ndarray)) and bool(np.isfinite(a))
    return all(op(n) == "guard" or n.shape == () and n.dtype == np.float64 and op(n) in SCALAR
               and all(scalar_constant(a) for a in n.args) for n in graph.nodes)


class NumpyFallback:
    """The scalar function's fallback to its NumPy twin (a mixin of Emitter)."""

    def numpy_fallback(self, body, locs, start):
        """A scalar function's statements from `start` on in a `try:`; where a math-module
        form raises, or an input or a value that may overflow silently is not finite, the
        call returns its NumPy twin's result instead: NumPy's infinities, nans and warnings
        (emit_scalar.py says why these cases are all)."""
        call = f"return {self.numpy_twin}({', '.join(self.params)})"
        checked = [self.names[n] for n in _finite_checks(self.graph)]
        tried = [("try:", "")] + [("    " + code if code else code, comment)
                                  for code, comment in body[start:]]
        tail = [(f"except {MATH_ERRORS}:", ""), (f"    {call}", "math's error: NumPy's value")]
        if checked:
            tail += [(f"if not math.isfinite({' + '.join(checked)}):", ""),
                     (f"    {call}", "an inf or a nan: NumPy's warnings")]
        outer = self.outer_numbers()
        head = [(f"if {outer}:", ""), (f"    {call}", "a value of an enclosing trace")] \
            if outer else []
        locs = {(k + 1 + len(head) if k >= start else k): loc for k, loc in locs.items()}
        return body[:start] + head + tried + tail, locs

    def outer_numbers(self):
        """`type(x) is not float`: the test that a number read besides the arguments (a
        closure's x) is not a Box of an enclosing trace (grad(lambda x: x * grad(lambda
        y: x + y)(1.0))), which the NumPy twin follows and math.isfinite would refuse."""
        tests = [f"type({self.names[n]}) is not {_PYTHON_TYPES[n.dtype.kind]}"
                 for n in self.graph.inputs if n.params.get("read") is not None
                 and n in self.names and n.python_number and n.dtype.kind in _PYTHON_TYPES]
        return " or ".join(tests)

    def numpy_on_numbers(self, node):
        """Whether `node`, written with Python's operators, would compute a Python number
        where the trace's NumPy call gave a NumPy scalar (np.greater(x, 0) of a float x).
        In a scalar function's NumPy twin, also a derivative's operator on Python numbers
        (a rule's x ** -0.5 of a float x: NumPy's inf at 0.0, as Autograd's, not Python's
        ZeroDivisionError; the values are all float64 there, so no dtype changes)."""
        if self.scalar or not any(type(a) is Node for a in node.args) or \
                node.python_number and not (self.twin and node.grad_of is not None):
            return False
        template = node.prim.template
        numpy = isinstance(template, str) and not template.startswith("np.") \
            and ufunc_of(node.prim) is not None \
            and all(a.python_number and a not in self.made_numpy if type(a) is Node
                    else type(a) in (int, float, bool) for a in node.args)
        if numpy and node.python_number:  # a twin's: its readers see a NumPy scalar
            self.made_numpy.add(node)
        return numpy
