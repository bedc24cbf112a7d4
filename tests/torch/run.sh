#!/usr/bin/env bash
# tests/torch/run.sh [LIBRARY]: an unchanged torch.distributed program (nccl
# backend, 2 processes, one GPU each; check_torch.py) started with
# LD_PRELOAD=LIBRARY. Default build/nccl-so/libnccl.so.2 (SONAME libnccl.so.2,
# so the real NCCL never satisfies torch's NEEDED), else build/libpurlin.so.
#   TORCH_BACKEND=gloo  the harness self-check on the CPU (no GPU, no Purlin)
#   TORCH_BASELINE=1    the same cases on the real NCCL (no preload)
#   TORCH_NRANKS=N (default 2)   TORCH_CASES=REGEX (the cases whose names it finds)   PYTHON=... (python3)
#   TORCH_START=fork    ranks forked from the launcher (which has Purlin mapped, uncalled) instead of spawned
# The log goes to $PURLIN_DROPIN_LOGS/torch-<backend>.log (default build/dropin-logs/), one
# stderr file per rank beside it. Exit status 0 only if every check passed.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
lib="${1:-}"
if [[ -z "$lib" ]]; then
  lib="$root/build/nccl-so/libnccl.so.2"
  [[ -f "$lib" ]] || lib="$root/build/libpurlin.so"
fi
out="${PURLIN_DROPIN_LOGS:-$root/build/dropin-logs}"
mkdir -p "$out"
backend="${TORCH_BACKEND:-nccl}"
args=(--backend "$backend" --nranks "${TORCH_NRANKS:-2}" --logdir "$out" --cases "${TORCH_CASES:-}" --start "${TORCH_START:-spawn}")
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 PURLIN_TIMEOUT="${PURLIN_TIMEOUT:-60}"
preload=()
if [[ "${TORCH_BASELINE:-0}" == 1 ]]; then
  args+=(--baseline)
  log="$out/torch-$backend-baseline.log"
elif [[ "$backend" == nccl ]]; then
  [[ -f "$lib" ]] || { echo "torch: no library at $lib (make nccl-so-cuda)"; exit 2; }
  lib="$(realpath "$lib")"
  readelf -d "$lib" 2>/dev/null | grep -E SONAME
  export PURLIN_DROPIN_LIBRARY="$lib" PURLIN_DEBUG="${PURLIN_DEBUG:-INFO}"
  preload=(env "LD_PRELOAD=$lib${LD_PRELOAD:+:$LD_PRELOAD}")
  log="$out/torch-$backend.log"
else
  log="$out/torch-$backend.log"
fi
[[ "${TORCH_START:-spawn}" == fork ]] && log="${log%.log}-fork.log"

source "$root/tests/common/client.sh"
run_client torch 570 40 "$log" "^(torch|  )" "${preload[@]}" "${PYTHON:-python3}" "$root/tests/torch/check_torch.py" "${args[@]}"
