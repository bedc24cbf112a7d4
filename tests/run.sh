#!/usr/bin/env bash
# tests/run.sh: what `make test` runs. Every suite runs even when an earlier
# one fails; each prints one closing "<suite>: N passed, M failed" line, and
# the script exits non-zero if any suite failed.
#   suites: go-vet, go-test (go test -race ./...), go-fuzz (each Fuzz test of
#   comm, the decoders of what peers send, for PURLIN_FUZZ_TIME, 5s), kernels (make kernels: nvcc
#   from PyPI), c (tests/c), abi (tests/abi), python (pytest python/tests),
#   diff (tests/diff: random programs against the float64 reference).
# PURLIN_TEST_SUITES="c abi" runs only those.
set -u
cd "$(dirname "$0")/.."
root=$PWD
make=${MAKE:-make}
suites=${PURLIN_TEST_SUITES:-go-vet go-test go-fuzz kernels c abi python diff}
summary=()
failed_suites=0

note() { summary+=("$1"); echo "$1"; }

suite_go_vet() {
  local unformatted; unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './build/*'))
  [ -z "$unformatted" ] || echo "gofmt: not formatted: $unformatted"
  if go vet ./... && [ -z "$unformatted" ]; then note "go-vet: 1 passed, 0 failed"; else note "go-vet: 0 passed, 1 failed"; return 1; fi
}

suite_go_test() {
  local log; log=$(mktemp)
  go test -race -timeout 600s ./... 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  local p f
  p=$(grep -cE '^ok[[:space:]]' "$log")
  f=$(grep -cE '^FAIL[[:space:]]+[^[:space:]]+' "$log")
  [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
  rm -f "$log"
  note "go-test: $p packages passed, $f failed"
  [ "$rc" -eq 0 ]
}

suite_go_fuzz() {
  local p=0 f=0 t
  for t in $(go test -list '^Fuzz' ./comm | grep '^Fuzz'); do
    if go test -run='^$' -fuzz="^$t\$" -fuzztime="${PURLIN_FUZZ_TIME:-5s}" ./comm; then p=$((p + 1)); else f=$((f + 1)); fi
  done
  [ $((p + f)) -gt 0 ] || f=1
  note "go-fuzz: $p passed, $f failed"
  [ "$f" -eq 0 ]
}

suite_kernels() {
  if $make --no-print-directory kernels; then note "kernels: 1 passed, 0 failed"; else note "kernels: 0 passed, 1 failed"; return 1; fi
}

suite_c() {
  if ! $make --no-print-directory lib c-tests-build; then note "c: 0 passed, 1 failed (build)"; return 1; fi
  local log; log=$(mktemp)
  tests/c/run.sh "$root/build/tests" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  summary+=("$(grep -E '^c: ' "$log" | tail -1)")
  rm -f "$log"
  return "$rc"
}

suite_abi() {
  if ! $make --no-print-directory lib; then note "abi: 0 passed, 1 failed (build)"; return 1; fi
  local log; log=$(mktemp)
  tests/abi/run.sh "$root/build/libpurlin.so" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  summary+=("$(grep -E '^abi: ' "$log" | tail -1)")
  rm -f "$log"
  return "$rc"
}

# The Python suites run in a local venv (.venv, git-ignored) holding the
# package's test requirements; the package itself is imported from python/.
py=.venv/bin/python
python_venv() {
  if ! [ -x "$py" ] || ! "$py" -c 'import pytest, pytest_timeout, numpy' 2>/dev/null; then
    python3 -m venv .venv && "$py" -m pip install -q "pytest>=7" "pytest-timeout>=2" "numpy>=1.22" "ml_dtypes>=0.3"
  fi
}

suite_python() {
  if ! $make --no-print-directory lib; then note "python: 0 passed, 1 failed (build)"; return 1; fi
  python_venv || { note "python: 0 passed, 1 failed (could not install pytest, numpy into .venv)"; return 1; }
  local log; log=$(mktemp)
  PURLIN_LIBRARY="$root/build/libpurlin.so" PYTHONPATH="$root/python" PURLIN_ATOM=${PURLIN_ATOM:-host} \
    timeout -k 10 900 "$py" -m pytest -q -p no:cacheprovider python/tests 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  local p f
  p=$(grep -oE '[0-9]+ passed' "$log" | tail -1 | grep -oE '[0-9]+'); f=$(grep -oE '[0-9]+ (failed|error)' "$log" | awk '{s+=$1} END {print s+0}')
  [ "$rc" -ne 0 ] && [ "${f:-0}" -eq 0 ] && f=1
  rm -f "$log"
  note "python: ${p:-0} passed, ${f:-0} failed"
  [ "$rc" -eq 0 ]
}

# The differential test's host half (tests/diff/difftest.py): seeded random programs
# on the host Atom against the float64 reference, after the checker's dry-run self-test;
# one process driving 2 ranks, then 2 processes. DIFFTEST_PROGRAMS (default 200) scales
# it; a failure prints its seed and program, which replay it.
suite_diff() {
  if ! $make --no-print-directory lib; then note "diff: 0 passed, 1 failed (build)"; return 1; fi
  python_venv || { note "diff: 0 passed, 1 failed (could not install numpy into .venv)"; return 1; }
  local n=${DIFFTEST_PROGRAMS:-200} passed=0 failed=0 args
  for args in "--dry-run --programs $n" "--procs 1 --programs $n" "--procs 2 --programs $((n / 2))"; do
    # shellcheck disable=SC2086 # args holds several words
    if PURLIN_ATOM=host PURLIN_TIMEOUT=20 timeout -k 10 300 "$py" tests/diff/difftest.py --device host \
      --libs "purlin=$root/build/libpurlin.so" --timeout 280 $args; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
  done
  note "diff: $passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}

for s in $suites; do
  echo "===== $s"
  fn="suite_${s//-/_}"
  if ! "$fn"; then failed_suites=$((failed_suites + 1)); fi
done

echo "===== summary"
printf '%s\n' "${summary[@]}"
n=$(wc -w <<<"$suites")
echo "make test: $((n - failed_suites)) suites passed, $failed_suites failed"
[ "$failed_suites" -eq 0 ]
