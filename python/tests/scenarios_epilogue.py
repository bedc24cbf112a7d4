"""Scenarios for AllReduce epilogues (all_reduce_epilogue, all_reduce_rmsnorm), checked against
a float64 reference of the unfused sequence.

The reference sums every rank's input in float64 and rounds it to the dtype,
adds the residual and rounds, then RMSNorm in float64 (mean square, 1/sqrt,
times the weight) rounded; the fp8 output and row scales are derived from
the output the call produced, as a quantize kernel after it would (float32
division, e4m3 rounded to nearest even and saturated at 448).

Tolerance: inputs are multiples of 1/4 (weights of 1/8) in [-2, 2], so every
sum is exact in every dtype: the residual must equal its reference exactly,
and so must the fp8 output and the row scales. The output may differ by 1
ulp of the dtype (the library computes RMSNorm in float32, so a value near a
rounding boundary may round the other way), and for float32 also by its own
float32 steps: 8 roundings, 8 * 2**-24 * |want|.
"""

from __future__ import annotations

import numpy as np

import purlin
from purlin import EpilogueKind as K
from purlin import minifloat
from reference import as_dtype, ml_dtypes, np_dtype

# Every valid kind: residual add, RMSNorm or both, without fp8 or with a tensor or a row scale.
KINDS = [K.RESIDUAL_ADD, K.RMSNORM, K.RESIDUAL_ADD | K.RMSNORM]
KINDS += [k | K.QUANT_FP8 for k in KINDS[:3]] + [k | K.QUANT_FP8 | K.ROW_SCALE for k in KINDS[:3]]
HIDDEN = [1, 7, 64, 1024]
EPS = 1e-5
TENSOR_SCALE = 0.015625  # some outputs / scale pass 448 and saturate
FP8_MAX = np.float32(448)
_MANTISSA = {"float32": 23, "float16": 10, "bfloat16": 7}
_TINY = {"float32": 2.0 ** -149, "float16": 2.0 ** -24, "bfloat16": 2.0 ** -133}


def grid(seed, what, rank, shape, step=0.25, most=8):
    """Multiples of step in [-most*step, most*step] for input what of rank: exact in every dtype."""
    rng = np.random.default_rng([seed, what, rank])
    return rng.integers(-most, most + 1, shape).astype(np.float64) * step


def inputs(seed, rank, rows, hidden):
    """Rank rank's send and residual (rows x hidden) and weight (hidden), as float64."""
    return (grid(seed, 0, rank, (rows, hidden)), grid(seed, 1, rank, (rows, hidden)),
            grid(seed, 2, rank, hidden, step=0.125, most=16))


def rounded(x, dtype):
    return as_dtype(x, dtype).astype(np.float64)


def expected(comm, seed, rows, hidden, dtype, kind):
    """The unfused sequence on this rank: (z, the residual after it; y, the output)."""
    sends = [inputs(seed, r, rows, hidden)[0] for r in range(comm.world_size)]
    _, residual, weight = inputs(seed, comm.rank, rows, hidden)
    z = rounded(np.sum(sends, axis=0), dtype)
    if kind & K.RESIDUAL_ADD:
        z = rounded(z + residual, dtype)
    y = z
    if kind & K.RMSNORM:
        inv = 1 / np.sqrt(np.mean(z * z, axis=-1, keepdims=True) + float(np.float32(EPS)))
        y = rounded(z * inv * weight, dtype)
    return z, y


def assert_close(got, want, dtype, what):
    """got within 1 ulp of dtype of want (and float32's own roundings, for float32)."""
    got = np.asarray(got).astype(np.float64)
    _, exponent = np.frexp(want)
    ulp = np.maximum(np.ldexp(1.0, exponent - 1 - _MANTISSA[dtype]), _TINY[dtype])
    slack = 8 * 2.0 ** -24 * np.abs(want) if dtype == "float32" else 0
    bad = np.flatnonzero(~(np.abs(got - want) <= ulp + slack))
    if bad.size:
        shown = ", ".join(f"[{i}] got {got.flat[i]!r} want {want.flat[i]!r}" for i in bad[:5])
        raise AssertionError(f"{what}: {bad.size} elements past 1 ulp: {shown}")


def assert_exact(got, want, what):
    got = np.asarray(got).astype(np.float64)
    bad = np.flatnonzero(got != want)
    if bad.size:
        shown = ", ".join(f"[{i}] got {got.flat[i]!r} want {want.flat[i]!r}" for i in bad[:5])
        raise AssertionError(f"{what}: {bad.size} elements differ: {shown}")


