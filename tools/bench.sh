#!/usr/bin/env bash
# tools/bench.sh: what `make bench` runs. On a machine with NVIDIA GPUs and a
# CUDA build of Purlin (build/gpu/lib/libpurlin.so, from `make gpu-tests`):
# purlin-perf on the CUDA Atom over every GPU (tests/gpu/ngpus.sh), and the same
# program on NCCL beside it when tests/gpu/build-perf.sh finds NCCL. Elsewhere:
# build/purlin-perf on the host Atom with BENCH_ARGS. Both argument lists
# (BENCH_GPU_ARGS: all but -g) come from cmd/purlin-perf/perf.mk. Either way the outputs go
# to build/bench-purlin.txt (and build/bench-nccl.txt), tools/perfplot.py draws
# build/bench.svg, and the last line is its one-line verdict.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
root=$PWD out=build
rm -f "$out/bench-purlin.txt" "$out/bench-nccl.txt"
if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU ' && [[ -f $root/build/gpu/lib/libpurlin.so ]]; then
  gpu="$root/build/gpu" bin="$root/build/gpu/bin"
  mkdir -p "$bin" && rm -f "$bin/perf-purlin" "$bin/perf-nccl" # never a stale build
  source "$root/tests/gpu/ngpus.sh"
  source "$root/tests/gpu/build-perf.sh" # $bin/perf-purlin, and $bin/perf-nccl where NCCL is found; log in $out/env.log
  [[ -x $bin/perf-purlin ]] || { echo "bench: FAIL: could not build purlin-perf for CUDA (see $out/env.log)"; exit 1; }
  # shellcheck disable=SC2206 # BENCH_GPU_ARGS holds several words
  args=(all -g "$NGPUS" ${BENCH_GPU_ARGS:?set by make bench})
  echo "bench: CUDA Atom, $NGPUS GPUs: purlin-perf ${args[*]}"
  "$bin/perf-purlin" "${args[@]}" | tee "$out/bench-purlin.txt"
  status=${PIPESTATUS[0]}
  if [[ -x $bin/perf-nccl ]]; then
    echo "bench: the same on NCCL ($nccl_lib)"
    "$bin/perf-nccl" "${args[@]}" | tee "$out/bench-nccl.txt"
    s=${PIPESTATUS[0]}
    (( status == 0 )) && status=$s
  fi
else
  # shellcheck disable=SC2086 # BENCH_ARGS holds several words
  PURLIN_ATOM=host "$out/purlin-perf" ${BENCH_ARGS:?set by make bench} | tee "$out/bench-purlin.txt"
  status=${PIPESTATUS[0]}
fi
python3 tools/perfplot.py "$out/bench-purlin.txt" "$out/bench-nccl.txt" -o "$out/bench.svg" --verdict --status "$status"
