#!/usr/bin/env bash
# tests/gpu/extended.sh: the GPU checks beyond tests/gpu/run.sh, for the GPU
# machine (no Go there). Build here first:
#   make gpu-tests nccl-so-cuda
# then there, with build/ carried:  bash tests/gpu/extended.sh
# Parts, each under its own timeout, continuing after a failure:
#   dtypes     purlin-perf on Purlin, every collective x every dtype x every op,
#              -g $NGPUS, eager and CUDA-graph, odd and even sizes, -c 1
#   mproc      the same, every dtype, $NGPUS processes (cuMem fds over SCM_RIGHTS)
#   racecheck  compute-sanitizer racecheck on a small all-reduce, then on difftest's
#              random programs on one rank (racecheck-difftest)
#   memcheck-epilogue  compute-sanitizer memcheck on allreduce_rmsnorm, 16 KiB-16 MiB
#   python     python/tests with torch tensors and CuPy arrays, two ranks (sharing a GPU where
#              there is one; issue 5)
#   torch      tests/torch/run.sh: torch.distributed (nccl) under LD_PRELOAD (issue 4)
#   torch-fork the same with the ranks forked from a launcher that has Purlin mapped, uncalled
#   pynccl     tests/pynccl/run.sh: the vLLM-style ctypes client (issue 4)
#   cupy       tests/cupy/run.sh: CuPy's binding and cupyx.distributed under LD_PRELOAD, ranks
#              forked as CuPy's own tests fork them; then on the real NCCL (reported, not judged)
#   shared     8 ranks on GPU 0 alone (CUDA_VISIBLE_DEVICES=0), which cap their blocks so that
#              every rank's kernel fits on its SMs: every collective x dtype x op eager, the V forms,
#              column blocks and the fused epilogue, and graphs (the 8-rank Plans on real kernels
#              wherever the machine has fewer GPUs)
#   nodes      PURLIN_NODES=2: the GPUs as 2 virtual nodes, calls between them on
#              NCCL's network forced onto sockets (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1),
#              purlin-perf -c 1 beside NCCL alone under the same setting (2+ GPUs, even count),
#              and Purlin's own collectives (V forms, column blocks, the fused epilogue),
#              integer means and registered windows alone
#   nccl-tests NVIDIA's nccl-tests on the drop-in and beside NCCL (tests/nccltests/run.sh,
#              NCCL_TESTS_BUDGET_S, default 300), where tests/nccltests/build.sh built them
# $PURLIN_GPU_LOGS/extended/ (default build/gpu/logs/extended) gets summary.txt, env.log, perf-dtypes.txt, perf-mproc-dtypes.txt,
# racecheck.log, racecheck-difftest.log, memcheck-epilogue.log, python.log, dropin.tgz, perf-shared.txt, nodes-purlin.txt, nodes-nccl.txt, nodes-purlin-only.txt, nodes-model.md.
# NGPUS (default: every GPU listed, tests/gpu/ngpus.sh) is the rank count of
# purlin-perf and of the torch and pynccl drop-in runs.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PURLIN_TIMEOUT="${PURLIN_TIMEOUT:-30}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${PURLIN_GPU_LOGS:-$root/build/gpu/logs}/extended"  # beside run.sh's files, not over them
gpu="$root/build/gpu"
bin="$gpu/bin"
mkdir -p "$out" "$bin"
summary="$out/summary.txt"
: >"$summary"
fail=0
note() { echo "$*" | tee -a "$summary"; }
verdict() { # verdict NAME STATUS [detail]
  if [[ $2 == 0 ]]; then note "PASS $1 ${3:-}"; else note "FAIL $1 (status $2) ${3:-}"; fail=1; fi
}
wrong() { grep -h "Out of bounds" "$1" | sort | uniq -c | tr -s ' ' | tr '\n' ';'; }

{ date -u; nvidia-smi --query-gpu=index,name,driver_version --format=csv; } >"$out/env.log" 2>&1
source "$root/tests/gpu/ngpus.sh"
echo "NGPUS=$NGPUS" >>"$out/env.log"
source "$root/tests/gpu/build-perf.sh"
verdict build $? "(purlin-perf on Purlin; env.log)"

