"""Rules as data (issue 26, item 4): what a stage knows of a primitive is in that stage's
table, keyed by the primitive; a Primitive holds what every stage needs."""

import gc
import inspect
import weakref

import numpy as np

import autodiffgen as ad
from autodiffgen import rules
from autodiffgen.rules import PRIMITIVES
from autodiffgen.rules.batching import BATCH_RULES
from autodiffgen.rules.jvps import JVPS, FromVJP, Linear, Multilinear, PerArgument
from autodiffgen.rules.vjps import BLOCKS, PIECES, SOLE_VJPS, VARIADIC_VJPS, VJPS

STAGE_FIELDS = ("vjps", "variadic_vjp", "sole_vjps", "jvps", "jvp_from", "linear_in",
                "batch", "pieces", "block", "complex_ok", "tangent")


def test_a_primitive_holds_no_stage_fields():
    for prim in PRIMITIVES.values():
        assert not set(STAGE_FIELDS) & set(vars(prim)), prim
    assert len(inspect.signature(rules.Primitive).parameters) <= 10


def test_each_kind_of_rule_is_in_its_stage_table():
    assert VJPS[PRIMITIVES["sin"]][0] is not None
    assert isinstance(JVPS[PRIMITIVES["sin"]], FromVJP)
    assert isinstance(JVPS[PRIMITIVES["sum"]], Linear)
    assert isinstance(JVPS[PRIMITIVES["matmul"]], Multilinear)
    assert PRIMITIVES["einsum"] in VARIADIC_VJPS
    assert PRIMITIVES["maximum"] in SOLE_VJPS
    assert {PRIMITIVES["stack"], PRIMITIVES["concatenate"]} <= set(PIECES)
    assert set(BLOCKS) == {PRIMITIVES["getitem"]}
    assert BATCH_RULES[PRIMITIVES["sin"]].__name__ == "elementwise"


def test_registration_fills_the_tables():
    @ad.primitive
    def softplus(x):
        return np.logaddexp(0.0, x)

    ad.defvjp(softplus, lambda g, ans, x: g / (1.0 + np.exp(-x)))
    ad.defjvp(softplus, lambda t, ans, x: t / (1.0 + np.exp(-x)))
    assert len(VJPS[softplus.prim]) == 1
    assert isinstance(JVPS[softplus.prim], PerArgument) and len(JVPS[softplus.prim].rules) == 1
    x = np.array([0.5, -1.0])
    np.testing.assert_allclose(ad.grad(lambda x: np.sum(softplus(x)))(x), 1 / (1 + np.exp(-x)))
    rules.defbatch(softplus.prim, lambda ctx, x: softplus(x))
    assert softplus.prim in BATCH_RULES


def test_the_tables_let_a_users_primitive_go():
    @ad.primitive
    def twice(x):
        return 2.0 * x

    ad.defvjp(twice, lambda g, ans, x: 2.0 * g)
    gone = weakref.ref(twice.prim)
    del twice
    gc.collect()
    assert gone() is None
