"""Groups, host streams, bad inputs and library errors, on spawned host-Atom ranks."""

from __future__ import annotations

import pytest

from cluster import Cluster

WORLDS = [2, 4]


@pytest.mark.parametrize("world", WORLDS)
def test_grouped_collectives(clusters, world):
    for seed in range(3):
        clusters.run(world, "scenarios_misc.grouped_collectives", seed)


def test_group_ends_even_when_its_block_raises(clusters):
    clusters.run(2, "scenarios_misc.group_balanced_after_exception")


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("count", [1, 100, 5000])
def test_all_pairs_send_recv_in_one_group(clusters, world, count):
    clusters.run(world, "scenarios_misc.all_pairs_exchange", count)


@pytest.mark.parametrize("world", WORLDS)
def test_host_stream_is_asynchronous_until_synchronize(clusters, world):
    clusters.run(world, "scenarios_misc.host_stream_async", 3)


BAD_INPUTS = {
    # case: (exception class, words its message must contain)
    "dtype_mismatch": ("InvalidArgument", "send is float32 but recv is float64"),
    "non_contiguous": ("InvalidArgument", "contiguous"),
    "all_gather_size": ("InvalidArgument", "world_size x send"),
    "reduce_scatter_size": ("InvalidArgument", "world_size x recv"),
    "all_reduce_size": ("InvalidArgument", "recv (like send) must have 8 elements, has 9"),
    "all_to_all_divisible": ("InvalidArgument", "not a multiple of world_size"),
    "bad_root": ("InvalidArgument", "root must be in"),
    "negative_root": ("InvalidArgument", "got -1"),
    "bad_peer": ("InvalidArgument", "peer must be in"),
    "read_only_recv": ("InvalidArgument", "read-only"),
    "unsupported_dtype": ("InvalidArgument", "dtype int16 is not supported"),
    "bool_dtype": ("InvalidArgument", "dtype bool is not supported"),
    "not_an_array": ("InvalidArgument", "numpy.ndarray, torch.Tensor or cupy.ndarray"),
    "bad_op": ("InvalidArgument", "unknown reduction op"),
    "counts_length": ("InvalidArgument", "one per rank"),
    "counts_overflow": ("InvalidArgument", "counts and displs reach element"),
    "gather_root_needs_recv": ("InvalidArgument", "needs a recv array"),
    "int_premul_fraction": ("InvalidArgument", "not an integer"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_is_refused_before_the_library(clusters, case):
    cls, words = BAD_INPUTS[case]
    for name, text, code in clusters.run(2, "scenarios_misc.bad_input", case):
        assert name == cls, text
        assert words in text
        assert code == 4


def test_library_errors_carry_the_library_message(clusters):
    for name, text, code, library_message in clusters.run(2, "scenarios_misc.library_rejects_overlap"):
        assert name == "InvalidArgument" and code == 4
        assert library_message, "no purlinGetLastError text"
        assert library_message in text
        assert "all_reduce on rank" in text


def test_float8_avg_and_premul_sum_rejected_only_on_one_rank(clusters):
    pytest.importorskip("ml_dtypes")
    [seen] = clusters.run(1, "scenarios_misc.float8_avg_and_premul_sum")
    assert len(seen) == 12 and all(s is not None for s in seen), seen
    for kind, text, code, library_message in seen:
        assert (kind, code) == ("InvalidArgument", 4)
        assert library_message in text
        assert "is not supported on a one-rank communicator" in library_message
    assert "AllReduce: avg on float8e4m3" in seen[0][3]
    assert "Reduce: premulsum on float8e4m3" in seen[4][3]
    assert "ReduceScatter: avg on float8e5m2" in seen[8][3]
    for seen in clusters.run(2, "scenarios_misc.float8_avg_and_premul_sum"):
        assert seen == [None] * 12


def test_ranks_that_disagree_get_an_error(clusters):
    results = clusters.run(2, "scenarios_misc.mismatched_calls", timeout=40)
    assert any(r is not None for r in results), "no rank noticed the mismatch"
    for result in results:
        if result is not None:
            name, text, code = result
            assert code in (5, 6), text  # InvalidUsage (mismatch) or RemoteError (peer failed)


def test_closed_communicator_refuses_calls(clusters):
    for text in clusters.run(2, "scenarios_misc.closed_communicator"):
        assert "closed" in text


def test_lone_rank_times_out_instead_of_hanging(library):
    cluster = Cluster(2, env={"PURLIN_TIMEOUT": "2"})
    try:
        results = cluster.run("scenarios_misc.lone_rank_times_out", timeout=30)
    finally:
        cluster.kill()
    name, text, code = results[0]
    assert name in ("Timeout", "RemoteError"), text
    assert "timed out" in text.lower(), text


def test_abort_ends_a_pending_wait_at_once(library):
    cluster = Cluster(2, env={"PURLIN_TIMEOUT": "30"})
    try:
        results = cluster.run("scenarios_misc.abort_unblocks_a_waiting_call", timeout=40)
    finally:
        cluster.kill()
    name, text, code, waited = results[0]
    assert name == "Aborted" and code == 6, text
    assert "aborted" in text
    assert waited < 5, f"abort took {waited:.1f} s to end the wait"
