#!/usr/bin/env bash
# tests/cupy/run.sh [LIBRARY]: CuPy's NCCL clients (the binding cupy.cuda.nccl and
# cupyx.distributed's NCCLBackend; check_cupy.py) on Purlin, started with
# LD_PRELOAD=LIBRARY: CuPy links libnccl.so.2, and the preloaded build/nccl-so has
# that SONAME, so the loader never loads the real one for it.
# Default LIBRARY build/nccl-so/libnccl.so.2 (make nccl-so-cuda).
#   CUPY_NRANKS=N    ranks, as processes, rank r on GPU r % GPUs (default 2; ranks share a
#                    GPU where there are fewer)
#   CUPY_BASELINE=1  the same cases on the real NCCL (no preload; one rank per GPU at most)
#   CUPY_CASES=REGEX only the cases whose names it finds        PYTHON=... (python3)
# The log goes to $PURLIN_DROPIN_LOGS/cupy[-baseline].log (default build/dropin-logs/), one
# stderr file per rank beside it. Exit status 0 only if every check passed.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
lib="$(realpath "${1:-$root/build/nccl-so/libnccl.so.2}")"
out="${PURLIN_DROPIN_LOGS:-$root/build/dropin-logs}"
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 PURLIN_TIMEOUT="${PURLIN_TIMEOUT:-60}"
args=(--nranks "${CUPY_NRANKS:-2}" --logdir "$out" --cases "${CUPY_CASES:-}" --timeout 230)
preload=()
if [[ "${CUPY_BASELINE:-0}" == 1 ]]; then
  args+=(--baseline)
  source "$root/tests/gpu/find-nccl.sh"  # the machine's real NCCL, where CuPy would not find it alone
  preload=(env "LD_LIBRARY_PATH=$nccl_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
  log="$out/cupy-baseline.log"
else
  [[ -f "$lib" ]] || { echo "cupy: no library at $lib (make nccl-so-cuda)"; exit 2; }
  args+=(--library "$lib")
  preload=(env "LD_PRELOAD=$lib${LD_PRELOAD:+:$LD_PRELOAD}" PURLIN_DEBUG="${PURLIN_DEBUG:-INFO}")
  log="$out/cupy.log"
fi
source "$root/tests/common/client.sh"
run_client cupy 250 30 "$log" "^(cupy|  )" "${preload[@]}" "${PYTHON:-python3}" "$root/tests/cupy/check_cupy.py" "${args[@]}"
