"""Cache keys of the in-memory cache: static values that compare equal but are not the same
(-0.0 and 0.0, NaN), and the number of arguments a key can hold."""

import math

import numpy as np
import pytest

import autodiffgen as ad


def test_negative_zero_and_nan_static_values():
    f = ad.grad(lambda x, s: np.sum(x * np.copysign(1.0, s)))
    np.testing.assert_array_equal(f(np.ones(2), 0.0), [1.0, 1.0])
    np.testing.assert_array_equal(f(np.ones(2), -0.0), [-1.0, -1.0])
    g = ad.grad(lambda x, s: np.sum(x) + (0.0 if math.isnan(s) else s))
    for _ in range(3):
        g(np.ones(2), float("nan"))
    assert g.cache_info().misses == 1


def test_more_arguments_than_the_cache_handles_is_an_error():
    f = ad.grad(lambda *xs: sum(np.sum(x) for x in xs))
    with pytest.raises(ad.ArgumentError, match="at most 256"):
        f(*[np.ones(1)] * 257)


def test_keys_of_pytree_types_hold_their_structure_and_aux_data():
    """Equal structures (new values) give equal keys; another field set, key order,
    default_factory or aux_data another key; a static leaf's value is in the key."""
    import collections
    import dataclasses

    from autodiffgen.cache.keys import signature_key

    @dataclasses.dataclass
    class P:
        W: np.ndarray
        name: str

    class Tagged:
        def __init__(self, x, tag):
            self.x, self.tag = x, tag
    ad.register_pytree_node(Tagged, lambda t: ((t.x,), t.tag), lambda tag, c: Tagged(c[0], tag))

    def key(*args):
        return signature_key(args, [False] * len(args))
    a, b = np.ones(3), np.zeros(3)
    assert key(P(a, "n")) == key(P(b, "n")) != key(P(a, "m"))
    assert key(P(a, "n")) != key(P(np.ones(4), "n"))
    od = collections.OrderedDict
    assert key(od(x=a, y=b)) == key(od(x=b, y=a)) != key(od(y=a, x=b))
    assert key(od(x=a)) != key({"x": a})
    dd = collections.defaultdict
    assert key(dd(list, x=a)) == key(dd(list, x=b)) != key(dd(float, x=a))
    assert key(Tagged(a, "t")) == key(Tagged(b, "t")) != key(Tagged(a, "u"))
