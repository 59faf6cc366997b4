"""check_grads: generated code vs the dynamic tape vs central finite differences, in
reverse mode and in forward mode, plus the transposition test <vjp(u), v> == <u, jvp(v)>.

For your own tests:

    from autodiffgen.testing import check_grads
    def test_my_loss():
        check_grads(my_loss, W, b, x, y, argnums=(0, 1))

Finite differences run in float64 (complex128) whatever the input dtype. A complex
argument is moved in its real and its imaginary directions, and its gradient read with
Autograd's convention: dL/dx - i dL/dy, where L is the output's real part. Arguments with more than
`max_fd_elements` elements are checked along a few seeded random directions instead of
element by element, so a large model stays cheap to check.
"""

from typing import Any

import numpy as np

from . import tape
from ._typing import ArgNums, Fun
from .api import GradFunction
from .trace.arguments import normalize_argnums
from .tree import (
    is_container,
    items,
    leaves,
    map_tree,
    map_trees,
    matching_children,
    rebuild,
    step_text,
)


class GradientMismatch(AssertionError):
    """The three ways of computing a gradient disagree."""


def check_grads(f: Fun, *args: Any, argnums: ArgNums = 0, rtol: float = 1e-5,
                atol: float = 1e-6, eps: float = 1e-6, max_fd_elements: int = 64,
                directions: int = 3, seed: int = 0, fd: bool = True,
                fwd: bool = True) -> tuple[Any, Any]:
    """Raise GradientMismatch with a readable report if the gradients disagree.

    With `fwd`, also checks the generated JVP against the tape's and against finite
    differences along a random direction, and that it is the transpose of the gradient.
    Returns (value, grads) from the generated code, so a test can check more.
    """
    fun = f.fun if isinstance(f, GradFunction) else f
    generated = GradFunction(fun, argnums)
    value, grads = generated(*args)
    tape_value, tape_grads = tape.value_and_grad(fun, argnums)(*args)
    report = []
    single = len(normalize_argnums(argnums, fun)) == 1 and isinstance(argnums, int)
    numbers = (argnums,) if single else tuple(argnums)
    grad_list = [grads] if single else list(grads)
    tape_list = [tape_grads] if single else list(tape_grads)
    _compare("value", "generated", value, "tape", tape_value, rtol, atol, report)
    for n, g, t in zip(numbers, grad_list, tape_list):
        for path, gl, tl in _paired_leaves(g, t):
            where = f"argument {n}{_show(path)}"
            _check_dtype(where, args[n], path, gl, report)
            _compare(where, "generated", gl, "tape", tl, rtol, atol, report)
    if fd:
        rng = np.random.default_rng(seed)
        for n, g in zip(numbers, grad_list):
            _check_fd(fun, args, n, g, eps, rtol, atol, max_fd_elements, directions, rng, report)
    if fwd:
        rng = np.random.default_rng(seed + 1)
        for n, g in zip(numbers, grad_list):
            _check_jvp(fun, args, n, g, eps, rtol, atol, rng, report)
    if report:
        raise GradientMismatch(f"gradients of {getattr(fun, '__name__', 'f')} disagree:\n  "
                               + "\n  ".join(report))
    return value, grads


def _paired_leaves(g, t, path=()):
    """(path, leaf of g, leaf of t); a path is a tuple of indices and keys (tree.py)."""
    if is_container(g):
        for (k, a), b in zip(items(g), matching_children(g, t)):
            yield from _paired_leaves(a, b, path + (k,))
    else:
        yield path, g, t


def _show(path):
    return "".join(map(step_text, path))


def _check_dtype(where, arg, path, g, report):
    leaf = _get(arg, path)
    if isinstance(leaf, (np.ndarray, np.generic)) and np.result_type(g) != leaf.dtype:
        report.append(f"{where}: gradient dtype {np.result_type(g)} != input dtype {leaf.dtype}")
    if np.shape(g) != np.shape(leaf):
        report.append(f"{where}: gradient shape {np.shape(g)} != input shape {np.shape(leaf)}")


def _get(tree, path):
    for part in path:
        tree = dict(items(tree))[part]
    return tree


def _compare(where, name_a, a, name_b, b, rtol, atol, report):
    dtype = np.complex128 if np.iscomplexobj(a) or np.iscomplexobj(b) else np.float64
    a = np.asarray(a, dtype=dtype)
    b = np.asarray(b, dtype=dtype)
    if a.shape != b.shape:
        report.append(f"{where}: {name_a} shape {a.shape} != {name_b} shape {b.shape}")
        return
    bad = ~np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
    if bad.any():
        i = np.unravel_index(np.argmax(np.abs(a - b) * bad), a.shape) if a.ndim else ()
        report.append(f"{where}: {name_a} and {name_b} differ at {bad.sum()} of {a.size} "
                      f"elements; worst at index {tuple(int(k) for k in i)}: "
                      f"{a[i]!r} vs {b[i]!r}")


