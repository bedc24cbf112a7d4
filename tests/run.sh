#!/usr/bin/env bash
# tests/run.sh: what `make test` runs. Every suite runs even when an earlier
# one fails; each prints one line "<suite>: N passed, M failed" (a failed one
# adds the lines of its log that say why), and the script exits non-zero if
# any suite failed. A suite's whole output goes to build/test-logs/<suite>.log;
# PURLIN_TEST_VERBOSE=1 also prints it as it runs.
#   suites: go-vet, go-test (go test -race ./..., then the allocation tests without -race), go-fuzz (each Fuzz test of
#   comm/rendezvous, the decoders of what peers send, and of spec, Validate, for PURLIN_FUZZ_TIME, 50000x: a count of
#   inputs, as a duration races Go 1.26's fuzz coordinator at its deadline, golang/go#75804), kernels (make kernels
#   and make kernels-headers: nvcc from PyPI; make gpu-programs-check: tests/gpu/*.c compile), c (tests/c), abi (tests/abi), python (pytest python/tests),
#   diff (tests/diff: random programs against the float64 reference), install
#   (make install, then examples/cpp built with pkg-config and with CMake),
#   bench (tools/perfplot.py's and tests/gpu/compare.py's tests, then make bench: its verdict and plot),
#   pyinstall (pip install ./python into a fresh virtual environment, then two
#   processes all-reduce with it), readme (every code block of README.md).
# Each suite's line ends with its seconds. PURLIN_TEST_SUITES="c abi" runs only those.
set -u
cd "$(dirname "$0")/.."
root=$PWD
make=${MAKE:-make}
suites=${PURLIN_TEST_SUITES:-go-vet go-test go-fuzz kernels c abi python diff install bench pyinstall readme}
summary=()
failed_suites=0
logs=$root/build/test-logs
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore

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
  # The allocation tests again without -race, whose instrumentation (and
  # sync.Pool dropping entries at random) makes them skip their assertion.
  go test -count=1 -run 'AllocateNothing|AllocationFree|DoesNotAllocate' ./comm ./snac ./numeric || rc=1
  local p f
  p=$(grep -cE '^ok[[:space:]]' "$log")
  f=$(grep -cE '^FAIL[[:space:]]+[^[:space:]]+' "$log")
  [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
  rm -f "$log"
  note "go-test: $p packages passed, $f failed"
  [ "$rc" -eq 0 ]
}

suite_go_fuzz() {
  local p=0 f=0 t pkg
  for pkg in ./comm/rendezvous ./spec; do
    for t in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz'); do
      if go test -run='^$' -fuzz="^$t\$" -fuzztime="${PURLIN_FUZZ_TIME:-50000x}" "$pkg"; then p=$((p + 1)); else f=$((f + 1)); fi
    done
  done
  [ $((p + f)) -gt 0 ] || f=1
  note "go-fuzz: $p passed, $f failed"
  [ "$f" -eq 0 ]
}

