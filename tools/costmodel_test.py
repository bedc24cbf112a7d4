"""Tests of tools/costmodel.py (python3 -m unittest tools/costmodel_test.py; tests/run.sh suite bench)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import costmodel  # noqa: E402

P = costmodel.PARAMS


class CostModelTest(unittest.TestCase):
    def test_one_node_is_nvlink_alone(self):
        # With one node no byte crosses the network: two node phases.
        s = 1 << 20
        want = 2 * (P["alpha_nvl"] + 7 / 8 * s / P["beta_nvl"])
        self.assertAlmostEqual(costmodel.purlin(1, 8, s, P, False), want)

    def test_one_gpu_a_node_is_the_rail_alone(self):
        s = 1 << 20
        ring = sum(costmodel.ring(4, s, P["alpha_net"], P["beta_net"]))
        tree = sum(costmodel.tree(4, s, P["alpha_net"], P["beta_net"]))
        self.assertAlmostEqual(costmodel.purlin(4, 1, s, P, False), min(ring, tree))

    def test_pipelining_never_slower_and_times_grow_with_size(self):
        for k in (2, 8, 64):
            last = 0.0
            for s in (8, 1 << 16, 1 << 24, 1 << 30):
                seq, pipe = costmodel.purlin(k, 8, s, P, False), costmodel.purlin(k, 8, s, P, True)
                self.assertLessEqual(pipe, seq + 1e-12)
                self.assertGreater(seq, last)
                last = seq

    def test_ring_bandwidth_term(self):
        lat, bw = costmodel.ring(4, 400, 1.0, 100.0)
        self.assertEqual(lat, 6.0)
        self.assertAlmostEqual(bw, 2 * 3 / 4 * 400 / 100.0)

    def test_ring_latency_counts_network_and_nvlink_hops(self):
        # 2 nodes of 4: of a ring's 8 hops 2 cross the network; an AllGather
        # runs 7 of them, one node's ring only NVLink hops.
        self.assertAlmostEqual(costmodel.ring_latency(2, 4, 7, P), 7 / 8 * (2 * P["alpha_net"] + 6 * P["hop_nvl"]))
        self.assertAlmostEqual(costmodel.ring_latency(1, 4, 3, P), 3 * P["hop_nvl"])
        self.assertEqual(costmodel.ring_latency(1, 1, 0, P), 0.0)

    def test_gather_one_node_and_one_gpu_a_node(self):
        s = 1 << 20
        want = P["alpha_nvl"] + 7 / 8 * s / P["beta_nvl"]
        self.assertAlmostEqual(costmodel.purlin_gather(1, 8, s, P, False), want)
        # One GPU a node: the rail alone, PAT's log2(K) steps beating the ring's K-1.
        lat, bw = costmodel.pat(16, s, P["alpha_net"], P["beta_net"])
        self.assertAlmostEqual(lat, 4 * P["alpha_net"])
        self.assertAlmostEqual(costmodel.purlin_gather(16, 1, s, P, False), lat + bw)

    def test_allgather_table(self):
        rows = costmodel.table([2, 8], 8, [8, 1 << 30], P, "allgather")
        self.assertEqual(len(rows), 4)
        self.assertIsNone(rows[0]["nccl_tree_us"])
        md = costmodel.markdown(rows)
        self.assertIn("| 2 x 8 | 8 B |", md)
        self.assertIn(" | - | ", md)  # NCCL has no tree AllGather

    def test_table_and_markdown(self):
        rows = costmodel.table([2], 8, [8, 1 << 30], P)
        self.assertEqual(len(rows), 2)
        md = costmodel.markdown(rows)
        self.assertIn("| 2 x 8 | 1 GiB |", md)


PERF = """## RUN mode=eager lib=purlin coll=allreduce args: -g 2
# purlin-perf allreduce: backend cuda, NCCL API version 22809, one process, one thread
# Collective: allreduce
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
           8             2     float     sum      -1    12.00    0.00    0.00       0    12.10    0.00    0.00       0
     1048576        262144     float     sum      -1    99.50   10.54   10.54       0    99.00   10.59   10.59       0
"""


class BesideTest(unittest.TestCase):
    def test_model_beside_a_run(self):
        import tempfile
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write(PERF)
        try:
            out = costmodel.beside(f.name, 2, 1, P)
        finally:
            os.unlink(f.name)
        lines = out.splitlines()
        self.assertEqual(len(lines), 4)
        self.assertTrue(lines[2].endswith("| 12.0 |"), lines[2])
        self.assertIn("| 1 MiB |", lines[3])
        self.assertTrue(lines[3].endswith("| 99.5 |"), lines[3])


if __name__ == "__main__":
    unittest.main()
