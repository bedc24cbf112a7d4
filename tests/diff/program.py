"""Random programs of NCCL calls, every rank's inputs, and what each rank must get.

A program is a list of steps; a step is one call or a group of calls
(ncclGroupStart ... ncclGroupEnd), each made by every rank. Calls pick a
collective, an element type, a count (zero and odd ones included), a
reduction (PreMulSum with a scalar per rank, read at once from host memory
or from device memory while the call runs), a root, in place or not, one of
four communicators and one of two streams. A program runs eagerly or
captured in a CUDA graph and replayed twice (with new inputs and new
device-resident scalars before each replay). A call NCCL rejects (avg or
PreMulSum on a float8 type on a one-rank communicator: "alone", or every
communicator when there is one rank) is a step of its own, made outside
any group: every rank's call must return ncclInvalidArgument and write
nothing, and the calls after it must run as usual.

generate(seed, index, ...) gives the same program for the same arguments on
any machine, and every rank's input is a function of (seed, index, call,
rank, replay), so each process computes the expected result of its own
ranks by itself. Expected results come from the inputs in float64 (integers
in their own type, wrapping as NCCL's arithmetic does). They are exact, and
compared bit for bit, where no summation order can change them: copies,
integers, min/max, and sums and products of at most two ranks (one rounding,
whichever the order; NCCL and Purlin both round a two-term result once).
Other float results must lie within tolerance() of the float64 value.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass, field
from typing import Dict, FrozenSet, List, Optional, Tuple

import numpy as np

import codec
from codec import DType

REDOPS = ["sum", "prod", "max", "min", "avg", "premulsum"]
# ncclRedOp_t of the built-in ops (a PreMulSum op comes from ncclRedOpCreatePreMulSum).
REDOP_CODES = {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}
# ncclResult_t of a call NCCL rejects (Op.rejected).
INVALID_ARGUMENT = 4
# ncclScalarResidence_t.
RESIDENCE_CODES = {"device": 0, "host": 1}
# Scalars exact in every type (float8 e5m2 has two mantissa bits).
FLOAT_SCALARS = [0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0, -0.5, -1.5]
INT_SCALARS = [-3, -2, -1, 0, 1, 2, 3, 5]


@dataclass(frozen=True)
class Kind:
    name: str
    reduces: bool
    rooted: bool
    inplace: bool  # NCCL defines an in-place form (and both libraries give it)
    in_slices: bool  # the input is comm-size slices of count (else count)
    out_slices: bool  # the output is comm-size slices of count
    weight: int  # how often the generator picks it


# In-place AlltoAll is left out: NCCL 2.28 gives wrong results for it, so it is no reference.
KINDS = {k.name: k for k in [
    Kind("allreduce", True, False, True, False, False, 4),
    Kind("reduce", True, True, True, False, False, 2),
    Kind("reducescatter", True, False, True, True, False, 2),
    Kind("allgather", False, False, True, False, True, 3),
    Kind("broadcast", False, True, True, False, False, 2),
    Kind("alltoall", False, False, False, True, True, 2),
    Kind("gather", False, True, True, False, True, 1),
    Kind("scatter", False, True, True, True, False, 1),
    Kind("sendrecv", False, False, False, False, False, 2),  # root is the shift: send to k+shift
]}

# The communicators every rank holds: "world" and "second" from two ncclCommInitRank,
# "reversed" = ncclCommSplit(world, color 0, key n-1-rank) (rank order reversed),
# "alone" = ncclCommSplit(second, color rank) (one rank each).
COMMS = ["world", "second", "reversed", "alone"]
STREAMS = 2
GUARD = 64  # poisoned bytes around every buffer
GUARD_BYTE = 0x5A
ALIGN = 256


def members(comm: int, rank: int, nranks: int) -> List[int]:
    """The global ranks of rank's communicator comm, in communicator-rank order."""
    if COMMS[comm] == "reversed":
        return list(range(nranks - 1, -1, -1))
    if COMMS[comm] == "alone":
        return [rank]
    return list(range(nranks))