suite_kernels() {
  local passed=0 failed=0 target
  for target in kernels kernels-headers gpu-programs-check; do # the fatbin; each header alone; the GPU suite's C
    if $make --no-print-directory "$target"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
  done
  note "kernels: $passed passed, $failed failed"
  [ "$failed" -eq 0 ]
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
  if ! [ -x "$py" ] || ! "$py" -c 'import pytest, pytest_timeout, numpy, ml_dtypes' 2>/dev/null; then
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
# one process driving 2 ranks, then 2 processes, then one program cut to its first call
# (--calls). DIFFTEST_PROGRAMS (default 200) scales it; a failure prints its seed and
# program, which replay it.
suite_diff() {
  if ! $make --no-print-directory lib; then note "diff: 0 passed, 1 failed (build)"; return 1; fi
  python_venv || { note "diff: 0 passed, 1 failed (could not install numpy into .venv)"; return 1; }
  local n=${DIFFTEST_PROGRAMS:-200} passed=0 failed=0 args
  for args in "--dry-run --programs $n" "--procs 1 --programs $n" "--procs 2 --programs $((n / 2))" \
    "--procs 1 --program 3 --calls 0"; do
    # shellcheck disable=SC2086 # args holds several words
    if PURLIN_ATOM=host PURLIN_TIMEOUT=20 timeout -k 10 300 "$py" tests/diff/difftest.py --device host \
      --libs "purlin=$root/build/libpurlin.so" --timeout 280 $args; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
  done
  note "diff: $passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}

# make install into a fresh PREFIX, and into a DESTDIR stage; then the C++ example
# (examples/cpp) built against each tree, with pkg-config and with CMake's
# find_package(Purlin), and run on the host Atom: 2 ranks, one all-reduce, checked.
suite_install() {
  local tmp; tmp=$(mktemp -d)
  local prefix=$tmp/prefix stage=$tmp/stage passed=0 failed=0 log=$tmp/log
  check() { # check NAME CMD...: one check, its output shown only when it fails
    if "${@:2}" >"$log" 2>&1; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "install: FAIL $1"; tail -n 20 "$log"; fi
  }
  # The drop-in is built into tmp: build/nccl-so may hold a build with the kernels (make nccl-so-cuda)
  # that the GPU tests need, which a plain build must not replace.
  local ncclso=NCCL_SO=$tmp/nccl-so/libnccl.so.2
  check "make install PREFIX" $make --no-print-directory install PREFIX="$prefix" "$ncclso"
  check "make install DESTDIR" $make --no-print-directory install PREFIX=/opt/purlin DESTDIR="$stage" "$ncclso"
  check "same files under PREFIX and DESTDIR/PREFIX" \
    diff <(cd "$prefix" && find . | sort) <(cd "$stage/opt/purlin" && find . | sort)
  check "SONAMEs: libpurlin.so, lib/purlin/libnccl.so.2" bash -c \
    "readelf -d '$prefix/lib/libpurlin.so' | grep -q 'SONAME.*\\[libpurlin\\.so\\]' &&
     readelf -d '$prefix/lib/purlin/libnccl.so.2' | grep -q 'SONAME.*\\[libnccl\\.so\\.2\\]' &&
     ! ls '$prefix'/lib/libnccl* 2>/dev/null"
  check "pkg-config build" bash -c "g++ -std=c++17 -Wall -Wextra -Werror examples/cpp/allreduce.cpp \
    \$(PKG_CONFIG_PATH='$prefix/lib/pkgconfig' pkg-config --cflags --libs purlin) -Wl,-rpath,'$prefix/lib' -o '$tmp/allreduce-pc'"
  check "pkg-config build runs" env PURLIN_ATOM=host "$tmp/allreduce-pc"
  check "cmake configure (DESTDIR tree)" cmake -S examples/cpp -B "$tmp/cmake" -DCMAKE_PREFIX_PATH="$stage/opt/purlin"
  check "cmake build" cmake --build "$tmp/cmake"
  check "cmake build runs" env PURLIN_ATOM=host "$tmp/cmake/allreduce"
  check "cmake build through Purlin::nccl" bash -c "cmake -S tests/install -B '$tmp/cmake-nccl' -DCMAKE_PREFIX_PATH='$prefix' &&
    cmake --build '$tmp/cmake-nccl' && readelf -d '$tmp/cmake-nccl/allreduce_nccl' | grep -q 'NEEDED.*\\[libnccl\\.so\\.2\\]'"
  check "Purlin::nccl build runs" env PURLIN_ATOM=host "$tmp/cmake-nccl/allreduce_nccl"
  check "-lnccl from lib/purlin" bash -c "g++ -std=c++17 examples/cpp/allreduce.cpp -I'$prefix/include' -L'$prefix/lib/purlin' -lnccl \
    -Wl,-rpath,'$prefix/lib/purlin' -o '$tmp/allreduce-nccl' && readelf -d '$tmp/allreduce-nccl' | grep -q 'NEEDED.*\\[libnccl\\.so\\.2\\]' &&
    PURLIN_ATOM=host '$tmp/allreduce-nccl'"
  check "find_package(Purlin 9) refused" bash -c "! cmake -S '$root/tests/install' -B '$tmp/cmake9' -DPURLIN_WANT=9.0 -DCMAKE_PREFIX_PATH='$prefix'"
  check "make uninstall leaves no file" bash -c "$make --no-print-directory uninstall PREFIX='$prefix' &&
    [ -z \"\$(find '$prefix' -type f -o -type l)\" ]"
  rm -rf "$tmp"
  note "install: $passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}

# tools/perfplot.py's, tools/costmodel.py's and tests/gpu/compare.py's tests (stdlib unittest), then `make bench` on this machine,
# which must end in a PASS verdict and leave its plot, build/bench.svg.
suite_bench() {
  local passed=0 failed=0 log; log=$(mktemp)
  for t in tools/perfplot_test.py tools/costmodel_test.py tests/gpu/compare_test.py; do
    if python3 -m unittest -q "$t" >"$log" 2>&1; then passed=$((passed + 1)); else failed=$((failed + 1)); cat "$log"; fi
  done
  rm -f "$root/build/bench.svg"
  if $make --no-print-directory bench >"$log" 2>&1 && tail -n 1 "$log" | grep -q '^bench: PASS' && [ -s "$root/build/bench.svg" ]; then
    passed=$((passed + 1)); tail -n 1 "$log"
  else
    failed=$((failed + 1)); tail -n 30 "$log"
  fi
  rm -f "$log"
  note "bench: $passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}

# pyinstall: what a user does, `pip install './python[numpy]'` into a fresh
# virtual environment (build/pyinstall/venv; the build backend builds the
# library itself), then the NumPy example on two processes from another
# folder, so the package and the library it ships are the installed ones.
suite_pyinstall() {
  local venv=$root/build/pyinstall/venv work=$root/build/pyinstall/work
  rm -rf "$venv" "$work" && mkdir -p "$work" && python3 -m venv "$venv" &&
    "$venv/bin/python" -m pip install -q "$root/python[numpy]" ||
    { note "pyinstall: 0 passed, 1 failed (pip install './python[numpy]' into a fresh venv)"; return 1; }
  local passed=0 failed=0
  check() { # what command...
    local what=$1; shift
    if (cd "$work" && env -u PURLIN_LIBRARY -u PYTHONPATH PURLIN_ATOM=host PURLIN_TIMEOUT=20 "$@"); then
      passed=$((passed + 1)); echo "PASS $what"
    else failed=$((failed + 1)); echo "FAIL $what"; fi
  }
  check "the wheel is tagged for the platform" \
    grep -qE '^Tag: py3-none-linux_' "$venv"/lib/python3*/site-packages/purlin-*.dist-info/WHEEL
  check "the [test] extra is CI's suite (ml_dtypes, numpy, pytest, pytest-timeout)" bash -c \
    'for r in numpy ml_dtypes pytest pytest-timeout; do grep -q "^Requires-Dist: $r[>=].*extra == \"test\"" $0/lib/python3*/site-packages/purlin-*.dist-info/METADATA || exit 1; done' "$venv"
  check "the library loaded is the one inside the installed package" "$venv/bin/python" -c \
    'import purlin._library as l, sys; p = l.library_path(); print(p); sys.exit(not p.startswith(sys.prefix))'
  local out; out=$(cd "$work" && env -u PURLIN_LIBRARY -u PYTHONPATH PURLIN_ATOM=host PURLIN_TIMEOUT=20 \
    timeout -k 5 120 "$venv/bin/python" "$root/python/examples/numpy_cpu.py" 2 2>&1)
  echo "$out"
  check "two processes all-reduce with the installed package" \
    test "$(grep -c '^rank [01]: sum=3 ' <<<"$out")" -eq 2
  note "pyinstall: $passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}

# readme: every code block of README.md, as written (tests/readme/run.py).
suite_readme() {
  if ! $make --no-print-directory lib; then note "readme: 0 passed, 1 failed (build)"; return 1; fi
  local log; log=$(mktemp)
  python3 tests/readme/run.py "$root/build/readme" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  summary+=("$(grep -E '^readme: ' "$log" | tail -1)")
  rm -f "$log"
  return "$rc"
}

# The lines of a failed suite's log that say why: failures and errors with a
# few lines of context, or else its last lines.
cause() {
  local why
  why=$(grep -E -A4 '^(--- FAIL|FAIL|FAILED|ERROR|E  )|^gofmt:|: error|[Ee]rror:|panic:' "$1" | head -n 40)
  [ -n "$why" ] || why=$(tail -n 15 "$1")
  sed 's/^/    /' <<<"$why"
}

mkdir -p "$logs"
for s in $suites; do
  fn="suite_${s//-/_}"
  log=$logs/$s.log
  before=${#summary[@]} t0=$(date +%s)
  if [ -n "${PURLIN_TEST_VERBOSE:-}" ]; then
    "$fn" > >(tee "$log") 2>&1; rc=$?
  else
    "$fn" >"$log" 2>&1; rc=$?
  fi
  [ "${#summary[@]}" -gt "$before" ] || summary+=("$s: 0 passed, 1 failed (no result)")
  line=${summary[-1]}
  [ -n "$line" ] || line="$s: 0 passed, 1 failed (no result)"
  line+=" [$(( $(date +%s) - t0 )) s]"  # CI's budget is the suites' sum: well under 20 minutes
  if [ "$rc" -ne 0 ]; then
    failed_suites=$((failed_suites + 1))
    echo "$line (log: ${log#"$root"/})"
    cause "$log"
  else
    [ -n "${PURLIN_TEST_VERBOSE:-}" ] || echo "$line"
  fi
done

n=$(wc -w <<<"$suites")
echo "make test: $((n - failed_suites)) suites passed, $failed_suites failed"
[ "$failed_suites" -eq 0 ]
