#!/usr/bin/env python3
"""tools/costmodel.py: an alpha-beta model of collectives across nodes.

Predicts the time of an AllReduce of S bytes over K nodes of L GPUs each
for Purlin's hierarchical Program (node-local ReduceScatter over NVLink,
an all-reduce of each 1/L piece on its rail through the network, node-local
AllGather) and for NCCL's flat ring and tree, from a few link parameters;
with --coll allgather (or reducescatter, the same phases the other way),
an AllGather of S bytes of output: the rail's AllGather of each rank's
block, then the node's AllGatherColumns, against NCCL's ring. It is a
model, not a measurement: docs/multinode.md says where each parameter comes
from and what the tables mean.

  python3 tools/costmodel.py                 # the tables of docs/multinode.md
  python3 tools/costmodel.py --coll allgather
  python3 tools/costmodel.py --nodes 2 --local 8 --bytes 1048576
  python3 tools/costmodel.py --json model.json
  python3 tools/costmodel.py --nodes 2 --local 1 --perf nodes-purlin.txt
      # the model beside a purlin-perf run of allreduce, allgather and
      # reducescatter on those nodes (PURLIN_NODES), measured time last
"""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "gpu"))
from compare import parse  # noqa: E402  (one parser of purlin-perf's output)

# Link parameters (seconds, bytes/second); docs/multinode.md gives their sources.
PARAMS = {
    "alpha_nvl": 2.4e-6,   # one node-local phase of Purlin (a small graph-mode collective, measured)
    "hop_nvl": 0.6e-6,     # one NVLink hop of a ring or chain step (a flag across NVLink, measured)
    "beta_nvl": 345e9,     # NVLink bus bandwidth per GPU (Purlin AllReduce at 1 GiB, measured)
    "alpha_net": 5.0e-6,   # one step across the network (InfiniBand NDR with a proxy; assumed)
    "beta_net": 45e9,      # one NIC per GPU: 400 Gb/s NDR = 50 GB/s, at 90 % efficiency (assumed)
}


def gather_ring(n, s, alpha, beta):
    """A ring AllGather of s bytes of output over n ranks (or a ring
    ReduceScatter of s bytes of input): n-1 steps of s/n bytes."""
    return ((n - 1) * alpha, (n - 1) / n * s / beta) if n > 1 else (0.0, 0.0)


def ring(n, s, alpha, beta):
    """A ring AllReduce of s bytes over n ranks, a ReduceScatter ring then an
    AllGather ring (gather_ring): 2(n-1) steps of s/n bytes, (latency,
    bandwidth time) in seconds."""
    lat, bw = gather_ring(n, s, alpha, beta)
    return 2 * lat, 2 * bw


def tree(n, s, alpha, beta):
    """A pipelined binary tree AllReduce (reduce up, broadcast down)."""
    return (2 * math.ceil(math.log2(n)) * alpha, 2 * s / beta) if n > 1 else (0.0, 0.0)


def ring_latency(k, l, steps, p):
    """The latency of a ring of k nodes of l ranks (node after node) that
    runs `steps` hops: of its n = k*l hops, k cross the network and the
    rest NVLink, as NCCL's tuning counts a ring's inter- and intra-node
    steps."""
    n = k * l
    if n == 1:
        return 0.0
    return steps / n * (k * p["alpha_net"] + (n - k) * p["hop_nvl"]) if k > 1 else steps * p["hop_nvl"]


def nccl_gather_ring(k, l, s, p):
    # n-1 steps of s/n bytes; L rings share the L NICs and the NVLink
    # bandwidth of each GPU.
    n = k * l
    return ring_latency(k, l, n - 1, p) + (n - 1) / n * s / min(p["beta_nvl"], l * p["beta_net"])


def nccl_ring(k, l, s, p):
    # A ReduceScatter ring then an AllGather ring (nccl_gather_ring).
    return 2 * nccl_gather_ring(k, l, s, p)


def nccl_tree(k, l, s, p):
    # A tree between nodes (one rank of each), a chain of L inside each.
    if k == 1:
        return sum(ring(l, s, p["hop_nvl"], p["beta_nvl"]))
    lat = 2 * (math.ceil(math.log2(k)) * p["alpha_net"] + (l - 1) * p["hop_nvl"])
    return lat + 2 * s / min(p["beta_nvl"], l * p["beta_net"])


def purlin(k, l, s, p, pipelined):
    """Node ReduceScatter, the rail's all-reduce of each 1/L piece (ring or
    tree, whichever is faster), node AllGather. Pipelined: chunks flow
    through the phases at once, so latencies add and the slowest phase's
    bytes bound the rest."""
    node_lat, node_bw = (p["alpha_nvl"], (l - 1) / l * s / p["beta_nvl"]) if l > 1 else (0.0, 0.0)
    net_lat, net_bw = min(ring(k, s / l, p["alpha_net"], p["beta_net"]), tree(k, s / l, p["alpha_net"], p["beta_net"]), key=sum)
    if pipelined:
        return 2 * node_lat + net_lat + max(2 * node_bw, net_bw)
    return 2 * (node_lat + node_bw) + net_lat + net_bw