@dataclass
class Op:
    kind: str
    dtype: str
    count: int
    redop: Optional[str] = None
    residence: Optional[str] = None  # PreMulSum: "host" (immediate) or "device"
    scalars: Tuple[Tuple[float, ...], ...] = ()  # PreMulSum: [replay][global rank]
    root: int = 0  # communicator rank; for sendrecv the shift
    inplace: bool = False
    comm: int = 0
    comm_size: int = 0  # ranks of the communicator
    stream: int = 0
    bcast: bool = False  # in-place broadcast through ncclBcast
    pad: int = 0  # elements added to the 256-byte alignment of each buffer

    @property
    def dt(self) -> DType:
        return codec.BY_NAME[self.dtype]

    @property
    def k(self) -> Kind:
        return KINDS[self.kind]

    @property
    def rejected(self) -> bool:
        """Whether NCCL returns ncclInvalidArgument for the call: avg or PreMulSum on a
        float8 type on a one-rank communicator (NCCL's one-rank path has no float8
        PreMulSum, and avg is PreMulSum by 1/nranks there; on more ranks both reduce).
        An empty collective is discarded before NCCL looks at its op, so it runs."""
        return (self.redop in ("avg", "premulsum") and self.dtype.startswith("float8")
                and self.comm_size == 1 and self.count > 0)

    @property
    def nccl_tail_defect(self) -> bool:
        """Whether NCCL 2.28.9 leaves the last elements of the output unwritten: a
        one-rank communicator runs PreMulSum (and avg on a floating type, which is
        PreMulSum by 1/nranks there) in a kernel that splits the count among its blocks
        rounding down, so up to a few dozen elements at the end stay as they were (seen
        on the GPUs: 13 of 345997 int64, 7 of 334087 float16). Purlin is compared with
        the reference alone on these calls."""
        scaled = self.redop == "premulsum" or (self.redop == "avg" and self.dt.is_float)
        return scaled and self.k.reduces and self.comm_size == 1 and self.count > 0 and not self.rejected

    def describe(self) -> str:
        parts = [self.kind, self.dtype, f"count={self.count}"]
        if self.redop == "premulsum":
            per = " ".join("/".join(f"{s[g]:g}" for s in self.scalars) for g in range(len(self.scalars[0])))
            parts.append(f"premulsum({self.residence}; scalars by rank {per})")
        elif self.redop:
            parts.append(self.redop)
        if self.rejected:
            parts[-1] += " (rejected)"
        if self.kind == "sendrecv":
            parts.append(f"shift={self.root}")
        elif self.k.rooted:
            parts.append(f"root={self.root}")
        parts.append(("in-place" + (" (ncclBcast)" if self.bcast else "")) if self.inplace else "out-of-place")
        parts += [f"comm={COMMS[self.comm]}", f"stream={self.stream}"]
        if self.pad:
            parts.append(f"pad={self.pad}")
        return " ".join(parts)


@dataclass
class Program:
    seed: int
    index: int
    nranks: int
    steps: List[List[Op]]
    graph: bool
    early_destroy: bool  # PreMulSum ops destroyed right after their step (eager only)
    cut: str = ""  # keep_calls: which of the generated program's calls it kept
    ops: List[Op] = field(init=False)

    def __post_init__(self) -> None:
        self.ops = [op for step in self.steps for op in step]

    @property
    def replays(self) -> int:
        return 2 if self.graph else 1

    def describe(self) -> str:
        head = (f"program {self.index} of seed {self.seed}: {self.nranks} ranks, "
                f"{'CUDA graph, 2 replays' if self.graph else 'eager'}"
                f"{', PreMulSum ops destroyed after their step' if self.early_destroy else ''}"
                f"{', ' + self.cut if self.cut else ''}")
        lines, j = [head], 0
        for s, step in enumerate(self.steps):
            for op in step:
                grouped = f"step {s} (group of {len(step)})" if len(step) > 1 else f"step {s}"
                lines.append(f"  call {j}: {grouped}: {op.describe()}")
                j += 1
        return "\n".join(lines)


