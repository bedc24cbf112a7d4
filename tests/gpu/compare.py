#!/usr/bin/env python3
"""compare.py: side-by-side tables of purlin-perf outputs, Purlin vs NCCL.

Usage: compare.py PURLIN.txt NCCL.txt [--json OUT.json --commit C --gpus N --nccl-version V]
                  [--rmsnorm RMSNORM.json] [--torch TORCH.json] [--ceilings SMBENCH.txt] [--costs INIT.json]
                  [--earlier DIR ...]
Each file holds several purlin-perf runs, each preceded by a line
'## RUN mode=<eager|graph> ... args: <purlin-perf arguments>' (tests/gpu/run.sh
writes it). Runs with -R 1 (buffers registered as symmetric windows) are kept
apart from the others. For every mode, process layout, registration and
collective it prints: size,
out-of-place time (us) and busbw (GB/s) of each library and the ratio Purlin
time / NCCL time (> 1: Purlin slower), then the #wrong totals and failed runs
per library and mode. Only numbers read from the files are printed.

With --json it also writes one row per (mode, processes, collective, type,
size) measured on both libraries, in the form docs/perf/2xh200.json keeps:
{"date", "commit", "gpus", "nccl_version", "rows": [{"coll", "mode", "procs",
"dtype", "bytes", "purlin_us", "nccl_us", "purlin_busbw", "nccl_busbw",
"purlin_wrong", "nccl_wrong", "blocks", "registered"}], "capped": [...]}. "rows" are the runs
with each library's default blocks ("blocks" null); "capped" the runs whose header names
blocks=N (PURLIN_MAX_CTAS and NCCL_MAX_CTAS set to N; "blocks" N), in the same form, kept apart
so that the default runs alone are judged against the targets.

--rmsnorm and --torch name the outputs of tests/torch/bench_rmsnorm.py and of
tests/torch/bench_allreduce.py --with-library, whose rows join "rows" as colls allreduce_rmsnorm
and torch_allreduce.

--ceilings names tests/gpu/smbench.cu's output (lines "push both 64 361.2": a plain copy kernel's GB/s
per direction by kind, directions and blocks): perf.json keeps them under "ceilings", and every row
of 256 MiB or more gets "of_ceiling", its bus bandwidth over the SM push ceiling at its blocks (64
where it ran with the defaults) with both directions busy, or one for the rooted collectives,
which send one way at two ranks; a table prints them.

--costs names tests/torch/bench_init.py --with-library's output: what creating a communicator and
its first all_reduce take on each library, in time and GPU memory; perf.json keeps its rows under
"costs" and a table prints them.

--earlier DIR (repeatable, oldest first) names the logs of an earlier run of the suite on the
same build (tests/gpu/run.sh with GPU_PARTS: a suite too long for one sitting, run in parts):
its perf-purlin.txt, perf-nccl.txt, rmsnorm.json, torch-allreduce.json, ceilings-sm.txt and torch-init.json come before
the files named, a row measured
again replaces the earlier one, and wrong values and failed runs count from every run. DIR/COMMIT
must name the --commit given, else nothing is written and the exit status is 2.
"""
import argparse
import collections
import datetime
import json
import os
import re
import sys


# A row's key: the run's mode, processes, registration and block cap (0: the default), then the
# collective, type and size.
Key = collections.namedtuple("Key", "mode procs reg blocks coll dtype size")


def parse(*paths):
    """The rows (Key -> (us, busbw, wrong values)), wrong-value totals and runs of purlin-perf
    outputs, files in order: a row a later file measured again replaces the earlier one."""
    rows, wrong, runs = {}, {}, {}
    for path in paths:
        try:
            lines = open(path, errors="replace").read().splitlines()
        except OSError:
            continue
        parse_lines(lines, rows, wrong, runs)
    return rows, wrong, runs


