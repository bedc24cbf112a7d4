"""Tests of tools/perfplot.py (python3 -m unittest tools/perfplot_test.py; tests/run.sh suite bench)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest
import xml.dom.minidom

HERE = os.path.dirname(os.path.abspath(__file__))
PERFPLOT = os.path.join(HERE, "perfplot.py")

HEADER = """# purlin-perf all: backend host, NCCL API version 22809, one process, one thread
# nranks 2 minBytes 8 maxBytes 8192 step: 4(factor) warmup iters: 1 iters: 20 validation: 1 graph: 0
#
"""


def perf_output(times, wrong=0, colls=("allreduce", "broadcast")):
    """A purlin-perf output: per collective, sizes 8, 32, ... with the given times (us)."""
    out = [HEADER]
    for coll in colls:
        out.append(f"# Collective: {coll}\n#\n")
        for i, t in enumerate(times):
            size = 8 * 4 ** i
            w = wrong if i == len(times) - 1 and coll == colls[0] else 0
            bus = size / t / 1e3
            out.append(f"{size:12d} {size // 4:13d}     float     sum      -1 {t:8.2f} {bus:7.2f} {bus:7.2f} {w:7d}"
                       f" {t:8.2f} {bus:7.2f} {bus:7.2f}       0\n")
    return "".join(out)


class PerfPlotTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.svg = os.path.join(self.dir.name, "out.svg")

    def tearDown(self):
        self.dir.cleanup()

    def file(self, name, text):
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def run_plot(self, *args):
        p = subprocess.run([sys.executable, PERFPLOT, *args, "-o", self.svg, "--verdict"],
                           capture_output=True, text=True, timeout=60)
        return p.returncode, p.stdout.strip().splitlines()[-1] if p.stdout.strip() else p.stderr

    def polylines(self):
        doc = xml.dom.minidom.parse(self.svg)
        return [p.getAttribute("stroke") for p in doc.getElementsByTagName("polyline")]

    def test_purlin_alone(self):
        rc, line = self.run_plot(self.file("p.txt", perf_output([10, 11, 12, 20])), os.path.join(self.dir.name, "none.txt"))
        self.assertEqual(rc, 0, line)
        self.assertRegex(line, r"^bench: PASS: host Atom, 2 ranks, 2 collectives, 8 B\.\.512 B, 0 wrong values; "
                               r"no NCCL results; plot: ")
        # two collectives x (time, busbw), Purlin's color only
        self.assertEqual(len(self.polylines()), 4)
        self.assertEqual(set(self.polylines()), {"#1f5fbf"})

    def test_beside_nccl(self):
        p = self.file("p.txt", perf_output([10, 20, 30, 40]))
        n = self.file("n.txt", perf_output([5, 10, 15, 20]))
        rc, line = self.run_plot(p, n)
        self.assertEqual(rc, 0, line)
        self.assertIn("Purlin time / NCCL time, median of 8 sizes: 2.00", line)
        self.assertEqual(len(self.polylines()), 8)
        self.assertEqual(set(self.polylines()), {"#1f5fbf", "#d9731a"})

    def test_wrong_values_fail(self):
        rc, line = self.run_plot(self.file("p.txt", perf_output([10, 11, 12], wrong=3)))
        self.assertEqual(rc, 1, line)
        self.assertRegex(line, r"^bench: FAIL: .* 3 wrong values")

    def test_exit_status_fails(self):
        rc, line = self.run_plot(self.file("p.txt", perf_output([10, 11])), "--status", "2")
        self.assertEqual(rc, 1, line)
        self.assertRegex(line, r"^bench: FAIL: .*exit status 2")

    def test_no_results_fail(self):
        rc, line = self.run_plot(self.file("p.txt", HEADER))
        self.assertEqual(rc, 1, line)
        self.assertIn("no results", line)

    def test_json(self):
        rows = [{"coll": "allreduce", "mode": mode, "procs": 1, "dtype": "float", "bytes": b, "purlin_us": 3.0 * b,
                 "nccl_us": 1.0 * b, "purlin_busbw": 1.0, "nccl_busbw": 3.0, "purlin_wrong": 0, "nccl_wrong": 0,
                 "blocks": None, "registered": False} for mode in ("eager", "graph") for b in (8, 64, 512)]
        j = self.file("r.json", json.dumps({"date": "2026-01-02", "commit": "abc", "gpus": 2,
                                            "nccl_version": "22809", "rows": rows}))
        rc, line = self.run_plot(j)
        self.assertEqual(rc, 0, line)
        self.assertRegex(line, r"^bench: PASS: CUDA Atom, 2 ranks, 1 collective, 8 B\.\.512 B, 0 wrong values; "
                               r"Purlin time / NCCL time, median of 6 sizes: 3\.00")
        doc = xml.dom.minidom.parse(self.svg)
        dashed = [p for p in doc.getElementsByTagName("polyline") if p.getAttribute("stroke-dasharray")]
        self.assertEqual(len(doc.getElementsByTagName("polyline")), 8)  # 2 libs x 2 modes x (time, busbw)
        self.assertEqual(len(dashed), 4)  # the graph-mode curves
        with open(self.svg) as f:
            self.assertIn("2026-01-02 (abc)", f.read())


if __name__ == "__main__":
    unittest.main()
