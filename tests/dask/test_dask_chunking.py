"""The chunking policy's decisions (chunking.py), without a cluster or a clock; and that a
grouped call computes the gradient of the user's chunks, on Dask's default scheduler."""

import logging
import warnings

import numpy as np
import pytest

da = pytest.importorskip("dask.array")

import autodiffgen
import autodiffgen.dask as add
from autodiffgen.dask import chunking
from autodiffgen.dask.chunking import IN_FLIGHT, MAX_CHUNK_BYTES, planned, target_rows

ROW = 17 * 8  # 16 float64 features and a float64 label


def test_small_chunks_merge_into_one_per_worker():
    plan = planned((125_000,) * 32, ROW, workers=2, memory_limit=4 * 2**30)
    assert not plan.kept
    assert plan.rows == (2_000_000, 2_000_000)


def test_memory_limit_caps_the_merged_chunk():
    limit = 512 * 2**20
    plan = planned((125_000,) * 32, ROW, workers=2, memory_limit=limit)
    assert max(plan.rows) * ROW <= limit // IN_FLIGHT
    assert sum(plan.rows) == 4_000_000
    assert len(plan.rows) % 2 == 0  # as many chunks on each worker


def test_without_a_limit_the_cap_is_max_chunk_bytes():
    rows = target_rows(10_000_000, ROW, workers=1)
    assert rows * ROW <= MAX_CHUNK_BYTES


def test_large_or_few_chunks_are_kept():
    assert planned((2_000_000, 2_000_000), ROW, workers=2).kept
    assert planned((100, 100), ROW, workers=2).kept  # no more chunks than workers
    assert planned((1000,), ROW).kept


def test_grouping_keeps_row_order_and_never_splits():
    plan = planned((3, 5, 2, 7, 1, 4, 6), 8, workers=2, memory_limit=None)
    assert plan.groups == ((0, 1, 2), (3, 4, 5), (6,))  # 14 rows a task: 3+5+2 | 7+1+4 | 6
    assert plan.rows == (10, 12, 6)


def test_chunks_on_a_worker_are_grouped_with_that_workers_only():
    homes = ["a", "b"] * 4
    plan = planned((100,) * 8, 8, workers=2, homes=homes)
    assert plan.groups == ((0, 2, 4, 6), (1, 3, 5, 7))


def _data(rows=1000, chunk=100):
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((rows, 4)), (rng.random(rows) < 0.5).astype(float)
    return x, y, da.from_array(x, chunks=(chunk, 4)), da.from_array(y, chunks=chunk)


def loss(w, x, y):
    z = x @ w
    return np.mean(np.logaddexp(0.0, z) - y * z)


def test_auto_groups_says_so_and_keeps_the_gradient(caplog):
    x, y, X, Y = _data()
    w = np.linspace(-1.0, 1.0, 4)
    vg = add.value_and_grad(loss)
    with caplog.at_level(logging.INFO, logger="autodiffgen"):
        value, g = vg(w, X, Y)
    assert vg.plan.groups == (tuple(range(10)),) and not vg.plan.kept
    assert "10 chunks of about 100 rows" in caplog.text and "run as 1 task of" in caplog.text
    want_value, want = autodiffgen.value_and_grad(loss)(w, x, y)
    np.testing.assert_allclose(value, want_value, rtol=1e-12)
    np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-15)


def test_keep_runs_the_users_chunks_and_warns_once():
    _, _, X, Y = _data()
    w = np.zeros(4)
    vg = add.grad(loss, chunks="keep")
    with pytest.warns(UserWarning, match="chunks='auto' groups them"):
        vg(w, X, Y)
    assert vg.plan.rows == (100,) * 10 and vg.plan.kept
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        vg(w, X, Y)  # said once


def test_chunks_option_is_checked():
    with pytest.raises(autodiffgen.errors.ArgumentError, match="chunks must be"):
        add.grad(loss, chunks=1000)


def test_blocks_cut_rows_evenly_and_never_into_one_row():
    blocks = add._WORKER["blocks"]
    assert blocks(10, 0) == [(0, 10)]
    assert blocks(10, 4) == [(0, 3), (3, 6), (6, 10)]
    assert blocks(3, 1) == [(0, 3)]  # not three blocks of one row
    assert blocks(1, 8) == [(0, 1)]


GUARDED = '''
class GuardFailure(Exception):
    pass


def f(x):
    if len(x) < 4:
        raise GuardFailure("fewer than 4 rows")
    return float(x.sum()), (x.sum(axis=0),)
'''


@pytest.mark.parametrize("block, served", [(5, "in blocks"), (3, "whole")])
def test_a_chunk_runs_in_blocks_or_whole_when_a_block_takes_another_path(block, served):
    variant = {"key": "guarded-test", "source": GUARDED, "function": "f", "rows": None}
    x = np.arange(20.0).reshape(10, 2)
    part = add._WORKER["run_chunk"](4, [variant], (("chunk", 0),), [], ("sum", None, block), x)
    assert part["rows"] == [(4, 10)] and not part["failures"]  # the chunk's rows, once
    assert part["value"] == x.sum()
    np.testing.assert_array_equal(part["grads"][0], x.sum(axis=0))
    failed = add._WORKER["run_chunk"](4, [variant], (("chunk", 0),), [], ("sum", None, 2), x[:3])
    assert failed["failures"] == [(4, "fewer than 4 rows")] and failed["value"] is None


def test_blocks_of_a_chunk_give_the_gradient_of_the_chunk(monkeypatch):
    monkeypatch.setattr(chunking, "BLOCK_BYTES", 8 * 5 * 8)  # 8 rows of 4 features and y
    x, y, X, Y = _data()
    w = np.linspace(-1.0, 1.0, 4)
    vg = add.value_and_grad(loss)
    value, g = vg(w, X, Y)
    assert vg.plan.block == 8
    want_value, want = autodiffgen.value_and_grad(loss)(w, x, y)
    np.testing.assert_allclose(value, want_value, rtol=1e-12)
    np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-15)


def test_a_worker_with_raised_malloc_thresholds_runs_larger_blocks():
    block_for = add._WORKER["block_for"]
    assert block_for(7_710, {}) == 7_710  # Dask's nanny: MALLOC_TRIM_THRESHOLD_ alone
    assert block_for(7_710, {"MALLOC_TRIM_THRESHOLD_": "65536"}) == 7_710
    raised = {"MALLOC_TRIM_THRESHOLD_": str(64 * 2**20), "MALLOC_MMAP_THRESHOLD_": str(2**25)}
    assert block_for(7_710, raised) == 2**25 // 64  # 4 MB temporaries, from the heap
    assert block_for(7_710, {"MALLOC_MMAP_THRESHOLD_": str(2**25)}) == 7_710  # trims still
    assert block_for(0, raised) == 0  # aux="chunks": never blocks
