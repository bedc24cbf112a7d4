#!/usr/bin/env bash
# tests/c/run.sh BUILD_DIR: runs the C suites, each under its own timeout, and
# prints one closing line "c: N passed, M failed" (counting tests, not binaries).
# Suites run on the host Atom unless PURLIN_ATOM says otherwise.
set -u
dir=${1:?usage: run.sh BUILD_DIR}
export PURLIN_ATOM=${PURLIN_ATOM:-host}
passed=0 failed=0
run_suite() { # name limit_s [env...]
  local name=$1 limit=$2; shift 2
  local log; log=$(mktemp)
  echo "== c/$name"
  env "$@" timeout -k 5 "$limit" "$dir/$name" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  local p f
  p=$(grep -c '^PASS ' "$log"); f=$(grep -c '^FAIL ' "$log")
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    echo "FAIL c/$name: exited $rc${rc:+ }$( [ "$rc" -eq 124 ] && echo '(timeout)')"
    f=1
  fi
  passed=$((passed + p)) failed=$((failed + f))
  rm -f "$log"
}
# run_perf NAME [VAR=value...] -- ARGS: purlin-perf (built beside BUILD_DIR,
# host Atom, one process) with ARGS; it checks every output itself.
perf="$dir/../purlin-perf"
run_perf() {
  local name=$1 envs=(); shift
  while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  local log; log=$(mktemp)
  echo "== c/$name"
  env "${envs[@]}" timeout -k 5 120 "$perf" "$@" >"$log" 2>&1
  local rc=$?
  if [ "$rc" -eq 0 ] && grep -q '^# Out of bounds values : 0 OK' "$log"; then
    echo "PASS $name"; passed=$((passed + 1))
  else
    tail -n 20 "$log"; echo "FAIL $name: purlin-perf $* exited $rc"; failed=$((failed + 1))
  fi
  rm -f "$log"
}
run_suite selftest 60
run_suite single 320
# A small staging area sends the larger multi-process calls through the ring regime.
run_suite multiproc 320 PURLIN_STAGE_BYTES=262144
run_suite badinput 300 PURLIN_TIMEOUT=3
run_suite layouts 240
run_suite epilogue 240
# The call cache (capi/callcache.h), alone and through the library, and the same calls with it off.
run_suite callcache_unit 60
run_suite launch_unit 60
run_suite callcache 240
run_suite callcache 240 PURLIN_CALL_CACHE=0
# 8 ranks (snac.MaxRanks, a full NVLink server) through purlin-perf: every
# collective and dtype at small sizes; every op on the smallest; and, with a
# 64 KiB staging half, sizes that take the chunked and ring regimes (there the
# AllReduce epilogue's rows are of 1000 elements: SNAC splits its transfers in
# whole rows, and 8 ranks' segments of 4096 bfloat16 do not fit 64 KiB).
run_perf perf-g8-dtypes -- all -g 8 -b 8 -e 64K -f 8 -n 1 -w 0 -d all -r 7
run_perf perf-g8-ops -- all -g 8 -b 8 -e 2K -f 256 -n 1 -w 0 -d all -o all -r 5
run_perf perf-g8-ring PURLIN_STAGE_BYTES=65536 -- all -g 8 -b 8 -e 1M -f 16 -n 1 -w 0 -d bfloat16 -o avg -r 3 -H 1000
# The AllReduce epilogue (allreduce_rmsnorm) on rows of 24 elements: every type it takes and every op.
run_perf perf-g8-epilogue -- allreduce_rmsnorm -g 8 -b 64 -e 64K -f 8 -n 1 -w 0 -d all -o all -H 24
echo "c: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