def _check_fd(fun, args, n, g, eps, rtol, atol, max_elements, directions, rng, report):
    """Central differences in float64 along each leaf's elements or random directions."""
    base = [_as64(a) for a in args]
    arg = base[n]
    leaf_paths = [p for p, _, _ in _paired_leaves(g, g)]
    for path, gleaf in zip(leaf_paths, leaves(g)):
        x = _get(arg, path)
        gleaf = np.asarray(gleaf, dtype=np.result_type(gleaf, np.float64))
        if np.size(x) <= max_elements:
            dirs = [np.eye(np.size(x))[k].reshape(np.shape(x)) for k in range(np.size(x))]
        else:
            dirs = [rng.standard_normal(np.shape(x)) for _ in range(directions)]
        if np.iscomplexobj(x):  # the real and the imaginary direction of each
            dirs += [1j * d for d in dirs]
        fd_vals, an_vals = [], []
        for d in dirs:
            plus = _replace(base, n, path, x + eps * d)
            minus = _replace(base, n, path, x - eps * d)
            fd_vals.append((_real(_call(fun, plus)) - _real(_call(fun, minus))) / (2 * eps))
            an_vals.append(float(np.real(np.sum(gleaf * d))))
        where = f"argument {n}{_show(path)}"
        _compare(where, "generated", np.array(an_vals), "finite differences",
                 np.array(fd_vals), max(rtol, 1e-4), max(atol, 1e-6), report)


def _check_jvp(fun, args, n, g, eps, rtol, atol, rng, report):
    """Forward mode along a random direction v: generated vs tape vs finite differences,
    and <grad, v> == jvp(v), which for a scalar output is the transposition test."""
    from .transforms import jvp

    v = map_tree(args[n], lambda a: _direction(a, rng))
    tangents = [None] * len(args)
    tangents[n] = v
    _, t_gen = jvp(fun, args, tangents)
    _, t_tape = tape.jvp(fun, args, tangents)
    where = f"argument {n}, forward mode"
    _compare(where, "generated JVP", t_gen, "tape JVP", t_tape, rtol, atol, report)
    base = [_as64(a) for a in args]
    plus = _replace_tree(base, n, v, eps)
    minus = _replace_tree(base, n, v, -eps)
    at_plus, at_minus = _call(fun, plus), _call(fun, minus)
    fd = (np.asarray(at_plus, np.complex128) - np.asarray(at_minus, np.complex128)) / (2 * eps)
    if not np.iscomplexobj(at_plus):
        fd = fd.real
    _compare(where, "generated JVP", t_gen, "finite differences", fd,
             max(rtol, 1e-4), max(atol, 1e-6), report)
    dot = sum(float(np.real(np.sum(np.asarray(gl) * np.asarray(vl))))
              for gl, vl in zip(leaves(g), leaves(v)) if vl is not None)
    _compare(where, "<grad, v>", np.array(dot), "jvp(v)", np.real(t_gen),
             max(rtol, 1e-4), max(atol, 1e-6), report)


def _real(value):
    """A scalar output as a float; a complex one's real part (the L of the convention)."""
    return float(np.real(value))


def _call(fun, args):
    """fun run as plain NumPy on copies of the arrays: NumPy code may write into its
    arguments (x[i] = v), and each evaluation must start from the same point."""
    return fun(*map_tree(list(args), lambda a: np.copy(a) if isinstance(a, np.ndarray) else a))


def _direction(a, rng):
    if isinstance(a, (np.ndarray, np.generic)) and np.issubdtype(a.dtype, np.complexfloating):
        return (rng.standard_normal(np.shape(a))
                + 1j * rng.standard_normal(np.shape(a))).astype(a.dtype)
    if isinstance(a, (np.ndarray, np.generic)) and np.issubdtype(a.dtype, np.inexact):
        return rng.standard_normal(np.shape(a)).astype(a.dtype)
    if isinstance(a, float):
        return float(rng.standard_normal())
    if isinstance(a, complex):
        return complex(rng.standard_normal(), rng.standard_normal())
    return None


def _replace_tree(args, n, v, step):
    """args with args[n] moved by step * v (leaf by leaf; Python floats stay floats)."""
    def move(a, d):
        if d is None:
            return a
        if isinstance(a, (float, complex)):
            return (float if isinstance(a, float) else complex)(a + step * d)
        return a + step * np.asarray(d, np.result_type(d, np.float64))
    args = list(args)
    args[n] = map_trees(move, args[n], v)
    return args


def _as64(a):
    def leaf(x):
        if isinstance(x, (np.ndarray, np.generic)) and np.issubdtype(x.dtype, np.floating):
            return np.asarray(x, dtype=np.float64)
        if isinstance(x, (np.ndarray, np.generic)) and np.issubdtype(x.dtype, np.complexfloating):
            return np.asarray(x, dtype=np.complex128)
        return x
    return map_tree(a, leaf)


def _replace(args, n, path, value):
    """A copy of args with the leaf at args[n][path] replaced (containers rebuilt)."""
    args = list(args)
    args[n] = _replace_in(args[n], path, value)
    return args


def _replace_in(tree, path, value):
    if not path:
        if isinstance(tree, (float, complex)):
            return float(value) if isinstance(tree, float) else complex(value)
        return value
    head, rest = path[0], path[1:]
    return rebuild(tree, [_replace_in(v, rest, value) if k == head else v
                          for k, v in items(tree)])