def parse_lines(lines, rows, wrong, runs):
    mode, coll, procs, reg, blocks = "?", "?", 1, False, 0
    for line in lines:
        m = re.match(r"## RUN mode=(\S+)", line)
        if m:
            mode = m.group(1)
            procs, reg, blocks = run_procs(line), run_registered(line), run_blocks(line)
            continue
        m = re.match(r"## EXIT (\S+) status=(\d+)", line)
        if m:
            runs.setdefault(mode, []).append((m.group(1), int(m.group(2))))
            continue
        m = re.match(r"# Collective: (\S+)", line)
        if m:
            coll = m.group(1)
            continue
        if line.startswith("#") or not line.strip():
            continue
        f = line.split()
        if len(f) < 9 or not f[0].isdigit():
            continue
        try:
            size, dtype, t, bus, w = int(f[0]), f[2], float(f[5]), float(f[7]), f[8]
        except ValueError:
            continue
        n = sum(int(x) for x in (w, f[12] if len(f) > 12 else "0") if x.isdigit())
        rows[Key(mode, procs, reg, blocks, coll, dtype, size)] = (t, bus, n)
        wrong[mode] = wrong.get(mode, 0) + n


def run_options(header):
    """The purlin-perf options of a run's header line, option -> value."""
    args = header.split("args:", 1)[1].split() if "args:" in header else []
    return dict(zip(args, args[1:]))


def run_procs(header):
    """The processes of a run: its -g rank count under -m 1, else one."""
    opt = run_options(header)
    return int(opt.get("-g", 1)) if opt.get("-m") == "1" else 1


def run_registered(header):
    """Whether a run's buffers were registered windows (-R 1)."""
    return run_options(header).get("-R") == "1"


def run_blocks(header):
    """The most thread blocks a call of the run could use (its header's blocks=N: PURLIN_MAX_CTAS
    and NCCL_MAX_CTAS), 0 for each library's default."""
    m = re.search(r" blocks=(\d+)", header.split("args:", 1)[0])
    return int(m.group(1)) if m else 0


def json_rows(purlin, nccl, capped):
    """One row per size Purlin measured, in the form of docs/perf/2xh200.json, of the runs with
    each library's default blocks (capped False) or of those with its blocks capped (capped True,
    "blocks" the cap); the NCCL fields are null where NCCL has no such collective (the V, column
    and matrix forms) or did not run."""
    rows = []
    for key in sorted(purlin):
        mode, procs, reg, blocks, coll, dtype, size = key
        if (blocks != 0) != capped:
            continue
        p, n = purlin[key], nccl.get(key, (None, None, None))
        rows.append({"coll": coll, "mode": mode, "procs": procs, "dtype": dtype, "bytes": size,
                     "purlin_us": p[0], "nccl_us": n[0], "purlin_busbw": p[1], "nccl_busbw": n[1],
                     "purlin_wrong": p[2], "nccl_wrong": n[2], "blocks": blocks or None, "registered": reg})
    return rows


def bench_rows(path, procs, own):
    """The rows of a tests/torch benchmark's --json (bf16, CUDA graphs, one process per GPU):
    own(r) gives a row's own fields; the others are those every such row shares."""
    if not path or not os.path.exists(path):
        return []
    with open(path) as f:
        doc = json.load(f)
    shared = {"mode": "graph", "procs": procs, "dtype": "bfloat16", "purlin_busbw": None, "nccl_busbw": None,
              "purlin_wrong": None, "nccl_wrong": None, "blocks": None, "registered": False}
    return [{**own(r), **shared} for r in doc.get("rows", [])]


def rmsnorm_rows(path, procs):
    """The fused all-reduce + residual add + RMSNorm rows (bench_rmsnorm.py): purlin_us is the
    fused call, nccl_us NCCL's all-reduce followed by PyTorch's add and rms_norm,
    purlin_unfused_us Purlin's all-reduce followed by the same; bytes are the activation's
    (tokens x hidden x 2)."""
    return bench_rows(path, procs, lambda r: {
        "coll": "allreduce_rmsnorm", "bytes": 2 * r["tokens"] * r["hidden"], "hidden": r["hidden"],
        "tokens": r["tokens"], "purlin_us": r["fused_us"], "nccl_us": r["nccl_us"], "purlin_unfused_us": r["purlin_us"]})


