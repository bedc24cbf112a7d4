"""Proof that an LD_PRELOADed Purlin, not the real NCCL, serves torch.

Checked in each rank before any collective:
- the library is in LD_PRELOAD and mapped (/proc/self/maps);
- every NCCL name torch imports resolves, in the global scope, into Purlin;
- dlsym in libtorch_cuda.so's own scope (its DT_NEEDED libnccl.so.2) gives
  Purlin's ncclAllReduce: the loader satisfied torch's NEEDED with Purlin;
- ncclGetVersion through CDLL(None) is Purlin's (and purlinGetVersion exists).
A real libnccl.so.2 that torch maps by itself (its __init__ preloads CUDA
wheels with ctypes, RTLD_LOCAL) is reported; nothing may bind to it.
After the run, init_report() reads Purlin's INFO lines from the rank's stderr.
"""

from __future__ import annotations

import os
import re
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pynccl"))
from proof import atom_of, init_lines, prove_preloaded  # noqa: E402

# The NCCL names libtorch_cuda.so of torch 2.11+cu130 imports (reference nccl-symbols.md).
TORCH_IMPORTS = """ncclAllGather ncclAllReduce ncclAlltoAll ncclBcast ncclBroadcast ncclCommAbort
ncclCommCount ncclCommDeregister ncclCommDestroy ncclCommFinalize ncclCommGetAsyncError ncclCommInitAll
ncclCommInitRank ncclCommInitRankConfig ncclCommInitRankScalable ncclCommRegister ncclCommShrink
ncclCommSplit ncclCommUserRank ncclCommWindowDeregister ncclCommWindowRegister ncclDevCommCreate
ncclDevCommDestroy ncclGetErrorString ncclGetLastError ncclGetUniqueId ncclGetVersion ncclGroupEnd
ncclGroupSimulateEnd ncclGroupStart ncclMemAlloc ncclMemFree ncclRecv ncclRedOpCreatePreMulSum
ncclRedOpDestroy ncclReduce ncclReduceScatter ncclSend""".split()


def purlin_library() -> str:
    """Purlin's file: PURLIN_DROPIN_LIBRARY, else the LD_PRELOAD entry with nccl or purlin in its name."""
    named = os.environ.get("PURLIN_DROPIN_LIBRARY")
    if named:
        return os.path.realpath(named)
    for entry in os.environ.get("LD_PRELOAD", "").replace(":", " ").split():
        if "nccl" in os.path.basename(entry) or "purlin" in os.path.basename(entry):
            return os.path.realpath(entry)
    raise AssertionError("no Purlin library in LD_PRELOAD (set it to build/nccl-so/libnccl.so.2)")


def prove_preload() -> dict:
    torch_cuda = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cuda.so")
    return prove_preloaded(purlin_library(), TORCH_IMPORTS, torch_cuda)


def init_report(log: str, rank: int, world: int, expect_atom: str, need_solo: bool) -> str:
    """Checks Purlin logged this rank's communicators; the real NCCL logged nothing."""
    lines = init_lines(log, rank, world)
    if not lines:
        raise AssertionError(f"no Purlin INFO line for rank {rank} of {world} from pid {os.getpid()} "
                             f"(PURLIN_DEBUG=INFO unset, or Purlin did not serve the communicator)")
    atoms = sorted({atom_of(line) for line in lines})
    if expect_atom and atoms != [expect_atom]:
        raise AssertionError(f"communicators used the {atoms} Atom(s), expected {expect_atom}: {lines}")
    solo = init_lines(log, 0, 1) if need_solo else []
    if need_solo and not solo:
        raise AssertionError("no Purlin INFO line for the one-rank group (rank 0 of 1)")
    # NCCL_DEBUG=INFO is set: the real NCCL would have logged its init as `host:pid:tid [dev] NCCL INFO ...`.
    real = [line for line in log.splitlines() if re.search(r"\[\d+\] NCCL INFO", line)]
    if real:
        raise AssertionError(f"the real NCCL ran in this process: {real[0]}")
    return f"{len(lines) + len(solo)} Purlin communicators logged ({', '.join(atoms)} Atom)"