# ---------- dtypes: every collective x dtype x op, eager and graph ----------
f="$out/perf-dtypes.txt"; : >"$f"; s=0
for mode in eager graph; do
  g=(); [[ $mode == graph ]] && g=(-G 4)
  for c in allreduce allgather reducescatter alltoall broadcast reduce gather scatter sendrecv allgatherv reducescatterv alltoallv; do
    echo "## RUN $mode $c" >>"$f"
    timeout 40 "$bin/perf-purlin" "$c" -g "$NGPUS" -d all -o all -b 3 -e 3M -f 37 -n 2 -w 1 -c 1 "${g[@]}" >>"$f" 2>&1 || { s=1; note "FAIL dtypes $mode $c"; }
  done
done
verdict dtypes $s "($(wrong "$f"))"

# ---------- mproc: every dtype, NGPUS processes ----------
f="$out/perf-mproc-dtypes.txt"
PURLIN_DEBUG=INFO timeout 90 "$bin/perf-purlin" all -g "$NGPUS" -m 1 -d all -b 5 -e 5M -f 97 -n 2 -w 1 -c 1 >"$f" 2>&1
verdict mproc-dtypes $? "($(wrong "$f"))"

# ---------- racecheck ----------
timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 \
  "$bin/perf-purlin" allreduce -g "$NGPUS" -b 8 -e 256K -f 64 -n 1 -w 1 -c 1 >"$out/racecheck.log" 2>&1
verdict racecheck $? "($(grep -m1 "ERROR SUMMARY\|RACECHECK SUMMARY" "$out/racecheck.log"))"
# The same over difftest's random programs on one rank (every collective, type
# and op, graphs, odd sizes): slowed by the tool, waits spin long enough to take
# the block's look at the abort and status words (flags.cuh), which plain
# shared stores made a reported race.
PURLIN_TIMEOUT=60 timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 python3 "$root/tests/diff/difftest.py" \
  --device cuda --procs 1 --nranks 1 --libs "purlin=$gpu/lib/libpurlin.so" --seed 301 --programs 25 --timeout 110 \
  >"$out/racecheck-difftest.log" 2>&1
verdict racecheck-difftest $? "($(grep -m1 "RACECHECK SUMMARY" "$out/racecheck-difftest.log"))"

# ---------- memcheck of the fused epilogue ----------
# Rows of 8192 from one a block (two vectors a thread) to 16 a block (a
# warp a row, the loop of four vectors), checked against the host.
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 \
  "$bin/perf-purlin" allreduce_rmsnorm -g "$NGPUS" -d bfloat16 -H 8192 -b 16K -e 16M -f 4 -n 2 -w 1 -c 1 >"$out/memcheck-epilogue.log" 2>&1
verdict memcheck-epilogue $? "($(grep -m1 "ERROR SUMMARY" "$out/memcheck-epilogue.log"))"

# ---------- python package on GPUs ----------
PURLIN_LIBRARY="$gpu/lib/libpurlin.so" PYTHONPATH="$root/python" timeout 150 \
  python3 -m pytest -q -x -p no:cacheprovider "$root/python/tests/test_torch_gpu.py" "$root/python/tests/test_cupy_gpu.py" >"$out/python.log" 2>&1
s=$?
# pytest's 5: nothing ran (no torch, no CuPy, or no GPU they see).
if [[ $s == 5 ]]; then note "SKIP python ($(tail -1 "$out/python.log"))"; else verdict python $s "($(tail -1 "$out/python.log"))"; fi

