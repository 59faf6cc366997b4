"""Every front end against every way a function reads what is not its argument.

Each capture case is a scalar function of x that reads something outside its arguments
(a global, a closure, an attribute, a random stream, ...) and a `state(k)` that changes
that outside thing before call k. Each front end is called four times, the state changed
and x new each time, and compared with the eager reference run from the same state (the
dynamic tape, or finite differences of it): the generated code must read again what the
trace read, or check it and trace again, never answer from the first call's state.

A random draw is the same stream as eager NumPy: the state reseeds the generator, so the
front end and the reference draw the same numbers. Under vmap one draw serves the whole
batch (the draw reads no batched value: JAX's semantics with one key), and the reference
reseeds before each example.
"""

import functools
import random
import types

import numpy as np
import pytest

import autodiffgen as ad
from autodiffgen import tape
from autodiffgen.generated_helpers import GuardFailure
from autodiffgen.optim import SGD, compile_step

CALLS = 4

# ---- the outside state the cases read ------------------------------------------------------
LAM = 0.5
W_GLOBAL = np.array([1.0, -0.5, 0.25, 2.0])
GEN = np.random.default_rng(0)
TABLE = {"s": 1.5}
LABELS = np.array([0, 1, 1, 2])


class Config:
    scale = 1.0


CFG = Config()
HELPERS = types.ModuleType("matrix_helpers")
exec("import numpy as np\nK = 1.0\n\ndef scaled(x):\n    return np.tanh(x) * K\n",  # noqa: S102
     HELPERS.__dict__)


class Model:
    def __init__(self):
        self.w = np.ones(4)

    def loss(self, x):
        return np.sum(np.sin(x) * self.w)


MODEL = Model()


def _closure():
    m = {"scale": np.ones(4)}

    def loss(x):
        return np.sum(np.cos(x) * m["scale"])
    return loss, m


CLOSED, CLOSED_DICT = _closure()


def _scaled_loss(x, scale):
    return np.sum(np.sin(x) ** 2 * scale)


PART = functools.partial(_scaled_loss, scale=np.ones(4))


def global_number(x):
    return np.sum(np.sin(x)) + LAM * np.sum(x ** 2)


def global_array(x):
    return np.sum(np.sin(x) * W_GLOBAL)


def attribute(x):
    return np.sum(np.exp(x * 0.1) * CFG.scale)


def through_module(x):
    return np.sum(HELPERS.scaled(x) * x)


def generator_draw(x):
    keep = GEN.random(x.shape) < 0.5
    return np.sum(np.sin(x) * keep + x ** 2 * GEN.normal())


def legacy_draw(x):
    return np.sum(np.sin(x) * np.random.rand(*x.shape))


def stdlib_draw(x):
    return np.sum(np.sin(x) * random.random())


def exception_flow(x):
    try:
        s = TABLE["s"]
    except KeyError:
        s = -2.0
    return np.sum(np.sin(x) * s)


def mask_count(x):
    return np.sum(x[x > 0.1] ** 2)


def unique_count(x):
    return np.sum(x ** 2) / len(np.unique(LABELS))


def _set(k):
    """The outside state of call k (every case's at once)."""
    global LAM, LABELS
    LAM = 0.5 + k
    W_GLOBAL[...] = np.arange(4) * (k + 1) - 1.0
    CFG.scale = 1.0 + 0.5 * k
    HELPERS.K = 1.0 - 0.25 * k
    MODEL.w = np.linspace(-1, 1, 4) * (k + 1)
    CLOSED_DICT["scale"] = np.full(4, 0.5 + k)
    PART.keywords["scale"][...] = np.arange(4) + k
    GEN.bit_generator.state = np.random.default_rng(100 + k).bit_generator.state
    np.random.seed(200 + k)
    random.seed(300 + k)
    if k % 2:
        TABLE.pop("s", None)
    else:
        TABLE["s"] = 1.5 + k
    LABELS = np.arange(k + 2) % (k + 2)


CASES = {
    "global number rebound": global_number,
    "global array changed in place": global_array,
    "closure dict array replaced": CLOSED,
    "attribute of a global object": attribute,
    "helper reached through a module": through_module,
    "partial": PART,
    "method": MODEL.loss,
    "NumPy Generator draw": generator_draw,
    "legacy np.random draw": legacy_draw,
    "standard-library random draw": stdlib_draw,
    "exception as control flow": exception_flow,
    "mask count from data": mask_count,
    "count from np.unique": unique_count,
}


def _x(k, shape=(4,)):
    return np.random.default_rng(k).normal(size=shape)


