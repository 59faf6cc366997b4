"""Aliasing and memory layout (issue 10): code whose meaning depends on them (it writes in
place, rules/numpy_api/writes.py and views.py) checks the arguments' layout and that a
written argument shares no memory with another, and traces again otherwise; code that
does not write checks
nothing."""

import numpy as np
import pytest

from autodiffgen import TracingError, tape, value_and_grad
from autodiffgen.testing import check_grads

RNG = np.random.default_rng(12)


def write_then_read(a, b):
    a[0] = 2.0 * a[1]
    return np.sum(a * b ** 2)


def view_sees_write(x, w):
    v = x.reshape(-1)  # a view of a C-ordered x, a copy of a Fortran-ordered one
    x[0, 1] = 5.0
    return np.sum(v * w) + np.sum(x * x)


def eager(fun, args):
    return fun(*[a.copy(order="K") if isinstance(a, np.ndarray) else a for a in args])


def check(vg, fun, args, argnums):
    value, g = vg(*[a.copy(order="K") for a in args])
    np.testing.assert_allclose(value, eager(fun, args), rtol=1e-6)
    _t_value, t_grad = tape.value_and_grad_now(
        fun, [a.copy(order="K") for a in args], (argnums,), ["a", "b"])
    np.testing.assert_allclose(g, t_grad[0], rtol=1e-6)
    check_grads(fun, *[a.copy(order="K") for a in args], argnums=argnums, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("first", ["C", "F"])
def test_fortran_and_c_ordered_arguments_get_their_own_semantics(first):
    vg = value_and_grad(view_sees_write, argnums=1)
    w = RNG.normal(size=6)
    orders = ["C", "F", "C", "F"] if first == "C" else ["F", "C", "F", "C"]
    for order in orders:
        x = np.array(RNG.normal(size=(2, 3)), order=order)
        check(vg, view_sees_write, (x, w), 1)
    c_value = vg(np.ones((2, 3)), w)[0]
    f_value = vg(np.asfortranarray(np.ones((2, 3))), w)[0]
    assert not np.isclose(c_value, f_value)  # the two semantics really differ
    assert vg.cache_info().misses == 2


def test_aliased_arguments_after_distinct_ones_trace_again():
    vg = value_and_grad(write_then_read, argnums=1)
    a, b = RNG.normal(size=3), RNG.normal(size=3)
    check(vg, write_then_read, (a, b), 1)
    c = RNG.normal(size=3)
    with pytest.raises(TracingError, match="shares memory with argument 'b'"):
        vg(c, c)  # eager NumPy would change b through a: not answered from the other trace
    check(vg, write_then_read, (a, b), 1)
    assert vg.cache_info().misses == 1


def test_distinct_arguments_after_aliased_ones():
    vg = value_and_grad(write_then_read, argnums=1)
    c = RNG.normal(size=3)
    with pytest.raises(TracingError, match="shares memory"):
        vg(c, c)
    a, b = RNG.normal(size=3), RNG.normal(size=3)
    for _ in range(2):
        check(vg, write_then_read, (a, b), 1)
    assert vg.cache_info().misses == 1


def test_overlapping_slices_of_one_array_are_aliases():
    vg = value_and_grad(write_then_read, argnums=1)
    base = RNG.normal(size=6)
    vg(base[:3].copy(), base[3:].copy())
    with pytest.raises(TracingError, match="shares memory"):
        vg(base[:3], base[1:4])


def test_code_that_does_not_write_checks_nothing():
    def f(a, b):
        return np.sum(a.reshape(-1) * b.reshape(-1))
    vg = value_and_grad(f)
    c = RNG.normal(size=(2, 3))
    source = vg.source(c, c)
    assert "flags" not in source and "may_share_memory" not in source
    for a, b in ((c, c), (c, np.asfortranarray(c)), (np.asfortranarray(c), c.copy())):
        np.testing.assert_allclose(vg(a, b)[0], f(a, b))
    assert vg.cache_info().misses == 1


def test_the_checks_are_readable():
    vg = value_and_grad(view_sees_write, argnums=1)
    source = vg.source(np.ones((2, 3)), np.ones(6))
    assert "if _layout(x) != 'C':" in source
    assert "was traced with x C-ordered" in source
    assert "if np.may_share_memory(x, w):" in source


def test_an_in_place_operator_keeps_a_fortran_ordered_arguments_layout():
    """`a += b` writes into a: a stays Fortran-ordered, so np.ravel(a) is a copy that the
    second write does not change (found by tests/fuzz/test_fuzz_args.py)."""
    def f(a, b, w):
        a += b
        v = np.ravel(a)
        a += b
        return np.sum(v * np.arange(6.0)) + np.sum(w * a)
    vg = value_and_grad(f, argnums=2)
    b, w = RNG.normal(size=(2, 3)), RNG.normal(size=(2, 3))
    for order in ("F", "C", "F"):
        a = np.array(RNG.normal(size=(2, 3)), order=order)
        value, g = vg(a.copy(order="K"), b, w)
        np.testing.assert_allclose(value, f(a.copy(order="K"), b, w))
        _, t_grad = tape.value_and_grad_now(f, (a.copy(order="K"), b, w), (2,), ["a", "b", "w"])
        np.testing.assert_allclose(g, t_grad[0])
        check_grads(lambda w_, a=a, b=b: f(a.copy(order="K"), b, w_), w)


def test_two_non_contiguous_layouts_of_one_shape_are_told_apart():
    """A reshape that merges axes is a view of one slice and a copy of another of the same
    shape: each layout traces its own code, never the other's answer."""
    def f(w, x):
        y = x.reshape(4, 4)
        y[0] = 100.0
        return np.sum(w * x)
    vg = value_and_grad(f)
    w = RNG.normal(size=(2, 2, 4))
    copy_slice = lambda: RNG.normal(size=(2, 3, 8))[:, :2, :4]
    view_slice = lambda: RNG.normal(size=(2, 2, 8))[:, :, :4]
    x = copy_slice()
    value, g = vg(w, x)
    np.testing.assert_allclose(value, np.sum(w * x))
    np.testing.assert_allclose(g, x)  # the write went into a copy: x is unchanged
    x = view_slice()
    written = x.copy()
    written[0, 0] = 100.0  # eager: y is a view, and y[0] is x[0, 0]
    value, g = vg(w, x)
    np.testing.assert_allclose(value, f(w, x.copy()))
    np.testing.assert_allclose(value, np.sum(w * written))
    np.testing.assert_allclose(g, written)
    x = copy_slice()
    np.testing.assert_allclose(vg(w, x)[0], np.sum(w * x))
    assert "_layout(x) != (192, 64, 8)" in vg.source(w, x)


GLOBAL_W = np.arange(3.0)


def write_then_read_global(w, x):
    x[0] = 10.0
    return np.sum(w * x * GLOBAL_W)


def read_global_then_write(w, x):
    y = w * GLOBAL_W
    x[0] = 10.0
    return np.sum(y * x)


@pytest.mark.parametrize("fun", [write_then_read_global, read_global_then_write])
def test_a_written_argument_that_is_a_global_the_function_reads_is_refused(fun):
    """Eager NumPy changes GLOBAL_W through x: the code checks x is not GLOBAL_W, and the
    trace that would have to follow the write through the global is refused, naming both."""
    vg = value_and_grad(fun)
    w = RNG.normal(size=3)
    for _ in range(2):
        x = RNG.normal(size=3)
        value, g = vg(w, x.copy())
        np.testing.assert_allclose(value, fun(w, x.copy()))
        _, t_grad = tape.value_and_grad_now(fun, (w, x.copy()), (0,), ["w", "x"])
        np.testing.assert_allclose(g, t_grad[0])
    kept = GLOBAL_W.copy()
    with pytest.raises(TracingError, match="argument 'x', which shares memory with 'GLOBAL_W'"):
        vg(w, GLOBAL_W)
    np.testing.assert_array_equal(GLOBAL_W, kept)  # nothing of the user's was written
    with pytest.raises(TracingError, match="shares memory with 'GLOBAL_W'"):
        vg(w, GLOBAL_W[::-1])  # a view of it too
    assert "np.may_share_memory(x, GLOBAL_W)" in vg.source(w, RNG.normal(size=3))


def test_hessian_of_code_that_writes_into_a_non_contiguous_argument():
    """The layout check of the gradient's code, run by the Hessian's trace, reads strides."""
    from autodiffgen import hessian

    def f(w, x):
        x[0, 0] = 2.0
        return np.sum(w ** 3 * x)
    x = RNG.normal(size=(3, 8))[:, ::2]
    w = RNG.normal(size=(3, 4))
    written = x.copy()
    written[0, 0] = 2.0
    expected = np.diag((6 * w * written).ravel()).reshape(3, 4, 3, 4)
    np.testing.assert_allclose(hessian(f)(w, x), expected, rtol=1e-12)


@pytest.mark.parametrize("take", ["flatten", "ravel", "reshape"])
def test_flatten_copies_and_ravel_copies_a_strided_array_as_numpy_does(take):
    """x.flatten() is always a copy, np.ravel a view only of a contiguous array, while
    reshape(-1) also views a uniformly strided one (x[:, ::2] of a (2, 6) array): a write
    into x after each is seen through exactly the views NumPy makes."""
    def f(x, w):
        v = {"flatten": lambda: x.flatten(), "ravel": lambda: np.ravel(x),
             "reshape": lambda: x.reshape(-1)}[take]()
        x[0, 0] = 5.0
        return np.sum(v * w.ravel()) + np.sum(x * w)
    vg = value_and_grad(f, argnums=1)
    w = RNG.normal(size=(2, 3))
    for make in (lambda: RNG.normal(size=(2, 3)), lambda: RNG.normal(size=(2, 6))[:, ::2]):
        x = make()
        try:
            value, g = vg(x.copy() if x.flags.c_contiguous else x, w)
        except TracingError as error:  # a write through a reshape view: refused
            assert take == "reshape" and "writing into a view" in str(error)
            continue
        def fresh(x=x):
            return x.copy() if x.base is None else x.base.copy()[:, ::2]
        np.testing.assert_allclose(value, f(fresh(), w))
        _, t_grad = tape.value_and_grad_now(f, (fresh(), w), (1,), ["x", "w"])
        np.testing.assert_allclose(g, t_grad[0])
