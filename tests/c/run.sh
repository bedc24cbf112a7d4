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
run_suite selftest 60
run_suite single 320
# A small staging area sends the larger multi-process calls through the ring regime.
run_suite multiproc 320 PURLIN_STAGE_BYTES=262144
run_suite badinput 300 PURLIN_TIMEOUT=3
echo "c: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
