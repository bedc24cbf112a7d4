#!/usr/bin/env python3
"""perfplot.py: an SVG of time and bus bandwidth against size, Purlin beside NCCL.

Usage:
  perfplot.py PURLIN.txt [NCCL.txt] -o OUT.svg [--verdict]
  perfplot.py RUN.json -o OUT.svg [--verdict]

Inputs: purlin-perf outputs (one run or several, each optionally preceded by
tests/gpu/run.sh's '## RUN mode=...' line; read by tests/gpu/compare.py's
parser), or a side-by-side JSON in the form of docs/perf/2xh200.json. NCCL's
curves appear when NCCL results are present, else Purlin's alone.

The SVG has one row per collective: out-of-place time (us, log scale) and bus
bandwidth (GB/s) against message size (log scale), one line per library and
mode (eager solid, CUDA-graph dashed); runs on registered windows (-R 1) are
left out. Only the Python standard library is used.

--verdict prints one closing line: PASS when every run exited 0 (--status, the
benchmark's exit status, for a file without '## EXIT' lines) and no value was
wrong, else FAIL; with NCCL present, the median of Purlin's time over NCCL's.
The exit status is 0 on PASS, 1 on FAIL.
"""
import argparse
import html
import json
import math
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "gpu"))
from compare import parse  # noqa: E402  (one parser of purlin-perf's output)

COLORS = {"Purlin": "#1f5fbf", "NCCL": "#d9731a"}
DASH = {"eager": "", "graph": "6,4"}
ORDER = ["allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "reduce", "gather",
         "scatter", "sendrecv", "allgatherv", "reducescatterv", "alltoallv"]


def series_from_txt(path, lib, out):
    """Adds lib's curves from a purlin-perf output; returns (wrong values, runs, failed runs, header facts)."""
    rows, wrong, runs = parse(path)
    for k, (t, bus, _) in rows.items():
        if k.reg or k.blocks:
            continue  # registered windows and capped blocks: in the tables, not the plot
        mode = "eager" if k.mode == "?" else k.mode
        out.setdefault(k.coll, {}).setdefault((lib, mode, k.procs, k.dtype), []).append((k.size, t, bus))
    text = open(path, errors="replace").read() if os.path.exists(path) else ""
    facts = {k: m.group(1) for k, m in (("backend", re.search(r"backend (\w+)", text)),
                                        ("nranks", re.search(r"nranks (\d+)", text))) if m}
    nruns = sum(len(v) for v in runs.values())
    bad = sum(1 for v in runs.values() for _, s in v if s != 0)
    return sum(wrong.values()), nruns, bad, facts


def series_from_json(path, out):
    doc = json.load(open(path))
    wrong = 0
    for r in doc["rows"]:
        if r.get("registered"):
            continue
        for lib in ("purlin", "nccl"):
            if r.get(f"{lib}_us") is None:
                continue
            key = ("Purlin" if lib == "purlin" else "NCCL", r["mode"], r["procs"], r["dtype"])
            out.setdefault(r["coll"], {}).setdefault(key, []).append((r["bytes"], r[f"{lib}_us"], r[f"{lib}_busbw"]))
            wrong += r.get(f"{lib}_wrong") or 0
    facts = {"backend": "cuda", "nranks": str(doc.get("gpus", "?")), "date": doc.get("date", ""),
             "commit": doc.get("commit", "")}
    return wrong, 0, 0, facts


def pick(curves):
    """One dtype per (library, mode, processes): float where measured, else the first."""
    chosen = {}
    for key in sorted(curves, key=lambda k: (k[3] != "float", k[3])):
        chosen.setdefault(key[:3], key)
    return {k: sorted(curves[k]) for k in chosen.values()}


def size_label(b):
    for unit, n in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= n:
            return f"{b / n:g} {unit}"
    return f"{b} B"