# ---------------------------------------------------------------- generation

def _count(rng: random.Random, max_count: int) -> int:
    r = rng.random()
    if r < 0.08:
        return 0
    if r < 0.45:
        n = rng.randint(1, 64)
    elif r < 0.8:
        n = rng.randint(65, 4096)
    elif r < 0.95:
        n = rng.randint(4097, 65536)
    else:  # up to max_count where it is larger (the same draws as before where it is not)
        n = rng.randint(65537, max(1 << 19, max_count))
    n = min(n, max_count)
    return n | 1 if rng.random() < 0.5 else n


def op_bytes(op: Op, nranks: int) -> int:
    """An upper bound of the arena bytes op takes on any rank."""
    slices = nranks if (op.k.in_slices or op.k.out_slices) else 1
    return 2 * (slices * op.count + op.pad) * op.dt.size + 2 * (ALIGN + GUARD) + 16


def _op(rng: random.Random, nranks: int, max_count: int, replays: int) -> Op:
    kinds = list(KINDS.values())
    kind = rng.choices(kinds, weights=[k.weight for k in kinds])[0]
    dt = rng.choice(codec.DTYPES)
    comm = rng.choices(range(len(COMMS)), weights=[5, 2, 2, 1])[0]
    size = 1 if COMMS[comm] == "alone" else nranks
    op = Op(kind.name, dt.name, _count(rng, max_count), comm=comm, comm_size=size, stream=rng.randrange(STREAMS))
    if kind.reduces:
        op.redop = rng.choices(REDOPS, weights=[3, 2, 2, 2, 2, 3])[0]
        if op.redop == "premulsum":
            op.residence = rng.choice(["host", "device"])
            pool = FLOAT_SCALARS if dt.is_float else [s for s in INT_SCALARS if s >= 0 or dt.kind == "int"]
            first = tuple(rng.choice(pool) for _ in range(nranks))
            if op.residence == "device":  # read when the call runs: new values for every replay
                op.scalars = (first,) + tuple(tuple(rng.choice(pool) for _ in range(nranks))
                                              for _ in range(replays - 1))
            else:
                op.scalars = (first,) * replays
    if kind.rooted:
        op.root = rng.randrange(size)
    if kind.name == "sendrecv":
        op.root = rng.randrange(size)  # 0: a rank sends to itself
    if kind.inplace and rng.random() < 0.4:
        op.inplace = True
        op.bcast = kind.name == "broadcast" and rng.random() < 0.5
    if rng.random() < 0.3:
        op.pad = rng.randint(1, 3)
    return op


# Features a run can leave out (--without), each overriding the random choice after
# it is drawn, so the rest of a program stays what the seed gives.
FEATURES = {
    "comm-on-two-streams": "each communicator keeps to one stream (world and reversed on 0, the others on 1)",
    "rank-scalars": "every rank's PreMulSum scalar is rank 0's",
    "graphs": "every program runs eagerly",
}
# Left out unless --without (or DIFFTEST_WITHOUT) says otherwise ("none": nothing): what
# fails on Purlin today, each with what was seen. Remove an entry when its fix lands.
KNOWN_FAILING: Dict[str, str] = {}


def _without(op: Op, without: frozenset) -> None:
    if "comm-on-two-streams" in without:
        op.stream = 0 if COMMS[op.comm] in ("world", "reversed") else 1
    if "rank-scalars" in without and op.scalars:
        op.scalars = tuple((s[0],) * len(s) for s in op.scalars)


def _rejected_alone(step: List[Op]) -> List[List[Op]]:
    """step cut so that every rejected call is a step of its own, in call order."""
    steps: List[List[Op]] = [[]]
    for op in step:
        if op.rejected:
            steps += [[op], []]
        else:
            steps[-1].append(op)
    return [s for s in steps if s]