# ---------- drop-in: torch under LD_PRELOAD, vLLM-style ctypes client ----------
mkdir -p "$gpu/dropin"
TORCH_NRANKS=$NGPUS PURLIN_DROPIN_LOGS="$gpu/dropin" timeout 150 bash "$root/tests/torch/run.sh" "$root/build/nccl-so/libnccl.so.2" >"$gpu/dropin/torch-run.txt" 2>&1
verdict torch $? "($(tail -1 "$gpu/dropin/torch-run.txt"))"
TORCH_START=fork TORCH_NRANKS=$NGPUS PURLIN_DROPIN_LOGS="$gpu/dropin" timeout 150 bash "$root/tests/torch/run.sh" "$root/build/nccl-so/libnccl.so.2" >"$gpu/dropin/torch-fork-run.txt" 2>&1
verdict torch-fork $? "($(tail -1 "$gpu/dropin/torch-fork-run.txt"))"
PYNCCL_NRANKS=$NGPUS PURLIN_DROPIN_LOGS="$gpu/dropin" timeout 120 bash "$root/tests/pynccl/run.sh" "$root/build/nccl-so/libnccl.so.2" >"$gpu/dropin/pynccl-run.txt" 2>&1
verdict pynccl $? "($(tail -1 "$gpu/dropin/pynccl-run.txt"))"
# CuPy's clients: at least 2 ranks (sharing a GPU where there is one), beside the real NCCL at one per GPU.
CUPY_NRANKS=$(( NGPUS > 2 ? NGPUS : 2 )) PURLIN_DROPIN_LOGS="$gpu/dropin" timeout 260 bash "$root/tests/cupy/run.sh" "$root/build/nccl-so/libnccl.so.2" >"$gpu/dropin/cupy-run.txt" 2>&1
verdict cupy $? "($(tail -1 "$gpu/dropin/cupy-run.txt"))"
CUPY_BASELINE=1 CUPY_NRANKS=$NGPUS PURLIN_DROPIN_LOGS="$gpu/dropin" timeout 260 bash "$root/tests/cupy/run.sh" >"$gpu/dropin/cupy-baseline-run.txt" 2>&1
note "BASELINE cupy on NCCL: status $? ($(grep -E '^cupy \(' "$gpu/dropin/cupy-baseline-run.txt" | tail -1))"
tar -czf "$out/dropin.tgz" -C "$gpu" dropin

# ---------- shared: 8 ranks on one GPU ----------
# A rank's kernel waits for its peers' kernels, so all must be on the SMs at
# once: ranks sharing a GPU get at most SMs / 8 blocks each and launch
# without programmatic dependent launch, by themselves (cuda.Rank.shareDevices).
f="$out/perf-shared.txt"; : >"$f"; s=0
shared() { echo "## RUN shared $*" >>"$f"; CUDA_VISIBLE_DEVICES=0 PURLIN_DEBUG=INFO timeout 60 "$bin/perf-purlin" "$@" -g 8 -n 1 -w 1 -c 1 >>"$f" 2>&1 || { s=1; note "FAIL shared $*"; }; }
shared all -d all -o all -b 3 -e 3M -f 37
for c in allgatherv reducescatterv alltoallv alltoallmatrix allgathercolumns reducescattercolumns; do shared "$c" -b 64 -e 64M -f 16; done
shared allreduce_rmsnorm -d bfloat16 -H 4096 -b 8K -e 16M -f 8
shared all -b 8 -e 1M -f 8 -G 3
verdict shared $s "($(wrong "$f"); the blocks and dependent launch each rank chose: grep 'share a device' $f)"