def _fd(fun, x, v, eps=1e-6):
    """Central difference of fun (a function of x, run from the same state) along v."""
    return (np.asarray(fun(x + eps * v)) - np.asarray(fun(x - eps * v))) / (2 * eps)


def _with_state(k, fun):
    def run(*args):
        _set(k)
        return fun(*args)
    return run


# ---- the front ends: (what the front end gives, what eager gives), each a thunk run from
# call k's state
def _grad(f, k, x, v):
    return lambda: ad.grad(f)(x), lambda: tape.grad(f)(x)


def _value_and_grad(f, k, x, v):
    return lambda: ad.value_and_grad(f)(x), lambda: tape.value_and_grad(f)(x)


def _jvp(f, k, x, v):
    return lambda: ad.jvp(f, (x,), (v,)), lambda: tape.jvp(f, (x,), (v,))


def _vjp(f, k, x, v):
    def pulled(vjp):
        out, fn = vjp(f, x)
        return out, fn(1.0)
    return lambda: pulled(ad.vjp), lambda: pulled(tape.vjp)


def _jacobian(f, k, x, v):
    return lambda: ad.jacobian(f)(x), lambda: tape.grad(f)(x)


def _jacfwd(f, k, x, v):
    return lambda: ad.jacfwd(f)(x), lambda: tape.grad(f)(x)


def _hessian(f, k, x, v):
    grad = _with_state(k, tape.grad(f))
    return (lambda: ad.hessian(f)(x),
            lambda: np.stack([_fd(grad, x, e) for e in np.eye(x.size)], axis=-1))


def _hvp(f, k, x, v):
    return lambda: ad.hvp(f, (x,), (v,)), lambda: _fd(_with_state(k, tape.grad(f)), x, v)


def _vmap(f, k, x, v):
    batch = np.stack([x, x * 0.5, -x])
    return (lambda: ad.vmap(f)(batch),
            lambda: np.stack([_with_state(k, f)(row) for row in batch]))


def _checkpoint(f, k, x, v):
    return lambda: ad.grad(lambda y: ad.checkpoint(f)(y))(x), lambda: tape.grad(f)(x)


def _has_aux(f, k, x, v):
    def want():
        value, grad = tape.value_and_grad(f)(x)
        return (value, x * 2.0), grad
    return (lambda: ad.value_and_grad(lambda y: (f(y), y * 2.0), has_aux=True)(x), want)


_STEPS = {}


def _compile_step(f, k, x, v):
    def loss(params, scale):
        return f(params["w"]) * scale

    def got():
        step = _STEPS.setdefault(f, compile_step(loss, SGD(lr=0.1)))  # one for every call
        params = {"w": x.copy()}
        value = step(params, step.init(params), 2.0)
        return value, params["w"]

    def want():
        value, grads = tape.value_and_grad(loss)({"w": x}, 2.0)
        return value, x - 0.1 * grads["w"]
    return got, want


_PICTURES = {}


def _graph_of(f, k, x, v):
    """The drawn graph is the code's: emitted and run, it reads what the trace read."""
    from autodiffgen.cache.loader import load
    from autodiffgen.codegen.emitter import emit_module

    def run(graph):
        source, namespace, locs = emit_module([graph])
        return load(source, namespace, graph.name, locs)(x)

    def got():  # the last picture's code, or a new picture where its guards fail
        if f in _PICTURES:
            state = _random_state()
            try:
                return run(_PICTURES[f])
            except GuardFailure:
                _random_state(state)  # the failed run drew nothing a new one must not
        _PICTURES[f] = ad.graph_of(f, x).graph
        return run(_PICTURES[f])
    return got, lambda: tape.value_and_grad(f)(x)


def _random_state(state=None):
    """The random streams' states, or set them back."""
    if state is None:
        return (GEN.bit_generator.state, np.random.get_state(), random.getstate())
    GEN.bit_generator.state = state[0]
    np.random.set_state(state[1])
    random.setstate(state[2])
    return state


def _standalone(f, k, x, v):
    """A standalone module keeps what the function read as constants (it cannot read the
    caller's globals): the module made from call k's state answers as eager NumPy then."""
    def got():
        namespace = {}
        exec(ad.standalone_source(f, x), namespace)  # noqa: S102  the module under test
        return namespace["value_and_grad"](x)
    return got, lambda: tape.value_and_grad(f)(x)


_DASK = {}