def generate(seed: int, index: int, nranks: int, max_count: int = 1 << 19,
             max_bytes: int = 48 << 20, max_calls: int = 8, without: frozenset = frozenset()) -> Program:
    """Program index of seed; max_bytes bounds one rank's buffers (counts shrink to fit);
    without names FEATURES left out."""
    rng = random.Random(f"purlin-difftest/{seed}/{index}/{nranks}")
    graph = rng.random() < 0.3
    replays = 2 if graph else 1
    steps: List[List[Op]] = []
    calls, used = rng.randint(1, max_calls), 0
    while calls > 0:
        size = 1 if rng.random() < 0.55 else rng.randint(2, 4)
        step = []
        for _ in range(min(size, calls)):
            op = _op(rng, nranks, max_count, replays)
            _without(op, without)
            while used + op_bytes(op, nranks) > max_bytes and op.count > 0:
                op.count //= 4
            used += op_bytes(op, nranks)
            step.append(op)
        calls -= len(step)
        steps += _rejected_alone(step)
    early = not graph and rng.random() < 0.3
    if "graphs" in without:
        graph = False
        for op in (op for step in steps for op in step):
            op.scalars = op.scalars[:1]
    return Program(seed, index, nranks, steps, graph, early_destroy=early)


def keep_calls(p: Program, calls: FrozenSet[int]) -> Program:
    """p cut down to the calls numbered in calls (as p.describe() numbers them), each in its
    step, the others and the steps left empty dropped; the cut program numbers its calls anew.
    How a failing program is narrowed to the calls that make it fail."""
    unknown = sorted(calls - set(range(len(p.ops))))
    if unknown:
        raise ValueError(f"program {p.index} has calls 0-{len(p.ops) - 1}, not {unknown}")
    steps, j = [], 0
    for step in p.steps:
        kept = [op for k, op in enumerate(step, j) if k in calls]
        j += len(step)
        if kept:
            steps.append(kept)
    cut = f"only its calls {','.join(map(str, sorted(calls)))} of {len(p.ops)}"
    return Program(p.seed, p.index, p.nranks, steps, p.graph, p.early_destroy, cut)


# ---------------------------------------------------------------- inputs and expectations

def in_len(op: Op, size: int) -> int:
    return op.count * (size if op.k.in_slices else 1)


def out_len(op: Op, size: int) -> int:
    return op.count * (size if op.k.out_slices else 1)


def scalar(op: Op, rank: int, replay: int) -> float:
    """Rank's PreMulSum scalar of op in replay (0 for other ops: unused)."""
    return op.scalars[replay][rank] if op.scalars else 0.0


class Inputs:
    """Every rank's inputs of one program (raw codes), computed once each."""

    def __init__(self, program: Program):
        self.p = program
        self.cache: Dict[Tuple[int, int, int], np.ndarray] = {}

    def get(self, j: int, rank: int, replay: int) -> np.ndarray:
        key = (j, rank, replay)
        if key not in self.cache:
            self.cache[key] = self._make(j, rank, replay)
        return self.cache[key]

    def _make(self, j: int, rank: int, replay: int) -> np.ndarray:
        op = self.p.ops[j]
        dt = op.dt
        size = len(members(op.comm, rank, self.p.nranks))
        n = in_len(op, size)
        rng = np.random.default_rng([self.p.seed, self.p.index, j, rank, replay])
        if not op.k.reduces or not dt.is_float:
            return np.frombuffer(rng.bytes(n * dt.size), dtype=dt.raw).copy()  # any bits: copies, integers
        low, high = (-1.0, 1.0) if op.redop == "prod" else (-3.0, 2.0)
        magnitude = np.exp2(rng.uniform(low, high, n))
        sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
        return codec.encode(sign * magnitude, dt)


@dataclass
class Expect:
    """What one rank's output must hold: codes (exact), or float64 values within tol."""

    exact: bool
    codes: Optional[np.ndarray] = None
    value: Optional[np.ndarray] = None
    tol: Optional[np.ndarray] = None


