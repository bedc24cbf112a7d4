"""Scenarios run on every rank of a Cluster: each checks one collective against reference.py.

A scenario gets the rank's Communicator and plain arguments, raises on any
difference, and returns something small for the parent to inspect.
"""

from __future__ import annotations

import numpy as np

import purlin
from reference import ALL_DTYPES, as_dtype, assert_equal, ops_for, rank_op, reduce, values


def _input(comm, rank, count, dtype, seed, op=purlin.SUM):
    return as_dtype(values(rank, count, dtype, seed, op), dtype)


def _all_inputs(comm, count, dtype, seed, op=purlin.SUM):
    return [values(r, count, dtype, seed, op) for r in range(comm.world_size)]


def all_reduce(comm, dtype, count, seed):
    for op in ops_for(dtype, comm.world_size):
        expected = reduce(_all_inputs(comm, count, dtype, seed, op), op, dtype, comm.world_size)
        send = _input(comm, comm.rank, count, dtype, seed, op)
        original = send.copy()
        recv = np.zeros_like(send)
        mine = rank_op(op, comm.rank)
        assert comm.all_reduce(send, recv, op=mine) is recv
        assert_equal(recv, expected, f"all_reduce {op} out of place")
        assert_equal(send, original, f"all_reduce {op} changed send")
        assert comm.all_reduce(send, op=mine) is send
        assert_equal(send, expected, f"all_reduce {op} in place")
    return count


def all_reduce_sum(comm, dtype, count, seed):
    """SUM only, out of place: for sizes where computing every op's reference costs too much."""
    expected = reduce(_all_inputs(comm, count, dtype, seed), purlin.SUM, dtype, comm.world_size)
    send = _input(comm, comm.rank, count, dtype, seed)
    recv = np.zeros_like(send)
    comm.all_reduce(send, recv)
    assert_equal(recv, expected, "all_reduce SUM")


def reduce_to_roots(comm, dtype, count, seed):
    for root in range(comm.world_size):
        for op in (purlin.SUM, purlin.MAX, purlin.premul_sum(3)):
            expected = reduce(_all_inputs(comm, count, dtype, seed + root, op), op, dtype, comm.world_size)
            send = _input(comm, comm.rank, count, dtype, seed + root, op)
            recv = np.zeros_like(send)
            comm.reduce(send, recv, op=rank_op(op, comm.rank), root=root)
            if comm.rank == root:
                assert_equal(recv, expected, f"reduce {op} root {root}")
            comm.reduce(send, op=rank_op(op, comm.rank), root=root)
            if comm.rank == root:
                assert_equal(send, expected, f"reduce {op} root {root} in place")


def reduce_scatter(comm, dtype, count, seed):
    n = comm.world_size
    for op in ops_for(dtype, comm.world_size):
        expected = reduce(_all_inputs(comm, count * n, dtype, seed, op), op, dtype, n)
        send = _input(comm, comm.rank, count * n, dtype, seed, op).reshape(n, count)
        recv = np.zeros(count, dtype=send.dtype)
        comm.reduce_scatter(send, recv, op=rank_op(op, comm.rank))
        assert_equal(recv, expected[comm.rank * count:(comm.rank + 1) * count], f"reduce_scatter {op}")


def all_gather(comm, dtype, count, seed):
    send = _input(comm, comm.rank, count, dtype, seed)
    recv = np.zeros((comm.world_size, count), dtype=send.dtype)
    comm.all_gather(send, recv)
    for r in range(comm.world_size):
        assert_equal(recv[r], _input(comm, r, count, dtype, seed), f"all_gather slice {r}")


def broadcast(comm, dtype, count, seed):
    for root in range(comm.world_size):
        expected = _input(comm, root, count, dtype, seed + root)
        mine = _input(comm, comm.rank, count, dtype, seed + root)
        recv = np.zeros_like(mine)
        comm.broadcast(mine, recv, root=root)
        assert_equal(recv, expected, f"broadcast root {root}")
        comm.broadcast(mine, root=root)
        assert_equal(mine, expected, f"broadcast root {root} in place")


def all_to_all(comm, dtype, count, seed):
    n = comm.world_size
    send = _input(comm, comm.rank, count * n, dtype, seed).reshape(n, count)
    recv = np.zeros_like(send)
    comm.all_to_all(send, recv)
    for r in range(n):
        theirs = _input(comm, r, count * n, dtype, seed).reshape(n, count)
        assert_equal(recv[r], theirs[comm.rank], f"all_to_all from {r}")