def torch_rows(path, procs):
    """torch.distributed.all_reduce through each library (bench_allreduce.py --with-library):
    purlin_us on Purlin (LD_PRELOAD), nccl_us on NCCL, and PyTorch's symmetric-memory one-shot
    and two-shot kernels beside them (null where they refused a size)."""
    return bench_rows(path, procs, lambda r: {
        "coll": "torch_allreduce", "bytes": r["bytes"], "purlin_us": r["purlin_us"], "nccl_us": r["nccl_us"],
        "symm_one_shot_us": r["one_shot_us"], "symm_two_shot_us": r["two_shot_us"]})


# ROOTED send one way at two ranks: their ceiling is a push with one direction busy.
ROOTED = {"broadcast", "reduce", "gather", "scatter"}
# DEFAULT_BLOCKS is the blocks a staged call takes with the CUDA Atom's defaults (README).
DEFAULT_BLOCKS = 64


def ceilings(path):
    """smbench's lines as {(kind, directions, blocks): GB/s}; {} without a file."""
    out = {}
    if not path or not os.path.exists(path):
        return out
    for line in open(path):
        f = line.split()
        if len(f) == 4 and f[0] in ("push", "pull") and f[1] in ("one", "both"):
            out[(f[0], f[1], int(f[2]))] = float(f[3])
    return out


def of_ceiling(rows, ceils):
    """Gives every row of 256 MiB or more its bus bandwidth over the push ceiling at its blocks
    (of_ceiling), and returns the table lines that show them; nothing without ceilings."""
    lines = []
    for r in rows:
        if r.get("bytes", 0) < 256 << 20 or not r.get("purlin_busbw"):
            continue
        blocks = r.get("blocks") or DEFAULT_BLOCKS
        c = ceils.get(("push", "one" if r["coll"] in ROOTED else "both", blocks))
        if not c:
            continue
        r["of_ceiling"] = round(r["purlin_busbw"] / c, 3)
        lines.append(f"| {r['coll']} | {r['mode']} | {r['procs']} | {'yes' if r.get('registered') else 'no'} | {blocks} "
                     f"| {r['bytes'] >> 20} | {r['purlin_busbw']:.1f} | {c:.1f} | {r['of_ceiling']:.2f} |")
    if lines:
        lines = ["", "### Bus bandwidth against the SM push ceiling (tests/gpu/smbench.cu, same blocks)",
                 "| collective | mode | processes | registered | blocks | MiB | Purlin GB/s | ceiling GB/s | of the ceiling |",
                 "|---|---|---:|---|---:|---:|---:|---:|---:|"] + lines
    return lines


def costs_rows(path):
    """tests/torch/bench_init.py --with-library's rows: per communicator (first, second), each
    library's creation plus first all_reduce (s) and GPU memory (MiB); [] without a file."""
    if not path or not os.path.exists(path):
        return []
    return json.load(open(path)).get("rows", [])


def costs_table(rows):
    if not rows:
        return []
    fmt = lambda v, d: "-" if v is None else f"{v:.{d}f}"  # noqa: E731
    over = lambda a, b: "-" if a is None or not b else f"{a / b:.2f}"  # noqa: E731
    return ["", "### What a communicator costs through PyTorch (tests/torch/bench_init.py, the largest over the ranks)",
            "| communicator | Purlin s | NCCL s | Purlin MiB | NCCL MiB | time P/N | memory P/N |",
            "|---|---:|---:|---:|---:|---:|---:|"] + [
        f"| {r['comm']} | {fmt(r.get('purlin_s'), 3)} | {fmt(r.get('nccl_s'), 3)} | {fmt(r.get('purlin_mib'), 1)} "
        f"| {fmt(r.get('nccl_mib'), 1)} | {over(r.get('purlin_s'), r.get('nccl_s'))} | {over(r.get('purlin_mib'), r.get('nccl_mib'))} |"
        for r in rows]


def table(title, header, cells):
    """A table under a ### title: header names its columns, each of cells is a row's texts."""
    if not cells:
        return []
    return (["", f"### {title}", "| " + " | ".join(header) + " |", "|" + "---:|" * len(header)]
            + ["| " + " | ".join(row) + " |" for row in cells])