def tolerance(dt: DType, m: int, scale: np.ndarray) -> np.ndarray:
    """How far a float result of m terms may lie from float64: (m+2) half-units of the
    type's precision (dt.eps / 2, the largest relative error of one rounding) times scale
    (the sum of the terms' magnitudes, or the product's magnitude), plus (m+1) of its
    smallest subnormal. Rounding after every step in the type (NCCL's fp16, bf16 and fp8
    arithmetic: m-1 sums or products, a PreMulSum's products, an average's scaling)
    stays within (m+1) half-units; one final rounding of an fp32 accumulator (Purlin's)
    within one and a bit."""
    return (m + 2) * (dt.eps / 2) * scale + (m + 1) * dt.tiny


def reduce(op: Op, parts: List[np.ndarray], scalars: List[float]) -> Expect:
    """The reduction of the member inputs parts (raw codes, communicator order)."""
    dt, m, redop = op.dt, len(parts), op.redop
    if not dt.is_float:
        xs = [codec.as_ints(x, dt) for x in parts]
        with np.errstate(over="ignore"):
            if redop == "premulsum":
                xs = [x * np.array([int(s)], dtype=np.int64).astype(dt.numeric)[0] for x, s in zip(xs, scalars)]
            acc = xs[0].copy()
            for x in xs[1:]:
                if redop in ("sum", "avg", "premulsum"):
                    acc += x
                elif redop == "prod":
                    acc *= x
                elif redop == "max":
                    acc = np.maximum(acc, x)
                else:
                    acc = np.minimum(acc, x)
            if redop == "avg":  # NCCL: the wrapped sum, divided truncating toward zero
                neg = acc < 0 if dt.kind == "int" else np.zeros(acc.shape, bool)
                magnitude = np.where(neg, -acc, acc).view(dt.raw) // np.array(m, dtype=dt.raw)
                q = magnitude.view(dt.numeric)
                acc = np.where(neg, -q, q).astype(dt.numeric)
        return Expect(True, codes=acc.view(dt.raw))
    vs = [codec.decode(x, dt) for x in parts]
    if redop in ("max", "min"):
        pick = np.maximum if redop == "max" else np.minimum
        return Expect(True, codes=codec.encode(functools.reduce(pick, vs), dt))
    if redop == "prod":
        value = functools.reduce(np.multiply, vs)
        scale = np.abs(value)
    else:
        terms = vs
        if redop == "premulsum":
            terms = [v * codec.scalar_value(codec.scalar_code(s, dt), dt) for v, s in zip(vs, scalars)]
        value = functools.reduce(np.add, terms)
        scale = functools.reduce(np.add, [np.abs(t) for t in terms])
        if redop == "avg":
            value, scale = value / m, scale / m
    if m == 1 or (m == 2 and redop in ("sum", "prod")):
        return Expect(True, codes=codec.encode(value, dt))
    return Expect(False, value=value, tol=tolerance(dt, m, scale))


def expect(program: Program, inputs: Inputs, j: int, rank: int, replay: int) -> Optional[Expect]:
    """What rank's output of call j must hold after replay, or None where NCCL leaves it undefined."""
    op = program.ops[j]
    group = members(op.comm, rank, program.nranks)
    m, k, c = len(group), group.index(rank), op.count
    parts = [inputs.get(j, g, replay) for g in group]
    name = op.kind
    if op.rejected or (op.k.rooted and k != op.root and name in ("reduce", "gather")):
        return None
    if name in ("allreduce", "reduce"):
        return reduce(op, parts, [scalar(op, g, replay) for g in group])
    if name == "reducescatter":
        return reduce(op, [x[k * c:(k + 1) * c] for x in parts], [scalar(op, g, replay) for g in group])
    if name in ("allgather", "gather"):
        return Expect(True, codes=np.concatenate(parts))
    if name == "broadcast":
        return Expect(True, codes=parts[op.root])
    if name == "alltoall":
        return Expect(True, codes=np.concatenate([x[k * c:(k + 1) * c] for x in parts]))
    if name == "scatter":
        return Expect(True, codes=parts[op.root][k * c:(k + 1) * c])
    if name == "sendrecv":
        return Expect(True, codes=parts[(k - op.root) % m])
    raise ValueError(name)