def gather(comm, dtype, count, seed):
    n = comm.world_size
    for root in range(n):
        send = _input(comm, comm.rank, count, dtype, seed + root)
        recv = np.zeros((n, count), dtype=send.dtype) if comm.rank == root else None
        comm.gather(send, recv, root=root)
        if comm.rank == root:
            for r in range(n):
                assert_equal(recv[r], _input(comm, r, count, dtype, seed + root), f"gather root {root} slice {r}")


def scatter(comm, dtype, count, seed):
    n = comm.world_size
    for root in range(n):
        full = _input(comm, root, count * n, dtype, seed + root).reshape(n, count)
        recv = np.zeros(count, dtype=full.dtype)
        comm.scatter(full if comm.rank == root else None, recv, root=root)
        assert_equal(recv, full[comm.rank], f"scatter root {root}")


def send_recv_ring(comm, dtype, count, seed):
    n, me = comm.world_size, comm.rank
    send = _input(comm, me, count, dtype, seed)
    recv = np.zeros_like(send)
    with purlin.group():
        comm.send(send, (me + 1) % n)
        comm.recv(recv, (me - 1) % n)
    assert_equal(recv, _input(comm, (me - 1) % n, count, dtype, seed), "ring send/recv")


def _v_layout(n, seed):
    """Uneven counts (one of them zero when n > 2) and displacements with gaps."""
    counts = [(3 * r + seed) % 7 + 1 for r in range(n)]
    if n > 2:
        counts[1] = 0
    displs, offset = [], 0
    for c in counts:
        displs.append(offset)
        offset += c + 2  # a gap of two elements that must stay untouched
    return counts, displs, offset


def all_gather_v(comm, dtype, seed):
    counts, displs, total = _v_layout(comm.world_size, seed)
    send = _input(comm, comm.rank, counts[comm.rank], dtype, seed)
    recv = np.full(total, 7, dtype=send.dtype)
    comm.all_gather_v(send, recv, counts, displs)
    expected = as_dtype(np.full(total, 7.0), dtype)
    for r, (c, d) in enumerate(zip(counts, displs)):
        expected[d:d + c] = _input(comm, r, c, dtype, seed)
    assert_equal(recv, expected, "all_gather_v")
    packed = np.zeros(sum(counts), dtype=send.dtype)
    comm.all_gather_v(send, packed, counts)  # default displs: packed
    assert_equal(packed, np.concatenate([expected[d:d + c] for c, d in zip(counts, displs)]), "all_gather_v packed")


def reduce_scatter_v(comm, dtype, seed):
    counts, displs, total = _v_layout(comm.world_size, seed)
    for op in (purlin.SUM, purlin.MIN, purlin.premul_sum(3)):
        expected = reduce(_all_inputs(comm, total, dtype, seed, op), op, dtype, comm.world_size)
        send = _input(comm, comm.rank, total, dtype, seed, op)
        recv = np.zeros(counts[comm.rank], dtype=send.dtype)
        comm.reduce_scatter_v(send, recv, counts, displs, op=rank_op(op, comm.rank))
        d = displs[comm.rank]
        assert_equal(recv, expected[d:d + counts[comm.rank]], f"reduce_scatter_v {op}")


def all_to_all_v(comm, dtype, seed):
    n, me = comm.world_size, comm.rank

    def amount(src, dst):  # elements src sends to dst; some pairs send nothing
        return (src * 3 + dst * 5 + seed) % 4

    send_counts = [amount(me, p) for p in range(n)]
    recv_counts = [amount(p, me) for p in range(n)]
    send = _input(comm, me, sum(send_counts), dtype, seed)
    recv_displs = [sum(recv_counts[:p]) + p for p in range(n)]  # one-element gaps
    recv = np.full(sum(recv_counts) + n, 5, dtype=send.dtype)
    comm.all_to_all_v(send, recv, send_counts, recv_counts, recv_displs=recv_displs)
    for p in range(n):
        theirs = _input(comm, p, sum(amount(p, q) for q in range(n)), dtype, seed)
        start = sum(amount(p, q) for q in range(me))
        got = recv[recv_displs[p]:recv_displs[p] + recv_counts[p]]
        assert_equal(got, theirs[start:start + recv_counts[p]], f"all_to_all_v from {p}")
        gap = recv[recv_displs[p] + recv_counts[p]]
        assert float(gap) == 5.0, f"all_to_all_v wrote into the gap after peer {p}"