# ---------- nodes: 2 virtual nodes, NCCL's network between them ----------
if (( NGPUS >= 2 && NGPUS % 2 == 0 )); then
  s=0
  for c in allreduce allgather reducescatter alltoall broadcast reduce gather scatter sendrecv; do
    for lib in purlin nccl; do
      echo "## RUN nodes $lib $c" >>"$out/nodes-$lib.txt"
      PURLIN_NODES=2 PURLIN_NCCL_LIBRARY="$nccl_lib/libnccl.so.2" NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 timeout 60 \
        "$bin/perf-$lib" "$c" -g "$NGPUS" -b 8 -e 64M -f 8 -n 5 -w 1 -c 1 >>"$out/nodes-$lib.txt" 2>&1 || { s=1; note "FAIL nodes $lib $c"; }
    done
  done
  # Purlin alone: the V forms, the column-block and per-pair all-to-alls and the fused
  # epilogue (NCCL has none of them), and AllReduce whole (PURLIN_NET_CHUNK=0) beside the
  # pipelined run above.
  for c in allgatherv reducescatterv alltoallv alltoallmatrix allgathercolumns reducescattercolumns allreduce_rmsnorm; do
    echo "## RUN nodes purlin $c" >>"$out/nodes-purlin-only.txt"
    PURLIN_NODES=2 PURLIN_NCCL_LIBRARY="$nccl_lib/libnccl.so.2" NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 timeout 60 \
      "$bin/perf-purlin" "$c" -g "$NGPUS" -b 8 -e 64M -f 8 -n 5 -w 1 -c 1 >>"$out/nodes-purlin-only.txt" 2>&1 || { s=1; note "FAIL nodes purlin $c"; }
  done
  # Integer means (the rails sum first, the node divides; with one GPU a node the rail's own
  # Avg) and windows registered across nodes (-R 1).
  for c in allreduce reducescatter reduce; do
    echo "## RUN nodes purlin $c int32 avg" >>"$out/nodes-purlin-only.txt"
    PURLIN_NODES=2 PURLIN_NCCL_LIBRARY="$nccl_lib/libnccl.so.2" NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 timeout 60 \
      "$bin/perf-purlin" "$c" -g "$NGPUS" -d int32 -o avg -b 8 -e 16M -f 8 -n 5 -w 1 -c 1 >>"$out/nodes-purlin-only.txt" 2>&1 || { s=1; note "FAIL nodes purlin $c int32 avg"; }
  done
  echo "## RUN nodes purlin allreduce, registered windows" >>"$out/nodes-purlin-only.txt"
  PURLIN_NODES=2 PURLIN_NCCL_LIBRARY="$nccl_lib/libnccl.so.2" NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 timeout 60 \
    "$bin/perf-purlin" allreduce -g "$NGPUS" -R 1 -b 8 -e 16M -f 8 -n 5 -w 1 -c 1 >>"$out/nodes-purlin-only.txt" 2>&1 || { s=1; note "FAIL nodes purlin allreduce registered"; }
  echo "## RUN nodes purlin allreduce, PURLIN_NET_CHUNK=0" >>"$out/nodes-purlin-only.txt"
  PURLIN_NET_CHUNK=0 PURLIN_NODES=2 PURLIN_NCCL_LIBRARY="$nccl_lib/libnccl.so.2" NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 timeout 60 \
    "$bin/perf-purlin" allreduce -g "$NGPUS" -b 1M -e 64M -f 4 -n 5 -w 1 -c 1 >>"$out/nodes-purlin-only.txt" 2>&1 || { s=1; note "FAIL nodes purlin allreduce whole"; }
  python3 "$root/tools/costmodel.py" --nodes 2 --local $((NGPUS / 2)) --perf "$out/nodes-purlin.txt" >"$out/nodes-model.md" 2>&1
  verdict nodes $s "($(wrong "$out/nodes-purlin.txt") $(wrong "$out/nodes-purlin-only.txt"); nodes-purlin.txt beside nodes-nccl.txt, the V forms and AllReduce unpipelined in nodes-purlin-only.txt, the model in nodes-model.md)"
else note "SKIP nodes (needs an even number of GPUs, at least 2)"; fi

# ---------- nccl-tests: NVIDIA's own test programs on the drop-in ----------
if [[ -x ${NCCL_TESTS_BUILD:-$root/build/nccl-tests}/all_reduce_perf ]]; then
  NCCL_TESTS_BUDGET_S=${NCCL_TESTS_BUDGET_S:-300} timeout 330 bash "$root/tests/nccltests/run.sh" "$out/nccl-tests" >"$out/nccl-tests.txt" 2>&1
  verdict nccl-tests $? "($(tail -1 "$out/nccl-tests.txt"); $out/nccl-tests/summary.txt)"
else note "SKIP nccl-tests (not built: tests/nccltests/build.sh)"; fi

echo "extended gpu suite: $([[ $fail == 0 ]] && echo PASS || echo FAIL)" | tee -a "$summary"
exit $fail