def chart(x0, y0, w, h, title, curves, col, logy, multi_procs):
    """One chart: curves {key: [(size, t, bus)]}, column col (1 time, 2 busbw)."""
    pts = [(v[0], v[col]) for c in curves.values() for v in c]
    pts = [(s, y) for s, y in pts if s > 0 and (y > 0 or not logy)]
    out = [f'<text x="{x0 + w / 2}" y="{y0 - 8}" text-anchor="middle" class="t">{html.escape(title)}</text>',
           f'<rect x="{x0}" y="{y0}" width="{w}" height="{h}" class="frame"/>']
    if not pts:
        return out + [f'<text x="{x0 + w / 2}" y="{y0 + h / 2}" text-anchor="middle">no data</text>']
    lx = [math.log2(s) for s, _ in pts]
    xmin, xmax = min(lx), max(lx)
    xmax = xmax if xmax > xmin else xmin + 1
    if logy:
        ly = [math.log10(y) for _, y in pts]
        ymin, ymax = math.floor(min(ly)), math.ceil(max(ly))
        ymax = ymax if ymax > ymin else ymin + 1
        fy = lambda y: y0 + h - (math.log10(y) - ymin) / (ymax - ymin) * h
        yticks = [(10 ** e, f"{10 ** e:g}") for e in range(ymin, ymax + 1)]
    else:
        top = max(y for _, y in pts) or 1
        step = 10 ** math.floor(math.log10(top / 4)) if top > 0 else 1
        step *= next(m for m in (1, 2, 5, 10) if top / (step * m) <= 5)
        ymax = step * math.ceil(top / step)
        fy = lambda y: y0 + h - y / ymax * h
        yticks = [(i * step, f"{i * step:g}") for i in range(int(round(ymax / step)) + 1)]
    fx = lambda s: x0 + (math.log2(s) - xmin) / (xmax - xmin) * w
    for v, label in yticks:
        y = fy(v)
        out.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x0 + w}" y2="{y:.1f}" class="grid"/>')
        out.append(f'<text x="{x0 - 4}" y="{y + 4:.1f}" text-anchor="end">{label}</text>')
    e = math.ceil(xmin)
    every = max(1, math.ceil((xmax - xmin) / 6))
    while e <= xmax:
        x = fx(2 ** e)
        out.append(f'<line x1="{x:.1f}" y1="{y0}" x2="{x:.1f}" y2="{y0 + h}" class="grid"/>')
        out.append(f'<text x="{x:.1f}" y="{y0 + h + 14}" text-anchor="middle">{size_label(2 ** e)}</text>')
        e += every
    for (lib, mode, procs, dtype), c in sorted(curves.items()):
        p = " ".join(f"{fx(v[0]):.1f},{fy(v[col]):.1f}" for v in c if v[0] > 0 and (v[col] > 0 or not logy))
        dash = f' stroke-dasharray="{DASH.get(mode, "2,3")}"' if DASH.get(mode, "2,3") else ""
        width = 1.5 if procs == 1 or not multi_procs else 2.5
        out.append(f'<polyline points="{p}" fill="none" stroke="{COLORS[lib]}" stroke-width="{width}"{dash}/>')
    return out


