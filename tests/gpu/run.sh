#!/usr/bin/env bash
# tests/gpu/run.sh: what the GPU machine runs (it has no Go). Build here first:
#   make gpu-tests        # build/kernels.fatbin and build/gpu/cuda.test (tag cudakernels)
# then, on the GPU machine, with build/ carried:  bash tests/gpu/run.sh
# Logs go to $OUT (or build/gpu/logs). NVLink multicast stays off.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${OUT:-$root/build/gpu/logs}"
mkdir -p "$out"
bin="$root/build/gpu/cuda.test"
fail=0

{
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
  nvidia-smi topo -m
  nvcc --version 2>/dev/null | tail -2
  cuobjdump --list-elf "$root/build/kernels.fatbin" 2>/dev/null
} >"$out/env.log" 2>&1
cat "$out/env.log"

# The whole suite, verbose (skips name what is missing).
(cd "$root/atom/cuda" && timeout "${GPU_TEST_TIMEOUT:-240}" "$bin" -test.v -test.count=1 -test.timeout 230s) \
  >"$out/cuda-test.log" 2>&1 || fail=1
grep -E "^(--- |PASS|FAIL|ok|panic)|_test.go|SPEED" "$out/cuda-test.log" | tail -40

# compute-sanitizer memcheck on a reduced set (a few cases; it is slow).
if [[ "${GPU_SANITIZE:-1}" == 1 ]] && command -v compute-sanitizer >/dev/null; then
  (cd "$root/atom/cuda" && timeout 180 compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$bin" -test.run 'TestGPURepeatedCalls|TestGPUPeerNeverComes|TestGPUGatherAndScatter' -test.count=1) \
    >"$out/memcheck.log" 2>&1 || fail=1
  tail -15 "$out/memcheck.log"
fi
echo "gpu tests: $([[ $fail == 0 ]] && echo PASS || echo FAIL)"
exit $fail
