"""Evidence that Purlin, not some other NCCL, served a rank's calls.

- where(): the file a function address belongs to (dladdr), so a bound
  ncclAllReduce can be traced to the library that defines it;
- StderrLog: fd 2 of a rank redirected into a file (Purlin's Go logger writes
  to fd 2, below Python), so the rank can read back the line Purlin logs at
  PURLIN_DEBUG=INFO when it creates a communicator;
- init_lines(): those lines for this process, rank and size;
- prove_preloaded(): a preloaded Purlin serves every NCCL name a client binds,
  and the client's own NEEDED libnccl.so.2.
"""

from __future__ import annotations

import ctypes
import os
import re
import sys
from typing import List


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


_libc = ctypes.CDLL(None)
_libc.dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
_libc.dladdr.restype = ctypes.c_int
_libc.dlsym.restype, _libc.dlsym.argtypes = ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_char_p]
RTLD_DEFAULT = None


def where(address: int) -> str:
    """The real path of the object that holds address, or '' if none."""
    info = _DlInfo()
    if not address or _libc.dladdr(address, ctypes.byref(info)) == 0 or not info.dli_fname:
        return ""
    return os.path.realpath(info.dli_fname.decode())


def mapped_files(pattern: str) -> List[str]:
    """Distinct files in /proc/self/maps whose name matches pattern."""
    found = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            parts = line.split(maxsplit=5)
            if len(parts) == 6 and re.search(pattern, os.path.basename(parts[5].strip())):
                found.add(os.path.realpath(parts[5].strip()))
    return sorted(found)


class StderrLog:
    """Redirects fd 2 into path until close(), which echoes what was written."""

    def __init__(self, path: str, label: str):
        self.path, self.label = path, label
        sys.stderr.flush()
        self.saved = os.dup(2)
        self.file = open(path, "w+b")
        os.dup2(self.file.fileno(), 2)

    def text(self) -> str:
        sys.stderr.flush()
        with open(self.path, "rb") as f:
            return f.read().decode(errors="replace")

    def close(self) -> str:
        text = self.text()
        os.dup2(self.saved, 2)
        os.close(self.saved)
        self.file.close()
        for line in text.splitlines():
            print(f"[{self.label}] {line}", file=sys.stderr)
        return text


def init_lines(log: str, rank: int, nranks: int) -> List[str]:
    """Purlin's INFO line(s) for a communicator of this process at (rank, nranks):
    `host:pid purlin INFO Purlin <version> ... rank R of N ... <atom> Atom`."""
    head = f":{os.getpid()} purlin INFO "
    rank_re = re.compile(rf"\brank {rank} of {nranks}\b")
    return [line for line in log.splitlines()
            if head in line and "Purlin" in line and rank_re.search(line)]


def atom_of(line: str) -> str:
    m = re.search(r"(\w+) Atom\b", line)
    return m.group(1).lower() if m else ""


def prove_preloaded(lib: str, names: List[str], client: str) -> dict:
    """Checks that lib (Purlin) is in LD_PRELOAD and mapped, that every NCCL name
    in names resolves into it in the global scope, that dlsym in the scope of the
    client's shared object (whose NEEDED is libnccl.so.2) gives Purlin's
    ncclAllReduce, and that ncclGetVersion is Purlin's. A real libnccl.so.2 that
    is also mapped is reported; nothing may bind to it."""
    lib = os.path.realpath(lib)
    preloaded = [os.path.realpath(e) for e in os.environ.get("LD_PRELOAD", "").replace(":", " ").split()]
    if lib not in preloaded:
        raise AssertionError(f"{lib} is not in LD_PRELOAD={os.environ.get('LD_PRELOAD', '')!r}")
    if lib not in mapped_files(r"nccl|purlin"):
        raise AssertionError(f"{lib} is not mapped in this process")
    wrong = {}
    for name in names:
        owner = where(_libc.dlsym(RTLD_DEFAULT, name.encode()))
        if owner != lib:
            wrong[name] = owner or "unresolved"
    if wrong:
        raise AssertionError(f"NCCL names the client imports that do not resolve into {lib}: {wrong}")
    handle = ctypes.CDLL(client, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)._handle
    needed = where(_libc.dlsym(handle, b"ncclAllReduce"))
    notes = []
    if needed != lib:
        if os.path.basename(lib) == "libnccl.so.2":  # the nccl-so build must satisfy the NEEDED itself
            raise AssertionError(f"{os.path.basename(client)}'s NEEDED libnccl.so.2 is {needed or '?'}, not {lib}")
        notes.append(f"{os.path.basename(lib)} lacks SONAME libnccl.so.2: the client's NEEDED loaded {needed}; "
                     f"every name above still binds to Purlin through the preload")
    code = ctypes.c_int()
    if _libc.ncclGetVersion(ctypes.byref(code)) != 0 or len(str(code.value)) != 5:
        raise AssertionError(f"ncclGetVersion through the global scope gave {code.value}")
    if not _libc.dlsym(RTLD_DEFAULT, b"purlinGetVersion"):
        raise AssertionError("purlinGetVersion is not in the global scope: the preloaded file is not Purlin")
    also = [f for f in mapped_files(r"^libnccl") if f != lib]
    if also:
        notes.append(f"also mapped, nothing bound to it: {', '.join(also)}")
    return {"library": lib, "version": code.value, "notes": notes}
