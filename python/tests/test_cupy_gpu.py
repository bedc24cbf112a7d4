"""CuPy arrays on GPUs, a spawned process a rank (two ranks share a GPU where there is one);
skipped without CuPy and a GPU."""

from __future__ import annotations

import pytest

from cluster import Cluster

cupy = pytest.importorskip("cupy")
try:
    GPUS = cupy.cuda.runtime.getDeviceCount()
except Exception:  # no driver
    GPUS = 0
if GPUS < 1:
    pytest.skip("needs CuPy with a CUDA device", allow_module_level=True)


@pytest.fixture(scope="module")
def gpu_cluster(library):
    cluster = Cluster(2, gpus="cupy")
    yield cluster
    cluster.close()


@pytest.mark.parametrize("dtype", ["float32", "float16", "int64"])
@pytest.mark.parametrize("count", [3, 5000])
def test_all_reduce_and_all_gather(gpu_cluster, dtype, count):
    gpu_cluster.run("scenarios_cupy.all_reduce_and_gather", dtype, count, 1)


def test_bad_inputs(gpu_cluster):
    for messages in gpu_cluster.run("scenarios_cupy.bad_inputs"):
        assert "host memory" in messages["numpy"]
        assert "contiguous" in messages["non_contiguous"]