def pat(n, s, alpha, beta):
    """NCCL's PAT AllGather (or ReduceScatter) over n ranks of one GPU a
    node, as a rail is: log2(n) network steps, the ring's bytes."""
    return (math.ceil(math.log2(n)) * alpha, (n - 1) / n * s / beta) if n > 1 else (0.0, 0.0)


def purlin_gather(k, l, s, p, pipelined):
    """The rail's AllGather of each rank's block (its output s/L bytes; ring
    or PAT, whichever is faster), then the node's AllGatherColumns of its
    ranks' copies (output s)."""
    node_lat, node_bw = (p["alpha_nvl"], (l - 1) / l * s / p["beta_nvl"]) if l > 1 else (0.0, 0.0)
    net_lat, net_bw = min(gather_ring(k, s / l, p["alpha_net"], p["beta_net"]), pat(k, s / l, p["alpha_net"], p["beta_net"]), key=sum)
    if pipelined:
        return node_lat + net_lat + max(node_bw, net_bw)
    return node_lat + node_bw + net_lat + net_bw


# Per collective: NCCL's ring, NCCL's tree (None: it has none) and Purlin's
# Program, each a function of (nodes, GPUs a node, bytes, params[, pipelined]).
MODELS = {
    "allreduce": (nccl_ring, nccl_tree, purlin),
    "allgather": (nccl_gather_ring, None, purlin_gather),
    "reducescatter": (nccl_gather_ring, None, purlin_gather),
}


def table(nodes, local, sizes, p, coll="allreduce"):
    ring_of, tree_of, purlin_of = MODELS[coll]
    rows = []
    for k in nodes:
        for s in sizes:
            r = ring_of(k, local, s, p)
            t = tree_of(k, local, s, p) if tree_of else None
            best = min(r, t) if t is not None else r
            seq = purlin_of(k, local, s, p, False)
            pipe = purlin_of(k, local, s, p, True)
            rows.append({"coll": coll, "nodes": k, "local": local, "bytes": s, "nccl_ring_us": r * 1e6,
                         "nccl_tree_us": t * 1e6 if t is not None else None,
                         "purlin_seq_us": seq * 1e6, "purlin_pipelined_us": pipe * 1e6,
                         "best_nccl_over_purlin_seq": best / seq, "best_nccl_over_purlin_pipelined": best / pipe})
    return rows


def us(v):
    return "-" if v is None else f"{v:.1f}"


def size_name(s):
    for unit, b in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if s >= b:
            return f"{s // b} {unit}"
    return f"{s} B"


def markdown(rows):
    out = ["| nodes x GPUs | size | NCCL ring us | NCCL tree us | Purlin us (phases in turn) | Purlin us (pipelined) | best NCCL / Purlin |",
           "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['nodes']} x {r['local']} | {size_name(r['bytes'])} | {r['nccl_ring_us']:.1f} | {us(r['nccl_tree_us'])} | "
                   f"{r['purlin_seq_us']:.1f} | {r['purlin_pipelined_us']:.1f} | "
                   f"{r['best_nccl_over_purlin_seq']:.2f} / {r['best_nccl_over_purlin_pipelined']:.2f} |")
    return "\n".join(out)


def beside(path, k, l, p):
    """The model beside purlin-perf's rows in path of the collectives it
    models (one row per collective, size, mode and type): measured us last."""
    rows, _, _ = parse(path)
    out = ["| collective | mode | type | size | NCCL ring us | NCCL tree us | Purlin model us (in turn / pipelined) | measured us |",
           "|---|---|---|---:|---:|---:|---:|---:|"]
    for key, (t, _, _) in sorted(rows.items(), key=lambda kv: (kv[0].coll, kv[0].mode, kv[0].dtype, kv[0].size)):
        mode, coll, dtype, size = key.mode, key.coll, key.dtype, key.size
        if coll not in MODELS or key.blocks:
            continue
        ring_of, tree_of, purlin_of = MODELS[coll]
        tree_us = tree_of(k, l, size, p) * 1e6 if tree_of else None
        out.append(f"| {coll} | {mode} | {dtype} | {size_name(size)} | {ring_of(k, l, size, p) * 1e6:.1f} | {us(tree_us)} | "
                   f"{purlin_of(k, l, size, p, False) * 1e6:.1f} / {purlin_of(k, l, size, p, True) * 1e6:.1f} | {t:.1f} |")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--coll", choices=sorted(MODELS), default="allreduce")
    ap.add_argument("--nodes", type=int, nargs="*", default=[2, 4, 8, 16, 32, 64])
    ap.add_argument("--local", type=int, default=8, help="GPUs per node")
    ap.add_argument("--bytes", type=int, nargs="*", default=[8, 64 << 10, 1 << 20, 16 << 20, 256 << 20, 1 << 30])
    ap.add_argument("--json", help="also write the rows here")
    ap.add_argument("--perf", help="a purlin-perf output on --nodes[0] x --local: print the model beside its rows")
    for name, v in PARAMS.items():
        ap.add_argument("--" + name.replace("_", "-"), type=float, default=v)
    a = ap.parse_args(argv)
    p = {name: getattr(a, name) for name in PARAMS}
    if a.perf:
        print(beside(a.perf, a.nodes[0], a.local, p))
        return 0
    rows = table(a.nodes, a.local, a.bytes, p, a.coll)
    print(markdown(rows))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"params": p, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
