#!/usr/bin/env bash
# tests/gpu/engine.sh: the copy engine (PURLIN_COPY_ENGINE) against thread blocks and NCCL, on a
# machine with at least two NVIDIA GPUs and a CUDA driver, after `make gpu-tests` (about 10 minutes
# at 2 GPUs). Not part of run.sh: it decides PURLIN_COPY_ENGINE's default and its workers and
# chunk. Parts, each in $PURLIN_GPU_LOGS (default build/gpu/logs):
#   cebench.txt       tests/gpu/cebench.cu: the copy engine's ceiling (one copy, chunks on 1-4 streams)
#   engine-test.log   cuda.test TestGPUCopyEngine (every copy collective, reduction and transfer, on
#                     and off the engine, queued without waits) and TestGPUDirect (pushes into
#                     outputs in windows, in blocks and on the engine)
#   engine-eager.txt  purlin-perf 64 MiB-1 GiB, eager: NCCL, Purlin in blocks, Purlin on the engine
#                     from ENGINE_FROM bytes (default 16 MiB), for every collective the engine serves
#   engine-graph.txt  the same in CUDA graphs (-G 3), Purlin only
#   engine-settings.txt  AllGather and AllReduce on the engine at 1, 3 and 4 workers and 4 or 32 MiB chunks
#   engine-registered.txt  buffers in symmetric windows (-R 1), eager: NCCL, Purlin pushing into the
#                     outputs in blocks, and on the engine (the copy collectives and AllReduce)
#   engine-procs.txt  one process a GPU (-m 1), eager: NCCL, Purlin in blocks, on the engine
# Each line: collective, library, engine setting, extra arguments, bytes, then time (us), busbw
# (GB/s) and #wrong out of place and in place, and the run's exit status; a run that fails adds a
# line with its last messages, and every run's whole output is in raw/. NGPUS as in run.sh. NVLink
# multicast stays off. A wait that hangs fails within PURLIN_TIMEOUT (20 s here), naming its step.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 PURLIN_TIMEOUT="${PURLIN_TIMEOUT:-20}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${PURLIN_GPU_LOGS:-$root/build/gpu/logs}"
gpu="$root/build/gpu"
bin="$gpu/bin"
mkdir -p "$out/raw" "$bin"
source "$root/tests/gpu/ngpus.sh"
source "$root/tests/gpu/build-perf.sh" || { echo "build failed: $out/env.log"; exit 1; }
from="${ENGINE_FROM:-16777216}"

# ENGINE_PARTS: which parts run (default all, about 10 minutes), named as the files they write:
# cebench test eager graph settings registered procs.
parts=" ${ENGINE_PARTS:-cebench test eager graph settings registered procs} "
part() { [[ $parts == *" $1 "* ]]; }

if part cebench; then
  nvcc -std=c++17 -O3 -arch=sm_90 -o "$bin/cebench" "$root/tests/gpu/cebench.cu" &&
    timeout 90 "$bin/cebench" 1024 >"$out/cebench.txt" 2>&1
fi
if part test; then
  (cd "$root/atom/cuda" && timeout 180 "$gpu/cuda.test" -test.run 'GPUCopyEngine|GPUDirect' -test.timeout 170s -test.v) >"$out/engine-test.log" 2>&1
  grep -E "^(--- |ok|FAIL)" "$out/engine-test.log"
fi

# perf LIB COLL [ARGS]: one purlin-perf run, one line per size (PURLIN_COPY_ENGINE as set).
perf() {
  local lib=$1 c=$2; shift 2
  local e="${PURLIN_COPY_ENGINE:-0}" tag
  tag="$lib-$c-$e-${PURLIN_COPY_ENGINE_WORKERS:-d}-${PURLIN_COPY_ENGINE_CHUNK:-d}$(echo "$*" | tr -c 'A-Za-z0-9\n' _)"
  timeout 120 "$bin/perf-$lib" "$c" -g "$NGPUS" -b 64M -e 1G -f 4 -n 5 -w 2 "$@" >"$out/raw/$tag.log" 2>&1
  local rc=$?
  grep -E "^ +[0-9]" "$out/raw/$tag.log" |
    awk -v l="$lib" -v c="$c" -v a="$*" -v e="$e" -v rc="$rc" '{print c, l, "engine=" e, a, $1, $6, $8, $9, $10, $12, $13, "rc=" rc}'
  if ((rc != 0)); then
    echo "$c $lib engine=$e $* rc=$rc: $(grep -vE '^#|^ +[0-9]' "$out/raw/$tag.log" | tail -3 | tr '\n' ' ')"
  fi
}
if part eager; then
  for c in allreduce allgather reducescatter alltoall broadcast reduce sendrecv gather scatter; do
    perf nccl "$c"
    perf purlin "$c"
    PURLIN_COPY_ENGINE=$from perf purlin "$c"
  done | tee "$out/engine-eager.txt"
fi
if part graph; then
  for c in allreduce allgather reducescatter broadcast sendrecv; do
    perf purlin "$c" -G 3
    PURLIN_COPY_ENGINE=$from perf purlin "$c" -G 3
  done | tee "$out/engine-graph.txt"
fi
if part settings; then
  for w in 1 3 4; do
    for chunk in 4194304 33554432; do
      for c in allgather allreduce; do
        PURLIN_COPY_ENGINE=$from PURLIN_COPY_ENGINE_WORKERS=$w PURLIN_COPY_ENGINE_CHUNK=$chunk perf purlin "$c" | sed "s/\$/ workers=$w chunk=$chunk/"
      done
    done
  done | tee "$out/engine-settings.txt"
fi
if part registered; then
  for c in allgather broadcast scatter allreduce; do
    perf nccl "$c" -R 1
    perf purlin "$c" -R 1
    PURLIN_COPY_ENGINE=$from perf purlin "$c" -R 1
  done | tee "$out/engine-registered.txt"
fi
if part procs; then
  for c in allgather allreduce reducescatter alltoall broadcast sendrecv; do
    perf nccl "$c" -m 1
    perf purlin "$c" -m 1
    PURLIN_COPY_ENGINE=$from perf purlin "$c" -m 1
  done | tee "$out/engine-procs.txt"
fi