def e4m3(values):
    """The e4m3 codes of float32 values, rounded to nearest even, saturated at 448 (the library's)."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)  # by bits: -0 is not 0
    unique, where = np.unique(bits, return_inverse=True)
    codes = np.array([minifloat.encode(float(v), minifloat.FLOAT8_E4M3) for v in unique.view(np.float32)],
                     dtype=np.uint8)
    return codes[where.reshape(values.shape)]


def check_quant(out, quant, scales, kind, what):
    """quant and scales against the ones derived from the produced output."""
    y = np.asarray(out).astype(np.float32).reshape(quant.shape)
    if kind & K.ROW_SCALE:
        amax = np.max(np.abs(y), axis=-1)
        scale = np.where(amax > 0, amax / FP8_MAX, np.float32(1)).astype(np.float32)
        if not np.array_equal(np.asarray(scales).view(np.uint32), scale.view(np.uint32)):
            raise AssertionError(f"{what}: row scales {np.asarray(scales)[:4]} want {scale[:4]}")
    else:
        scale = np.full(y.shape[0], TENSOR_SCALE, dtype=np.float32)
        assert np.asarray(scales).tolist() == [TENSOR_SCALE], f"{what}: the tensor scale changed"
    want = e4m3(y / scale[:, None])
    got = np.asarray(quant).view(np.uint8)
    bad = np.flatnonzero(got != want)
    if bad.size:
        raise AssertionError(f"{what}: fp8 codes {got.flat[bad[:4]]} at {bad[:4]}, want {want.flat[bad[:4]]}")


def every_kind(comm, dtype, seed):
    """Every kind x hidden size, a random number of rows (1..40), in place and apart, through
    all_reduce_epilogue; quant as uint8 bytes. Returns the number of calls checked."""
    rng = np.random.default_rng([seed, 99])
    calls = 0
    for kind in KINDS:
        for hidden in HIDDEN:
            for in_place in (False, True):
                rows = int(rng.integers(1, 41))
                seed += 1
                send, residual, weight = inputs(seed, comm.rank, rows, hidden)
                x = as_dtype(send, dtype)
                res = as_dtype(residual, dtype) if kind & K.RESIDUAL_ADD else None
                w = as_dtype(weight, dtype) if kind & K.RMSNORM else None
                quant = scales = None
                if kind & K.QUANT_FP8:
                    quant = np.zeros((rows, hidden), dtype=np.uint8)
                    scales = np.zeros(rows, np.float32) if kind & K.ROW_SCALE else np.full(1, TENSOR_SCALE, np.float32)
                recv = None if in_place else np.full_like(x, np.nan)
                what = f"{dtype} kind {kind!r} hidden {hidden} rows {rows} {'in place' if in_place else 'apart'}"
                got = comm.all_reduce_epilogue(x, recv, kind=kind, hidden=hidden, residual=res, weight=w,
                                               quant=quant, scales=scales, eps=EPS)
                assert got is (x if in_place else recv), what
                z, y = expected(comm, seed, rows, hidden, dtype, kind)
                assert_close(got, y, dtype, f"{what}: output")
                if res is not None:
                    assert_exact(res, z, f"{what}: residual")
                if not in_place:
                    assert_exact(x, rounded(send, dtype), f"{what}: send changed")
                if quant is not None:
                    check_quant(got, quant, scales, kind, what)
                calls += 1
    return calls


def rmsnorm(comm, dtype, seed):
    """all_reduce_rmsnorm on NumPy arrays: out allocated, given, and x itself; no residual; fp8
    by a tensor and by row scales (ml_dtypes float8_e4m3fn when there, else uint8); two calls
    in one group."""
    rows, hidden = 6, 64
    kind = K.RESIDUAL_ADD | K.RMSNORM
    fp8 = np_dtype("float8_e4m3fn") if ml_dtypes is not None else np.dtype(np.uint8)

    def operands(s):
        send, residual, weight = inputs(s, comm.rank, rows, hidden)
        return as_dtype(send, dtype), as_dtype(residual, dtype), as_dtype(weight, dtype)

    x, res, w = operands(seed)
    out = comm.all_reduce_rmsnorm(x, res, w, EPS)
    assert out.shape == x.shape and out.dtype == x.dtype and out is not x
    z, y = expected(comm, seed, rows, hidden, dtype, kind)
    assert_close(out, y, dtype, "out=None")
    assert_exact(res, z, "out=None: residual")

    x, res, w = operands(seed + 1)
    given = np.zeros_like(x)
    assert comm.all_reduce_rmsnorm(x, res, w, EPS, given) is given
    assert_close(given, expected(comm, seed + 1, rows, hidden, dtype, kind)[1], dtype, "out given")

    x, _, w = operands(seed + 2)
    assert comm.all_reduce_rmsnorm(x, None, w, EPS, x) is x
    assert_close(x, expected(comm, seed + 2, rows, hidden, dtype, K.RMSNORM)[1], dtype, "in place, no residual")

    for row_scale in (False, True):
        x, res, w = operands(seed + 3 + row_scale)
        quant = np.zeros((rows, hidden), dtype=fp8)
        scales = np.zeros(rows, np.float32) if row_scale else np.full(1, TENSOR_SCALE, np.float32)
        out = comm.all_reduce_rmsnorm(x, res, w, EPS, quant_out=quant, scales=scales, row_scale=row_scale)
        q_kind = kind | K.QUANT_FP8 | (K.ROW_SCALE if row_scale else 0)
        assert_close(out, expected(comm, seed + 3 + row_scale, rows, hidden, dtype, q_kind)[1], dtype, "fp8")
        check_quant(out, quant, scales, q_kind, f"fp8 row_scale={row_scale}")

    a, ra, wa = operands(seed + 5)
    b, rb, wb = operands(seed + 6)
    with purlin.group():
        out_a = comm.all_reduce_rmsnorm(a, ra, wa, EPS)
        out_b = comm.all_reduce_rmsnorm(b, rb, wb, EPS, b)
    assert_close(out_a, expected(comm, seed + 5, rows, hidden, dtype, kind)[1], dtype, "grouped, first")
    assert_close(out_b, expected(comm, seed + 6, rows, hidden, dtype, kind)[1], dtype, "grouped, second")


def rmsnorm_torch(comm, dtype, seed):
    """all_reduce_rmsnorm on CPU torch tensors (host Atom): out allocated with torch.empty_like,
    residual updated in place, fp8 with row scales into a torch.float8_e4m3fn tensor."""
    import torch

    rows, hidden = 5, 128
    kind = K.RESIDUAL_ADD | K.RMSNORM | K.QUANT_FP8 | K.ROW_SCALE
    send, residual, weight = inputs(seed, comm.rank, rows, hidden)
    tdtype = getattr(torch, dtype)
    x = torch.tensor(send, dtype=tdtype)
    res = torch.tensor(residual, dtype=tdtype)
    w = torch.tensor(weight, dtype=tdtype)
    quant = torch.zeros((rows, hidden), dtype=torch.float8_e4m3fn)
    scales = torch.zeros(rows, dtype=torch.float32)
    out = comm.all_reduce_rmsnorm(x, res, w, EPS, quant_out=quant, scales=scales, row_scale=True)
    assert isinstance(out, torch.Tensor) and out.dtype == tdtype and out.shape == x.shape
    z, y = expected(comm, seed, rows, hidden, dtype, kind)
    assert_close(out.double().numpy(), y, dtype, "torch out")
    assert_exact(res.double().numpy(), z, "torch residual")
    check_quant(out.float().numpy(), quant.view(torch.uint8).numpy(), scales.numpy(), kind, "torch fp8")
    assert_exact(x.double().numpy(), rounded(send, dtype), "torch x changed")


def refused(comm, case):
    """One bad epilogue (the same on every rank); returns the exception's class, text, code and
    library message, after a good call shows the communicator still works."""
    rows, hidden = 4, 8
    x = np.ones((rows, hidden), np.float32)
    w = np.ones(hidden, np.float32)
    res = np.zeros_like(x)
    base = np.zeros(2 * rows * hidden, np.float32)
    calls = {
        # Refused in Python, before the library.
        "residual_dtype": lambda: comm.all_reduce_rmsnorm(x, np.zeros((rows, hidden), np.float16), w, EPS),
        "weight_size": lambda: comm.all_reduce_epilogue(x, kind=K.RMSNORM, hidden=hidden,
                                                        weight=np.ones(hidden + 1, np.float32)),
        "quant_dtype": lambda: comm.all_reduce_rmsnorm(x, res, w, EPS, quant_out=np.zeros_like(x),
                                                       scales=np.ones(1, np.float32)),
        "scales_dtype": lambda: comm.all_reduce_rmsnorm(x, res, w, EPS, quant_out=np.zeros(x.shape, np.uint8),
                                                        scales=np.ones(1, np.float64)),
        "row_scales_count": lambda: comm.all_reduce_rmsnorm(x, res, w, EPS, quant_out=np.zeros(x.shape, np.uint8),
                                                            scales=np.ones(1, np.float32), row_scale=True),
        "quant_needs_scales": lambda: comm.all_reduce_rmsnorm(x, res, w, EPS, quant_out=np.zeros(x.shape, np.uint8)),
        "row_scale_needs_quant": lambda: comm.all_reduce_rmsnorm(x, res, w, EPS, row_scale=True),
        "bad_kind": lambda: comm.all_reduce_epilogue(x, kind="rmsnorm", weight=w),
        "bad_hidden": lambda: comm.all_reduce_epilogue(x, kind=K.RESIDUAL_ADD, hidden=0, residual=res),
        "read_only_residual": lambda: comm.all_reduce_rmsnorm(x, _read_only(res), w, EPS),
        # Refused by the library, with its words.
        "int_type": lambda: comm.all_reduce_epilogue(np.ones((rows, hidden), np.int32), kind=K.RESIDUAL_ADD,
                                                     residual=np.zeros((rows, hidden), np.int32)),
        "not_whole_rows": lambda: comm.all_reduce_epilogue(np.ones(10, np.float32), kind=K.RMSNORM, hidden=3,
                                                           weight=np.ones(3, np.float32)),
        "no_weight": lambda: comm.all_reduce_epilogue(x, kind=K.RMSNORM | K.RESIDUAL_ADD, hidden=hidden,
                                                      residual=res),
        "overlap": lambda: comm.all_reduce_rmsnorm(x, base[rows * hidden // 2:][:rows * hidden], w, EPS,
                                                   base[:rows * hidden]),
        "negative_eps": lambda: comm.all_reduce_rmsnorm(x, res, w, -1.0),
        "unknown_kind": lambda: comm.all_reduce_epilogue(x, kind=16 | K.RESIDUAL_ADD, residual=res),
        "unused_buffer": lambda: comm.all_reduce_epilogue(x, kind=K.RESIDUAL_ADD, residual=res, weight=w),
    }
    try:
        calls[case]()
    except purlin.PurlinError as exc:
        outcome = (type(exc).__name__, str(exc), exc.code, exc.library_message)
    else:
        raise AssertionError(f"{case}: no error raised")
    x, res, w = (grid(5, k, comm.rank, s).astype(np.float32) for k, s in ((0, (2, 7)), (1, (2, 7)), (2, 7)))
    z = np.sum([grid(5, 0, r, (2, 7)) for r in range(comm.world_size)], axis=0) + res
    out = comm.all_reduce_epilogue(x, kind=K.RESIDUAL_ADD, residual=res)
    assert_exact(out, z, f"after {case}: a good call")
    return outcome


def _read_only(array):
    array = array.copy()
    array.flags.writeable = False
    return array


def rmsnorm_torch_gpu(comm, dtype, seed):
    """all_reduce_rmsnorm on CUDA torch tensors, at sizes of one-shot packets and of the staged
    two-shot form, eagerly and replayed from a CUDA graph (the residual changes on every replay:
    the graph's second replay adds the reduced rows to what the first left)."""
    import torch

    device = f"cuda:{comm.device}"
    kind = K.RESIDUAL_ADD | K.RMSNORM | K.QUANT_FP8 | K.ROW_SCALE
    tdtype = getattr(torch, dtype)
    for rows, hidden in ((1, 4096), (3, 1000), (64, 4096), (300, 8192)):
        send, residual, weight = inputs(seed, comm.rank, rows, hidden)
        x = torch.tensor(send, dtype=tdtype, device=device)
        res = torch.tensor(residual, dtype=tdtype, device=device)
        w = torch.tensor(weight, dtype=tdtype, device=device)
        quant = torch.zeros((rows, hidden), dtype=torch.float8_e4m3fn, device=device)
        scales = torch.zeros(rows, dtype=torch.float32, device=device)
        out = comm.all_reduce_rmsnorm(x, res, w, EPS, quant_out=quant, scales=scales, row_scale=True)
        torch.cuda.synchronize(device)
        z, y = expected(comm, seed, rows, hidden, dtype, kind)
        what = f"cuda {dtype} {rows}x{hidden}"
        assert_close(out.double().cpu().numpy(), y, dtype, what + " out")
        assert_exact(res.double().cpu().numpy(), z, what + " residual")
        check_quant(out.float().cpu().numpy(), quant.view(torch.uint8).cpu().numpy(), scales.cpu().numpy(), kind,
                    what + " fp8")
        # In a graph: reset the residual, replay twice; the residual after is z + reduced.
        res.copy_(torch.tensor(residual, dtype=tdtype, device=device))
        stream = torch.cuda.Stream(device)
        with torch.cuda.stream(stream):
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, stream=stream):
                comm.all_reduce_rmsnorm(x, res, w, EPS, out=out)
        res.copy_(torch.tensor(residual, dtype=tdtype, device=device))
        graph.replay()
        graph.replay()
        torch.cuda.synchronize(device)
        reduced = rounded(np.sum([inputs(seed, r, rows, hidden)[0] for r in range(comm.world_size)], axis=0), dtype)
        assert_exact(res.double().cpu().numpy(), rounded(z + reduced, dtype), what + " residual after two replays")