def svg(series, title):
    colls = sorted(series, key=lambda c: (ORDER.index(c) if c in ORDER else len(ORDER), c))
    keys = {k[:3] for c in colls for k in pick(series[c])}
    multi_procs = len({k[2] for k in keys}) > 1
    cw, ch, ml, gap, top = 360, 170, 60, 40, 80
    width = ml + 2 * cw + gap + 20
    height = top + len(colls) * (ch + 50) + 10
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
           'font-family="sans-serif" font-size="11">',
           '<style>.t{font-weight:bold;font-size:12px}.frame{fill:none;stroke:#888}.grid{stroke:#ddd}</style>',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2}" y="20" text-anchor="middle" class="t">{html.escape(title)}</text>']
    lx = ml
    for lib, mode, procs in sorted(keys):
        dash = f' stroke-dasharray="{DASH.get(mode, "2,3")}"' if DASH.get(mode, "2,3") else ""
        name = f"{lib} {mode}" + (f", {procs} processes" if multi_procs and procs > 1 else "")
        out.append(f'<line x1="{lx}" y1="40" x2="{lx + 30}" y2="40" stroke="{COLORS[lib]}" stroke-width="2"{dash}/>')
        out.append(f'<text x="{lx + 35}" y="44">{html.escape(name)}</text>')
        lx += 45 + 7 * len(name)
    for i, c in enumerate(colls):
        curves = pick(series[c])
        y = top + i * (ch + 50)
        out += chart(ml, y, cw, ch, f"{c}: time (us)", curves, 1, True, multi_procs)
        out += chart(ml + cw + gap, y, cw, ch, f"{c}: bus bandwidth (GB/s)", curves, 2, False, multi_procs)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def ratio_median(series):
    """Median over every (collective, mode, processes, type, size) both measured of Purlin time / NCCL time."""
    ratios = []
    for curves in series.values():
        for (lib, mode, procs, dtype), c in curves.items():
            if lib != "Purlin":
                continue
            nccl = dict((s, t) for s, t, _ in curves.get(("NCCL", mode, procs, dtype), []))
            ratios += [t / nccl[s] for s, t, _ in c if nccl.get(s, 0) > 0]
    return (statistics.median(ratios), len(ratios)) if ratios else (None, 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("inputs", nargs="+", help="PURLIN.txt [NCCL.txt], or one .json")
    ap.add_argument("-o", "--output", required=True, help="the SVG to write")
    ap.add_argument("--title", help="the plot's title")
    ap.add_argument("--verdict", action="store_true", help="print one closing PASS/FAIL line")
    ap.add_argument("--status", type=int, default=0, help="the benchmark's exit status (for --verdict)")
    a = ap.parse_args()
    series = {}
    if a.inputs[0].endswith(".json"):
        wrong, nruns, bad, facts = series_from_json(a.inputs[0], series)
        nccl_missing = False
    else:
        wrong, nruns, bad, facts = series_from_txt(a.inputs[0], "Purlin", series)
        nccl_missing = len(a.inputs) < 2 or not os.path.exists(a.inputs[1])
        if not nccl_missing:
            w, n, b, _ = series_from_txt(a.inputs[1], "NCCL", series)
            wrong, nruns, bad = wrong + w, nruns + n, bad + b
    atom = {"host": "host Atom", "cuda": "CUDA Atom"}.get(facts.get("backend"), facts.get("backend", "?"))
    title = a.title or (f"Purlin{'' if nccl_missing else ' and NCCL'}, {atom}, {facts.get('nranks', '?')} ranks"
                        + (f", {facts['date']} ({facts['commit']})" if facts.get("date") else ""))
    with open(a.output, "w") as f:
        f.write(svg(series, title))
    if not a.verdict:
        return 0
    sizes = sorted({s for c in series.values() for k, v in c.items() if k[0] == "Purlin" for s, _, _ in v})
    ok = a.status == 0 and bad == 0 and wrong == 0 and bool(sizes)
    msg = (f"bench: {'PASS' if ok else 'FAIL'}: {atom}, {facts.get('nranks', '?')} ranks, {len(series)} collective{'s' if len(series) != 1 else ''}, "
           + (f"{size_label(sizes[0])}..{size_label(sizes[-1])}, " if sizes else "no results, ")
           + f"{wrong} wrong values"
           + (f", {bad} of {nruns} runs failed" if bad else "")
           + (f", exit status {a.status}" if a.status else ""))
    med, n = ratio_median(series)
    if med is not None:
        msg += f"; Purlin time / NCCL time, median of {n} sizes: {med:.2f}"
    elif nccl_missing:
        msg += "; no NCCL results"
    print(f"{msg}; plot: {a.output}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
