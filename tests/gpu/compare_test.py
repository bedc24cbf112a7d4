"""Tests of tests/gpu/compare.py (python3 -m unittest tests/gpu/compare_test.py; tests/run.sh suite bench)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
COMPARE = os.path.join(HERE, "compare.py")


def run_block(lib, mode, args, coll, times, wrong=0):
    """One purlin-perf run as tests/gpu/run.sh appends it: header, table, SECONDS and EXIT lines."""
    out = [f"## RUN mode={mode} lib={lib} coll={coll} args: {args}\n",
           f"# purlin-perf {coll}: backend cuda, NCCL API version 22809\n#\n# Collective: {coll}\n#\n"]
    for i, t in enumerate(times):
        size = 8 * 4 ** i
        bus = size / t / 1e3
        out.append(f"{size:12d} {size // 4:13d}     float     sum      -1 {t:8.2f} {bus:7.2f} {bus:7.2f} {wrong:7d}"
                   f" {t:8.2f} {bus:7.2f} {bus:7.2f}       0\n")
    out.append(f"## SECONDS {coll} 7\n## EXIT {coll} status=0\n")
    return "".join(out)


def two_runs(coll, args, times):
    """Both libraries' outputs of two runs of coll: args[k] with times[lib][k]."""
    return tuple("".join(run_block(lib, "graph", a, coll, t) for a, t in zip(args, times[lib]))
                 for lib in ("purlin", "nccl"))


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def earlier_run(root, name, commit, purlin, nccl, rmsnorm=None):
    """The logs of an earlier run of the suite, as tests/gpu/run.sh leaves them: COMMIT, perf-purlin.txt,
    perf-nccl.txt and, where the part ran, rmsnorm.json."""
    d = os.path.join(root, name)
    os.mkdir(d)
    write(os.path.join(d, "COMMIT"), commit + "\n")
    write(os.path.join(d, "perf-purlin.txt"), purlin)
    write(os.path.join(d, "perf-nccl.txt"), nccl)
    if rmsnorm is not None:
        write(os.path.join(d, "rmsnorm.json"), json.dumps(rmsnorm))
    return d