def _dask(f, k, x, v):
    """autodiffgen.dask on Dask's synchronous scheduler: the loss of small arguments
    (x, differentiated) and chunked data (the rows' sum decomposes by chunks); its
    modules are made once and checked against what the function read at every call."""
    da = pytest.importorskip("dask.array")
    import dask

    from autodiffgen import dask as add

    def loss(w, rows):
        return f(w) * np.sum(rows)
    data = np.linspace(0.5, 1.5, 24).reshape(12, 2)

    def got():
        with dask.config.set(scheduler="synchronous"):
            vg = _DASK.setdefault(f, add.value_and_grad(loss, reduce="sum"))
            return vg(x, da.from_array(data, chunks=5))
    return got, lambda: tape.value_and_grad(loss)(x, data)


FRONT_ENDS = {
    "grad": _grad,
    "value_and_grad": _value_and_grad,
    "jvp": _jvp,
    "vjp": _vjp,
    "jacobian": _jacobian,
    "jacfwd": _jacfwd,
    "hessian": _hessian,
    "hvp": _hvp,
    "vmap": _vmap,
    "checkpoint": _checkpoint,
    "has_aux": _has_aux,
    "compile_step": _compile_step,
    "graph_of": _graph_of,
    "standalone_source": _standalone,
    "autodiffgen.dask": _dask,
}

# what is not a front end of its own (a spelling of one above, or no transformation)
NOT_IN_MATRIX = {
    "jacrev": "jacobian", "grad_and_aux": "has_aux", "emit": "its source is grad's",
    "primitive": "a rule, not a transformation",
    "defjvp": "a rule", "defvjp": "a rule", "stop_gradient": "a primitive",
    "custom_vjp": "a rule (test_custom_derivatives.py)",
    "custom_jvp": "a rule (test_custom_derivatives.py)",
    "elementwise_grad": "grad of the output's sum (test_habits.py)",
    "register_pytree_node": "a tree type", "explain_retraces": "a log",
    "GradFunction": "grad's class",
    "autodiffgen.dask.value_and_grad": "autodiffgen.dask",
    "autodiffgen.dask.grad": "autodiffgen.dask (its value_and_grad without the value)",
    "scipy_objective": "autodiffgen.dask's value_and_grad, as SciPy calls it",
    "autodiffgen.dask.from_npy": "makes a Dask array of a .npy file, differentiates nothing",
    "autodiffgen.dask.worker_peaks": "reads the workers' peak memory, differentiates nothing",
}


def _close(got, want, path="out"):
    if isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys(), path
        for key in want:
            _close(got[key], want[key], f"{path}[{key!r}]")
    elif isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want)):
            _close(g, w, f"{path}[{i}]")
    else:
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-7,
                                   err_msg=path)


# cells whose answer is a clear refusal naming the user's line, and why
REFUSED = {
    ("vmap", "mask count from data"): "the examples select different numbers of elements",
    ("standalone_source", "NumPy Generator draw"): "a module cannot draw from your generator",
    ("autodiffgen.dask", "NumPy Generator draw"): "a worker cannot draw from your stream",
    ("autodiffgen.dask", "legacy np.random draw"): "a worker cannot draw from your stream",
    ("autodiffgen.dask", "standard-library random draw"): "a worker cannot draw from your stream",
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("front_end", list(FRONT_ENDS))
def test_every_front_end_answers_what_eager_numpy_answers(front_end, case):
    f = CASES[case]
    for k in range(CALLS):
        got, want = FRONT_ENDS[front_end](f, k, _x(k), _x(10 + k))
        _set(k)
        if (front_end, case) in REFUSED:
            _refused(got, f)
            continue
        got = got()
        _set(k)
        _close(got, want(), f"{front_end} / {case}, call {k}")


def _refused(run, f):
    """The error names a line of this file: the user's."""
    with pytest.raises(ad.AutodiffgenError, match=r"test_front_end_matrix.py:\d+: "):
        run()


def test_every_public_transformation_is_in_the_matrix():
    """A new front end (a public callable of autodiffgen, autodiffgen.optim or
    autodiffgen.dask) fails here until the matrix runs it, or says why it need not."""
    from autodiffgen import dask as add
    from autodiffgen import optim

    public = {name for name in ad.__all__ if callable(getattr(ad, name))
              and not name.endswith("Error")}
    public |= {name for name in dir(optim) if name.startswith("compile")}
    public |= {f"autodiffgen.dask.{name}" if name != "scipy_objective" else name
               for name in add.__all__ if not name.endswith("Error")}
    covered = set(FRONT_ENDS) | set(NOT_IN_MATRIX) | {"checkpoint"}
    missing = public - covered
    assert not missing, f"front ends missing from the matrix: {sorted(missing)}"
