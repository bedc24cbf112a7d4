#!/usr/bin/env bash
# tests/pynccl/run.sh [LIBRARY]: the vLLM-style ctypes client (check_pynccl.py)
# on Purlin, 2 ranks as spawned processes, one GPU each. LIBRARY is loaded by
# path, never preloaded; default build/nccl-so/libnccl.so.2, else build/libpurlin.so.
#   PYNCCL_MODE=host  numpy buffers on Purlin's host datapath (no GPU needed)
#   PYNCCL_NRANKS=N   ranks (default 2)      PYTHON=...  interpreter (python3)
#   PYNCCL_BASELINE=1 LIBRARY is another NCCL (say the real libnccl.so.2): same
#                     cases, no Purlin proof; tells a wrong test from a wrong Purlin
# The log goes to $PURLIN_DROPIN_LOGS/pynccl.log (default build/dropin-logs/), with one
# stderr file per rank beside it. Exit status 0 only if every check passed.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
lib="${1:-}"
if [[ -z "$lib" ]]; then
  lib="$root/build/nccl-so/libnccl.so.2"  # one build (make nccl-so-cuda) serves both drop-in tests
  [[ -f "$lib" ]] || lib="$root/build/libpurlin.so"
fi
out="${PURLIN_DROPIN_LOGS:-$root/build/dropin-logs}"
mkdir -p "$out"
mode="${PYNCCL_MODE:-cuda}"
baseline=()
[[ "${PYNCCL_BASELINE:-0}" == 1 ]] && baseline=(--baseline)
log="$out/pynccl-$mode${baseline:+-baseline}.log"
export NCCL_NVLS_ENABLE=0 PURLIN_DEBUG="${PURLIN_DEBUG:-INFO}" PURLIN_TIMEOUT="${PURLIN_TIMEOUT:-60}"
unset LD_PRELOAD  # this client loads Purlin by path, as vLLM does with VLLM_NCCL_SO_PATH

source "$root/tests/common/client.sh"
run_client pynccl 560 40 "$log" "^pynccl" "${PYTHON:-python3}" "$root/tests/pynccl/check_pynccl.py" --library "$lib" --mode "$mode" \
  --nranks "${PYNCCL_NRANKS:-2}" --logdir "$out" --timeout 500 "${baseline[@]}"