def torch_table(rows):
    """The torch rows as a table: issue 10 wants Purlin faster than NCCL and the one-shot kernel
    from 8 B to 64 KiB, issue 11 at least as fast as the two-shot kernel from 16 to 256 MiB."""
    fmt = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
    over = lambda a, b: "-" if a is None or not b else f"{a / b:.2f}"  # noqa: E731
    return table("torch.distributed.all_reduce (bf16, graph, a process a GPU): Purlin vs NCCL and PyTorch's symmetric memory",
                 ["bytes", "Purlin us", "NCCL us", "one-shot us", "two-shot us", "Purlin / NCCL", "Purlin / one-shot",
                  "Purlin / two-shot"],
                 [[str(r["bytes"]), fmt(r["purlin_us"]), fmt(r["nccl_us"]), fmt(r["symm_one_shot_us"]),
                   fmt(r["symm_two_shot_us"]), over(r["purlin_us"], r["nccl_us"]),
                   over(r["purlin_us"], r["symm_one_shot_us"]), over(r["purlin_us"], r["symm_two_shot_us"])] for r in rows])


def rmsnorm_table(rows):
    """The fused rows as a table: issue 16 wants fused at least 1.5x faster than NCCL + torch
    from 1 to 128 tokens, and never slower than Purlin + torch."""
    return table("AllReduce + residual add + RMSNorm (bf16, graph): fused vs unfused",
                 ["hidden", "tokens", "fused us", "Purlin + torch us", "NCCL + torch us", "NCCL+torch / fused",
                  "Purlin+torch / fused"],
                 [[str(r["hidden"]), str(r["tokens"])] + [f"{v:.2f}" for v in (
                     r["purlin_us"], r["purlin_unfused_us"], r["nccl_us"], r["nccl_us"] / r["purlin_us"],
                     r["purlin_unfused_us"] / r["purlin_us"])] for r in rows])


# Purlin's own collectives and the even form each is measured against.
EVEN_FORMS = {"allgatherv": "allgather", "reducescatterv": "reducescatter", "alltoallv": "alltoall",
              "alltoallmatrix": "alltoall", "allgathercolumns": "allgather", "reducescattercolumns": "reducescatter"}