# ---------------------------------------------------------------- buffers

@dataclass
class Buffers:
    """One call's buffers on one rank, as byte offsets into the rank's arena."""

    send: int
    recv: int
    inputs: Tuple[int, int]  # where the input is staged: offset, bytes
    output: Optional[Tuple[int, int]]  # where the result must be, or None (undefined there)
    free: List[Tuple[int, int]]  # bytes the call may change (beyond output)
    scalar: Optional[int] = None  # a device-resident PreMulSum scalar


@dataclass
class Layout:
    """Every call's buffers on one rank, and the arena image staged before each run."""

    calls: List[Buffers]
    size: int  # arena bytes used
    _spans: Optional[List[Tuple[int, int]]] = None

    def image(self, program: Program, inputs: Inputs, rank: int, replay: int) -> np.ndarray:
        img = np.full(self.size, GUARD_BYTE, dtype=np.uint8)
        for j, (op, b) in enumerate(zip(program.ops, self.calls)):
            poison = codec.poison_byte(op.dt)
            for off, n in ([b.output] if b.output else []) + b.free:
                img[off:off + n] = poison
            off, n = b.inputs
            img[off:off + n] = inputs.get(j, rank, replay).view(np.uint8)[:n]
            if b.scalar is not None:
                code = codec.scalar_code(scalar(op, rank, replay), op.dt)
                img[b.scalar:b.scalar + op.dt.size] = np.array([code], dtype=op.dt.raw).view(np.uint8)
        return img

    def unchanged_spans(self) -> List[Tuple[int, int]]:
        """The [start, end) spans where a run must leave the staged bytes alone: guards,
        inputs of out-of-place calls, scalars (all but outputs and bytes a call may change)."""
        if self._spans is None:
            writable = sorted((off, off + n) for b in self.calls
                              for off, n in ([b.output] if b.output else []) + b.free if n > 0)
            spans, at = [], 0
            for lo, hi in writable:
                if lo > at:
                    spans.append((at, lo))
                at = max(at, hi)
            if at < self.size:
                spans.append((at, self.size))
            self._spans = spans
        return self._spans


def _align(x: int) -> int:
    return (x + ALIGN - 1) // ALIGN * ALIGN


def layout(program: Program, rank: int) -> Layout:
    calls, pos = [], GUARD
    for op in program.ops:
        group = members(op.comm, rank, program.nranks)
        m, k, c, sz = len(group), group.index(rank), op.count, op.dt.size
        n_in, n_out = in_len(op, m) * sz, out_len(op, m) * sz
        defined = not (op.k.rooted and k != op.root and op.kind in ("reduce", "gather"))
        if op.inplace:
            base = _align(pos) + op.pad * sz
            total = max(n_in, n_out)
            send = recv = base
            if op.kind in ("allgather", "gather"):
                send = base + k * c * sz
            elif op.kind in ("reducescatter", "scatter"):
                recv = base + k * c * sz
            output = (recv, n_out) if defined else None
            # The rest of the buffer: NCCL does not say it is left alone.
            free = [(base, total)] if output is None else \
                [r for r in ((base, recv - base), (recv + n_out, base + total - recv - n_out)) if r[1] > 0]
            staged = 0 if op.kind == "broadcast" and k != op.root else n_in  # a receiving rank's buffer starts poisoned
            b = Buffers(send, recv, (send, staged), output, free)
            pos = base + total + GUARD
        else:
            send = _align(pos) + op.pad * sz
            recv = _align(send + n_in + GUARD) + op.pad * sz
            b = Buffers(send, recv, (send, n_in), (recv, n_out) if defined else None,
                        [] if defined else [(recv, n_out)])
            pos = recv + n_out + GUARD
        if op.rejected:  # the call must write nothing
            b.output, b.free = None, []
        if op.redop == "premulsum" and op.residence == "device":
            b.scalar = _align(pos)
            pos = b.scalar + 8 + GUARD
        calls.append(b)
    return Layout(calls, _align(pos))
