#!/usr/bin/env python3
"""compare.py: side-by-side tables of purlin-perf outputs, Purlin vs NCCL.

Usage: compare.py PURLIN.txt NCCL.txt
Each file holds several purlin-perf runs, each preceded by a line
'## RUN mode=<eager|graph> ...' (tests/gpu/run.sh writes it). For every mode
and collective it prints: size, out-of-place time (us) and busbw (GB/s) of
each library and the ratio Purlin time / NCCL time (> 1: Purlin slower),
then the #wrong totals and failed runs per library and mode. Only numbers
read from the files are printed.
"""
import re
import sys


def parse(path):
    rows, wrong, runs = {}, {}, {}
    mode, coll = "?", "?"
    try:
        lines = open(path, errors="replace").read().splitlines()
    except OSError:
        return rows, wrong, runs
    for line in lines:
        m = re.match(r"## RUN mode=(\S+)", line)
        if m:
            mode = m.group(1)
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
            size, t, bus, w = int(f[0]), float(f[5]), float(f[7]), f[8]
        except ValueError:
            continue
        rows[(mode, coll, size)] = (t, bus)
        n = sum(int(x) for x in (w, f[12] if len(f) > 12 else "0") if x.isdigit())
        wrong[mode] = wrong.get(mode, 0) + n
    return rows, wrong, runs


def main():
    purlin, nccl = parse(sys.argv[1]), parse(sys.argv[2])
    keys = sorted(set(purlin[0]) | set(nccl[0]), key=lambda k: (k[0] != "eager", k[1], k[2]))
    last = None
    for mode, coll, size in keys:
        if (mode, coll) != last:
            last = (mode, coll)
            print(f"\n### {coll}, {mode} (float sum, 2 ranks, out of place)")
            print("| size (B) | Purlin us | NCCL us | Purlin busbw | NCCL busbw | time ratio P/N |")
            print("|---:|---:|---:|---:|---:|---:|")
        p, n = purlin[0].get((mode, coll, size)), nccl[0].get((mode, coll, size))
        fmt = lambda v, i: f"{v[i]:.2f}" if v else "-"
        ratio = f"{p[0] / n[0]:.2f}" if p and n and n[0] > 0 else "-"
        print(f"| {size} | {fmt(p, 0)} | {fmt(n, 0)} | {fmt(p, 1)} | {fmt(n, 1)} | {ratio} |")
    print()
    for name, (rows, wrong, runs) in (("Purlin", purlin), ("NCCL", nccl)):
        for mode in sorted(set(wrong) | set(runs)):
            bad = [c for c, s in runs.get(mode, []) if s != 0]
            print(f"{name} {mode}: #wrong total {wrong.get(mode, 0)}, runs {len(runs.get(mode, []))}, "
                  f"failed runs {len(bad)}{': ' + ' '.join(bad) if bad else ''}")


if __name__ == "__main__":
    main()