class CompareTest(unittest.TestCase):
    def compare(self, purlin, nccl, rmsnorm=None, earlier=(), status=0, through_torch=None, ceilings=None, costs=None):
        """compare.py on these outputs; earlier: functions of a temporary directory returning an
        earlier run's logs there."""
        with tempfile.TemporaryDirectory() as d:
            p, n, j, m = (os.path.join(d, x) for x in ("p.txt", "n.txt", "out.json", "rmsnorm.json"))
            write(p, purlin)
            write(n, nccl)
            extra = []
            if rmsnorm is not None:
                write(m, json.dumps(rmsnorm))
                extra = ["--rmsnorm", m]
            if through_torch is not None:
                write(os.path.join(d, "torch.json"), json.dumps(through_torch))
                extra += ["--torch", os.path.join(d, "torch.json")]
            if costs is not None:
                write(os.path.join(d, "init.json"), json.dumps(costs))
                extra += ["--costs", os.path.join(d, "init.json")]
            if ceilings is not None:
                write(os.path.join(d, "sm.txt"), ceilings)
                extra += ["--ceilings", os.path.join(d, "sm.txt")]
            for e in earlier:
                extra += ["--earlier", e(d)]
            r = subprocess.run([sys.executable, COMPARE, p, n, "--json", j, "--commit", "abc", "--gpus", "2"] + extra,
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, status, r.stderr)
            if status:
                self.assertFalse(os.path.exists(j), "nothing is written when runs are not merged")
                return r.stderr, None
            with open(j) as f:
                return r.stdout, json.load(f)

    def test_process_layout_comes_from_the_header(self):
        # One process driving both GPUs, and one process per GPU (-m 1), of the same collective
        # and sizes: two sets of rows, told apart by procs.
        one = "-g 2 -b 8 -e 32 -f 4 -n 20 -w 2 -c 1 -G 10"
        per_gpu = "-g 2 -m 1 -b 8 -e 32 -f 4 -n 20 -w 2 -c 1 -G 10"
        text, doc = self.compare(*two_runs("allreduce", [one, per_gpu], {
            "purlin": [[4.0, 5.0], [6.0, 7.0]], "nccl": [[8.0, 10.0], [6.0, 14.0]]}))
        rows = {(r["procs"], r["bytes"]): r for r in doc["rows"]}
        self.assertEqual(sorted(rows), [(1, 8), (1, 32), (2, 8), (2, 32)])
        self.assertEqual((rows[(1, 8)]["purlin_us"], rows[(1, 8)]["nccl_us"]), (4.0, 8.0))
        self.assertEqual((rows[(2, 32)]["purlin_us"], rows[(2, 32)]["nccl_us"]), (7.0, 14.0))
        self.assertIn("2 processes", text)

    def test_registered_runs_are_their_own_rows(self):
        # The same sizes plain and with registered windows (-R 1): two sets of rows.
        plain = "-g 2 -b 8 -e 32 -f 4 -n 20 -w 2 -c 1 -G 10"
        reg = plain + " -R 1"
        text, doc = self.compare(*two_runs("allgather", [plain, reg], {
            "purlin": [[4.0, 5.0], [3.0, 3.5]], "nccl": [[8.0, 10.0], [4.0, 5.0]]}))
        rows = {(r["registered"], r["bytes"]): r for r in doc["rows"]}
        self.assertEqual(sorted(rows), [(False, 8), (False, 32), (True, 8), (True, 32)])
        self.assertEqual((rows[(True, 8)]["purlin_us"], rows[(True, 8)]["nccl_us"]), (3.0, 4.0))
        self.assertEqual((rows[(False, 32)]["purlin_us"], rows[(False, 32)]["nccl_us"]), (5.0, 10.0))
        self.assertIn("registered windows", text)

    def test_wrong_values_are_counted(self):
        args = "-g 2 -b 8 -e 8 -n 20 -w 2 -c 1"
        _, doc = self.compare(run_block("purlin", "eager", args, "broadcast", [3.0], wrong=5),
                              run_block("nccl", "eager", args, "broadcast", [3.0]))
        self.assertEqual([(r["purlin_wrong"], r["nccl_wrong"]) for r in doc["rows"]], [(5, 0)])

    def test_purlin_only_collectives_keep_their_rows(self):
        # A collective NCCL lacks (here allgathercolumns) has rows with null NCCL fields.
        args = "-g 2 -b 8 -e 32 -f 4 -n 10 -w 1 -c 1 -u 0"
        purlin = run_block("purlin", "eager", args, "allgathercolumns", [4.0, 5.0]) + \
            run_block("purlin", "eager", args, "allgather", [3.0, 4.0])
        text, doc = self.compare(purlin, run_block("nccl", "eager", args, "allgather", [6.0, 8.0]))
        rows = {(r["coll"], r["bytes"]): r for r in doc["rows"]}
        self.assertEqual(sorted(rows), [("allgather", 8), ("allgather", 32), ("allgathercolumns", 8),
                                        ("allgathercolumns", 32)])
        self.assertEqual((rows[("allgathercolumns", 32)]["purlin_us"], rows[("allgathercolumns", 32)]["nccl_us"]),
                         (5.0, None))
        self.assertEqual(rows[("allgather", 8)]["nccl_us"], 6.0)
        self.assertIn("### allgathercolumns", text)

    def test_own_collectives_against_their_even_forms(self):
        args = "-g 2 -b 1M -e 4M -f 4 -n 10 -w 1 -c 1 -u 0"
        purlin = run_block("purlin", "eager", args, "allgatherv", [100.0, 420.0, 1680.0, 6720.0, 26880.0, 107520.0,
                                                                   430080.0, 1720320.0, 6881280.0, 27525120.0, 110100480.0]) + \
            run_block("purlin", "eager", args, "allgather", [100.0, 400.0, 1600.0, 6400.0, 25600.0, 102400.0,
                                                              409600.0, 1638400.0, 6553600.0, 26214400.0, 104857600.0])
        text, _ = self.compare(purlin, run_block("nccl", "eager", args, "allgather", [1.0]))
        self.assertIn("| allgatherv | eager | 8388608 | 110100480.00 | allgather | 104857600.00 | 1.050 |", text)
        self.assertNotIn("| allgatherv | eager | 8 |", text, "sizes under 1 MiB are left out")

    def test_fused_rmsnorm_rows(self):
        # bench_rmsnorm.py's rows become allreduce_rmsnorm rows beside purlin-perf's, with a table.
        args = "-g 2 -b 8 -e 8 -n 20 -w 2 -c 1"
        bench = {"torch": "2.9", "rows": [{"hidden": 4096, "tokens": 16, "calls": 20, "fused_us": 5.0,
                                           "purlin_us": 9.0, "nccl_us": 15.0}]}
        text, doc = self.compare(run_block("purlin", "eager", args, "allreduce", [3.0]),
                                 run_block("nccl", "eager", args, "allreduce", [4.0]), rmsnorm=bench)
        fused = [r for r in doc["rows"] if r["coll"] == "allreduce_rmsnorm"]
        self.assertEqual(len(fused), 1)
        self.assertEqual((fused[0]["bytes"], fused[0]["purlin_us"], fused[0]["nccl_us"], fused[0]["purlin_unfused_us"]),
                         (2 * 16 * 4096, 5.0, 15.0, 9.0))
        self.assertIn("| 4096 | 16 | 5.00 | 9.00 | 15.00 | 3.00 | 1.80 |", text)
        self.assertEqual(len(doc["rows"]), 2)


    def test_torch_rows(self):
        # bench_allreduce.py --with-library's rows become torch_allreduce rows, with a table.
        args = "-g 2 -b 8 -e 8 -n 20 -w 2 -c 1"
        bench = {"torch": "2.11", "rows": [{"bytes": 64, "calls": 20, "purlin_us": 5.0, "nccl_us": 10.0,
                                            "one_shot_us": 6.25, "two_shot_us": None}]}
        text, doc = self.compare(run_block("purlin", "eager", args, "allreduce", [3.0]),
                                 run_block("nccl", "eager", args, "allreduce", [4.0]), through_torch=bench)
        rows = [r for r in doc["rows"] if r["coll"] == "torch_allreduce"]
        self.assertEqual([(r["bytes"], r["procs"], r["purlin_us"], r["nccl_us"], r["symm_one_shot_us"], r["symm_two_shot_us"])
                          for r in rows], [(64, 2, 5.0, 10.0, 6.25, None)])
        self.assertIn("| 64 | 5.00 | 10.00 | 6.25 | - | 0.50 | 0.80 | - |", text)

    def test_capped_runs_are_kept_apart(self):
        # The same collective and size with each library's default blocks and with at most 8:
        # the default run in "rows", the capped one in "capped" with its blocks.
        args = "-g 2 -b 8 -e 8 -n 10 -w 2 -c 1"
        capped = lambda lib, t: run_block(lib, "eager", args, "allgather", [t]).replace(
            "coll=allgather args:", "coll=allgather blocks=8 args:")
        text, doc = self.compare(run_block("purlin", "eager", args, "allgather", [3.0]) + capped("purlin", 9.0),
                                 run_block("nccl", "eager", args, "allgather", [4.0]) + capped("nccl", 12.0))
        self.assertEqual([(r["purlin_us"], r["nccl_us"], r["blocks"]) for r in doc["rows"]], [(3.0, 4.0, None)])
        self.assertEqual([(r["purlin_us"], r["nccl_us"], r["blocks"]) for r in doc["capped"]], [(9.0, 12.0, 8)])
        self.assertIn("### allgather, eager, 1 process, at most 8 blocks", text)

    def test_rows_against_the_ceilings(self):
        # 512 MiB of AllGather (both directions busy) and of Broadcast (one), with the default
        # blocks (64) and AllGather at most 8: each against the push ceiling at its blocks.
        def big(lib, coll, busbw, blocks=""):
            size, t = 512 << 20, (512 << 20) / busbw / 1e3
            head = f"## RUN mode=eager lib={lib} coll={coll}{' blocks=' + blocks if blocks else ''} args: -g 2 -b 512M -e 512M\n"
            return (head + f"# purlin-perf {coll}: backend cuda\n#\n# Collective: {coll}\n#\n"
                    f"{size:12d} {size // 4:13d}     float     sum      -1 {t:8.2f} {busbw:7.2f} {busbw:7.2f}       0"
                    f" {t:8.2f} {busbw:7.2f} {busbw:7.2f}       0\n## EXIT {coll} status=0\n")
        ceilings = "# smbench\npush both 64 360.0\npush one 64 365.0\npush both 8 350.0\npull both 64 337.0\n"
        text, doc = self.compare(big("purlin", "allgather", 342.0) + big("purlin", "broadcast", 365.0) +
                                 big("purlin", "allgather", 175.0, "8"),
                                 big("nccl", "allgather", 270.0) + big("nccl", "broadcast", 360.0), ceilings=ceilings)
        got = {(r["coll"], r["blocks"]): r.get("of_ceiling") for r in doc["rows"] + doc["capped"]}
        self.assertEqual(got, {("allgather", None): 0.95, ("broadcast", None): 1.0, ("allgather", 8): 0.5})
        self.assertEqual(doc["ceilings"]["push both 64"], 360.0)
        self.assertIn("| allgather | eager | 1 | no | 64 | 512 | 342.0 | 360.0 | 0.95 |", text)
        _, plain = self.compare(big("purlin", "allgather", 342.0), big("nccl", "allgather", 270.0))
        self.assertNotIn("of_ceiling", plain["rows"][0], "no ceilings, no fractions")
        self.assertNotIn("ceilings", plain)

    def test_costs_of_a_communicator(self):
        args = "-g 2 -b 8 -e 8 -n 20 -w 2 -c 1"
        rows = [{"comm": "first", "purlin_s": 0.1, "nccl_s": 0.6, "purlin_mib": 320.0, "nccl_mib": 952.0},
                {"comm": "second", "purlin_s": 0.05, "nccl_s": 0.5, "purlin_mib": 134.0, "nccl_mib": 486.0}]
        text, doc = self.compare(run_block("purlin", "eager", args, "allreduce", [3.0]),
                                 run_block("nccl", "eager", args, "allreduce", [6.0]), costs={"rows": rows})
        self.assertEqual(doc["costs"], rows)
        self.assertIn("| first | 0.100 | 0.600 | 320.0 | 952.0 | 0.17 | 0.34 |", text)

    def test_earlier_runs_are_merged_and_later_rows_win(self):
        # A suite run in two parts: the first measured graph allreduce and the fused rows, the
        # second eager allreduce and graph allreduce again (its rows replace the first's).
        g = "-g 2 -b 8 -e 32 -f 4 -n 20 -w 2 -c 1 -G 10"
        e = "-g 2 -b 8 -e 8 -n 20 -w 2 -c 1"
        bench = {"rows": [{"hidden": 4096, "tokens": 1, "calls": 20, "fused_us": 5.0, "purlin_us": 9.0, "nccl_us": 15.0}]}
        first = lambda d: earlier_run(d, "first", "abc", run_block("purlin", "graph", g, "allreduce", [4.0, 5.0], wrong=1),
                                      run_block("nccl", "graph", g, "allreduce", [8.0, 10.0]), rmsnorm=bench)
        text, doc = self.compare(run_block("purlin", "eager", e, "allreduce", [3.0]) +
                                 run_block("purlin", "graph", g, "allreduce", [2.0, 2.5]),
                                 run_block("nccl", "eager", e, "allreduce", [6.0]), earlier=[first])
        rows = {(r["coll"], r["mode"], r["bytes"]): (r["purlin_us"], r["nccl_us"]) for r in doc["rows"]}
        self.assertEqual(rows, {("allreduce", "eager", 8): (3.0, 6.0), ("allreduce", "graph", 8): (2.0, 8.0),
                                ("allreduce", "graph", 32): (2.5, 10.0), ("allreduce_rmsnorm", "graph", 8192): (5.0, 15.0)})
        self.assertIn("Purlin graph: #wrong total 2, runs 2", text, "wrong values of every run count")

    def test_earlier_run_of_another_commit_is_refused(self):
        args = "-g 2 -b 8 -e 8 -n 20 -w 2 -c 1"
        block = lambda lib: run_block(lib, "eager", args, "allreduce", [3.0])
        other = lambda d: earlier_run(d, "other", "def", block("purlin"), block("nccl"))
        err, _ = self.compare(block("purlin"), block("nccl"), earlier=[other], status=2)
        self.assertIn("commit def", err)
        err, _ = self.compare(block("purlin"), block("nccl"), earlier=[lambda d: d], status=2)  # no COMMIT there
        self.assertIn("no COMMIT", err)


if __name__ == "__main__":
    unittest.main()