def every_collective(comm, seed):
    """One pass over every collective and every dtype at a packet-sized count."""
    for dtype in ALL_DTYPES:
        all_reduce(comm, dtype, 5, seed)
        all_gather(comm, dtype, 3, seed)
        reduce_scatter(comm, dtype, 3, seed)
        all_to_all(comm, dtype, 2, seed)
        broadcast(comm, dtype, 9, seed)
    return len(ALL_DTYPES)


def all_gather_columns(comm, dtype, rows, width, seed):
    """Every rank's rows x width block lands in its column block of a rows x (n*width) matrix."""
    n = comm.world_size
    send = _input(comm, comm.rank, rows * width, dtype, seed).reshape(rows, width)
    recv = np.zeros((rows, n * width), dtype=send.dtype)
    assert comm.all_gather_columns(send, recv, rows) is recv
    blocks = [_input(comm, r, rows * width, dtype, seed).reshape(rows, width) for r in range(n)]
    assert_equal(recv, np.concatenate(blocks, axis=1), f"all_gather_columns {rows}x{width}")


def reduce_scatter_columns(comm, dtype, rows, width, seed):
    """Rank r gets the reduction of column block r of every rank's rows x (n*width) matrix."""
    n, me = comm.world_size, comm.rank
    for op in (purlin.SUM, purlin.MAX, purlin.premul_sum(3)):
        inputs = _all_inputs(comm, rows * n * width, dtype, seed, op)
        expected = reduce(inputs, op, dtype, n).reshape(rows, n * width)[:, me * width:(me + 1) * width]
        send = _input(comm, me, rows * n * width, dtype, seed, op).reshape(rows, n * width)
        recv = np.zeros((rows, width), dtype=send.dtype)
        comm.reduce_scatter_columns(send, recv, rows, op=rank_op(op, me))
        assert_equal(recv, expected, f"reduce_scatter_columns {op} {rows}x{width}")


def columns_refused(comm):
    """Rows that do not divide the block, and wrong recv sizes, are refused before any C call."""
    x = np.zeros(6, np.float32)
    for bad in (lambda: comm.all_gather_columns(x, np.zeros(6 * comm.world_size, np.float32), 4),
                lambda: comm.all_gather_columns(x, np.zeros(6, np.float32), 2),
                lambda: comm.reduce_scatter_columns(np.zeros(6 * comm.world_size, np.float32), x, 0)):
        try:
            bad()
        except purlin.InvalidArgument:
            continue
        raise AssertionError("a bad column call was accepted")
    all_gather_columns(comm, "float32", 2, 3, 1)  # still usable


def all_to_all_matrix(comm, dtype, most, seed):
    """Pair sizes and destination offsets in one matrix (gaps between slices stay untouched)."""
    n, me = comm.world_size, comm.rank
    rng = np.random.default_rng(seed)  # the same matrix on every rank
    counts = rng.integers(0, most + 1, size=(n, n)).tolist()
    displs = [[0] * n for _ in range(n)]
    for q in range(n):
        at = 0
        for p in range(n):
            displs[p][q] = at + 1
            at = displs[p][q] + counts[p][q]
    send = _input(comm, me, sum(counts[me]), dtype, seed)
    recv = np.full(max(1, sum(counts[p][me] + 1 for p in range(n))), 7, dtype=send.dtype)
    comm.all_to_all_matrix(send, recv, counts, displs)
    expected = as_dtype(np.full(len(recv), 7.0), dtype)
    for p in range(n):
        theirs = _input(comm, p, sum(counts[p]), dtype, seed)
        start = sum(counts[p][:me])
        expected[displs[p][me]:displs[p][me] + counts[p][me]] = theirs[start:start + counts[p][me]]
    assert_equal(recv, expected, "all_to_all_matrix")
    packed = np.zeros(sum(counts[p][me] for p in range(n)), dtype=send.dtype)
    comm.all_to_all_matrix(send, packed, counts)  # default displs: packed by source
    assert_equal(packed, np.concatenate([expected[displs[p][me]:displs[p][me] + counts[p][me]] for p in range(n)]),
                 "all_to_all_matrix packed")
