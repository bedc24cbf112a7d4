"""torch tensors on GPUs, a spawned process a rank (two ranks share a GPU where there is one);
skipped without torch and a GPU."""

from __future__ import annotations

import pytest

from cluster import Cluster

torch = pytest.importorskip("torch")
if not torch.cuda.is_available() or torch.cuda.device_count() < 1:
    pytest.skip("needs torch with a CUDA device", allow_module_level=True)

WORLD = 2
DTYPES = ["float32", "float16", "bfloat16", "int32", "float8_e4m3fn", "float8_e5m2"]


@pytest.fixture(scope="module")
def gpu_cluster(library):
    cluster = Cluster(WORLD, gpus="torch")
    yield cluster
    cluster.close()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("count", [7, 4099, 1 << 20])
def test_all_reduce(gpu_cluster, dtype, count):
    gpu_cluster.run("scenarios_torch.all_reduce", dtype, count, 1)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "uint8"])
@pytest.mark.parametrize("count", [5, 10000])
def test_copy_collectives(gpu_cluster, dtype, count):
    gpu_cluster.run("scenarios_torch.copies", dtype, count, 2)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_reduce_scatter_and_all_gather_v(gpu_cluster, dtype):
    gpu_cluster.run("scenarios_torch.reduce_scatter_and_v", dtype, 3)


def test_cuda_graph_capture_and_replay(gpu_cluster):
    gpu_cluster.run("scenarios_torch.graph_capture_replay", 4)


def test_explicit_stream(gpu_cluster):
    gpu_cluster.run("scenarios_torch.explicit_stream", 5)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_all_reduce_rmsnorm(gpu_cluster, dtype):
    gpu_cluster.run("scenarios_epilogue.rmsnorm_torch_gpu", dtype, 6)


def test_bad_inputs(gpu_cluster):
    for messages in gpu_cluster.run("scenarios_torch.bad_inputs"):
        assert "host memory" in messages["cpu_tensor"] and "cuda:" in messages["cpu_tensor"]
        assert "host memory" in messages["numpy"]
        assert "contiguous" in messages["non_contiguous"]
        assert "send is float32 but recv is float16" in messages["dtype_mismatch"]
        assert "world_size x send" in messages["all_gather_size"]
        if "other_gpu" in messages:
            assert "but this communicator uses cuda:" in messages["other_gpu"]


def test_fresh_thread_device(gpu_cluster):
    gpu_cluster.run("scenarios_torch.fresh_thread", 7)