def against_even(purlin):
    """Lines comparing each of Purlin's own collectives with its even form at the sizes both ran
    (eager, one process): the bandwidth issue wants the V forms within 5% of their even forms."""
    lines = []
    for (mode, procs, reg, blocks, coll, dtype, size), (t, _, _) in sorted(purlin.items()):
        even = EVEN_FORMS.get(coll)
        e = purlin.get(Key(mode, procs, reg, blocks, even, dtype, size)) if even else None
        if e and size >= 1 << 20 and e[0] > 0:
            lines.append(f"| {coll} | {mode} | {size} | {t:.2f} | {even} | {e[0]:.2f} | {t / e[0]:.3f} |")
    if not lines:
        return []
    return (["", "### Purlin's own collectives against their even forms (1 MiB and up)",
             "| collective | mode | size (B) | us | even form | us | ratio |", "|---|---|---:|---:|---|---:|---:|"]
            + lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("purlin")
    ap.add_argument("nccl")
    ap.add_argument("--json", help="write the rows Purlin measured here, NCCL's beside them")
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--gpus", type=int, default=0)
    ap.add_argument("--nccl-version", default="unknown")
    ap.add_argument("--rmsnorm", help="tests/torch/bench_rmsnorm.py's --json: rows of coll allreduce_rmsnorm")
    ap.add_argument("--torch", help="tests/torch/bench_allreduce.py --with-library's --json: rows of coll torch_allreduce")
    ap.add_argument("--ceilings", help="tests/gpu/smbench.cu's output: the SM push and pull ceilings")
    ap.add_argument("--costs", help="tests/torch/bench_init.py --with-library's --json: a communicator's time and memory")
    ap.add_argument("--earlier", action="append", default=[], metavar="DIR",
                    help="logs of an earlier run of the suite on the same build, oldest first")
    a = ap.parse_args()
    for d in a.earlier:
        try:
            commit = open(os.path.join(d, "COMMIT")).read().strip()
        except OSError:
            commit = "none (no COMMIT file)"
        if commit != a.commit:
            print(f"compare.py: the earlier run in {d} is of commit {commit}, this one of {a.commit}: not merged",
                  file=sys.stderr)
            sys.exit(2)
    purlin = parse(*[os.path.join(d, "perf-purlin.txt") for d in a.earlier], a.purlin)
    nccl = parse(*[os.path.join(d, "perf-nccl.txt") for d in a.earlier], a.nccl)
    # The newest of each benchmark's outputs: the one named, else the latest earlier run's.
    newest = lambda path, name: next((p for p in [path] + [os.path.join(d, name) for d in reversed(a.earlier)]  # noqa: E731
                                      if p and os.path.exists(p)), None)
    rmsnorm, torch_json = newest(a.rmsnorm, "rmsnorm.json"), newest(a.torch, "torch-allreduce.json")
    ceils = ceilings(newest(a.ceilings, "ceilings-sm.txt"))
    costs = costs_rows(newest(a.costs, "torch-init.json"))
    keys = sorted(set(purlin[0]) | set(nccl[0]), key=lambda k: (k[0] != "eager",) + k[1:])
    last = None
    for key in keys:
        mode, procs, reg, blocks, coll, dtype, size = key
        if key[:6] != last:
            last = key[:6]
            print(f"\n### {coll}, {mode}, {procs} process{'es' if procs > 1 else ''}{', registered windows' if reg else ''}"
                  f"{f', at most {blocks} blocks' if blocks else ''} ({dtype} sum, out of place)")
            print("| size (B) | Purlin us | NCCL us | Purlin busbw | NCCL busbw | time ratio P/N |")
            print("|---:|---:|---:|---:|---:|---:|")
        p, n = purlin[0].get(key), nccl[0].get(key)
        fmt = lambda v, i: f"{v[i]:.2f}" if v else "-"
        ratio = f"{p[0] / n[0]:.2f}" if p and n and n[0] > 0 else "-"
        print(f"| {size} | {fmt(p, 0)} | {fmt(n, 0)} | {fmt(p, 1)} | {fmt(n, 1)} | {ratio} |")
    for line in against_even(purlin[0]):
        print(line)
    print()
    for name, (rows, wrong, runs) in (("Purlin", purlin), ("NCCL", nccl)):
        for mode in sorted(set(wrong) | set(runs)):
            bad = [c for c, s in runs.get(mode, []) if s != 0]
            print(f"{name} {mode}: #wrong total {wrong.get(mode, 0)}, runs {len(runs.get(mode, []))}, "
                  f"failed runs {len(bad)}{': ' + ' '.join(bad) if bad else ''}")
    fused, through_torch = rmsnorm_rows(rmsnorm, a.gpus), torch_rows(torch_json, a.gpus)
    for line in rmsnorm_table(fused) + torch_table(through_torch):
        print(line)
    rows, capped = json_rows(purlin[0], nccl[0], False), json_rows(purlin[0], nccl[0], True)
    for line in of_ceiling(rows + capped, ceils) + costs_table(costs):
        print(line)
    if a.json:
        doc = {"date": datetime.date.today().isoformat(), "commit": a.commit, "gpus": a.gpus,
               "nccl_version": a.nccl_version}
        if ceils:
            doc["ceilings"] = {" ".join(map(str, k)): v for k, v in sorted(ceils.items())}
        if costs:
            doc["costs"] = costs
        lists = {"rows": rows + fused + through_torch, "capped": capped}
        with open(a.json, "w") as f:  # one row a line, so that a new run's diff reads row by row
            f.write(json.dumps(doc)[:-1] + "".join(f', "{k}": [\n' + ",\n".join(json.dumps(r) for r in v) + "\n]"
                                                  for k, v in lists.items()) + "}\n")


if __name__ == "__main__":
    main()
