#!/usr/bin/env bash
# tests/abi/run.sh LIB: checks libpurlin.so against NCCL's ABI.
#  - abi.c compiled against NCCL's own nccl.h (fetched from PyPI into build/nccl)
#    and linked with LIB: enum values, sizes, version, strings, ncclConfig_t;
#  - every name of nccl-symbols.txt exported, with its pnccl twin;
#  - `nm -D --defined-only` lists only purlin*, nccl* and pnccl* names;
#  - the newest GLIBC symbol version LIB and its core need is <= 2.34;
#  - the core exports only the Go exports and purlinCoreBind; LIB without it
#    refuses every call that needs it with a clear error (nocore.c);
#  - minimpi (tests/nccltests), the MPI stand-in NCCL's own tests run on.
# Prints PASS/FAIL lines and a closing "abi: N passed, M failed".
set -u
lib=$(realpath "${1:?usage: run.sh LIB}")
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=$root/build/tests
mkdir -p "$out"
passed=0 failed=0
pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1: $2"; failed=$((failed + 1)); }
# tally NAME LIMIT_S PROGRAM: runs a program that prints PASS/FAIL lines and counts them;
# one that exits non-zero without a FAIL line fails NAME.
tally() {
  local log rc
  log=$(timeout -k 5 "$2" "$3" 2>&1)
  rc=$?
  echo "$log" | grep -E '^(PASS|FAIL) '
  passed=$((passed + $(grep -c '^PASS ' <<<"$log")))
  failed=$((failed + $(grep -c '^FAIL ' <<<"$log")))
  [ "$rc" -ne 0 ] && ! grep -q '^FAIL ' <<<"$log" && fail "$1" "exited $rc: $(tail -3 <<<"$log")"
}

# 1. NCCL's header, compiled and run against our library.
if "$here/fetch-nccl.sh" "$root/build/nccl"; then
  if gcc -std=gnu11 -O1 -Wall -Wextra -Werror -I"$root/build/nccl" -I"$here/cuda_stub" -I"$root/include" \
      -o "$out/abi" "$here/abi.c" -L"$(dirname "$lib")" -Wl,-rpath,"$(dirname "$lib")" -l:"$(basename "$lib")" 2>"$out/abi.log"; then
    pass "compile-against-nccl.h"
    PURLIN_ATOM=${PURLIN_ATOM:-host} PURLIN_TIMEOUT=${PURLIN_TIMEOUT:-10} tally abi-run 150 "$out/abi"
  else
    fail "compile-against-nccl.h" "$(head -20 "$out/abi.log")"
  fi
else
  fail "fetch-nccl.h" "pip download nvidia-nccl-cu13 failed"
fi

# 2. Exported names.
defined=$(nm -D --defined-only "$lib" | awk '{print $NF}' | sed 's/@.*//' | sort -u)
missing=()
while read -r name; do
  case "$name" in ''|'#'*) continue ;; esac
  grep -qx "$name" <<<"$defined" || missing+=("$name")
  grep -qx "p$name" <<<"$defined" || missing+=("p$name")
done <"$here/nccl-symbols.txt"
if [ ${#missing[@]} -eq 0 ]; then pass "symbols-exported"; else fail "symbols-exported" "missing ${#missing[*]}: ${missing[*]}"; fi

foreign=$(grep -vE '^(purlin|nccl|pnccl)' <<<"$defined" | tr '\n' ' ')
if [ -z "$foreign" ]; then pass "only-purlin-nccl-names"; else fail "only-purlin-nccl-names" "also exports: ${foreign:0:400}"; fi

# 3. glibc: the library and its core must load on glibc 2.34 systems.
core=$(dirname "$lib")/libpurlin-core.so
for f in "$lib" "$core"; do
  newest=$(objdump -T "$f" | grep -oE 'GLIBC_[0-9]+(\.[0-9]+)+' | sed 's/GLIBC_//' | sort -V | tail -1)
  if [ -n "$newest" ] && [ "$(printf '%s\n2.34\n' "$newest" | sort -V | tail -1)" = "2.34" ]; then
    pass "glibc-max-2.34 $(basename "$f") (needs $newest)"
  else
    fail "glibc-max-2.34 $(basename "$f")" "needs GLIBC_$newest"
  fi
done

# 3b. The core beside the library exports the Go exports and purlinCoreBind alone; the
#     library without it refuses what needs it with a clear error (nocore.c).
core_foreign=$(nm -D --defined-only "$core" | awk '{print $NF}' | grep -vE '^(go[A-Z]|purlinCoreBind$)' | tr '\n' ' ')
if [ -z "$core_foreign" ]; then pass "core-exports"; else fail "core-exports" "also exports: ${core_foreign:0:400}"; fi
alone=$(mktemp -d)
cp "$lib" "$alone/"
if gcc -std=gnu11 -O1 -Wall -Wextra -Werror -I"$root/include" -o "$out/nocore" "$here/nocore.c" \
    -L"$alone" -Wl,-rpath,"$alone" -l:"$(basename "$lib")" 2>"$out/nocore.log"; then
  tally nocore-run 30 "$out/nocore"
else
  fail "nocore-compile" "$(head -20 "$out/nocore.log")"
fi
rm -rf "$alone"

# 4. minimpi (tests/nccltests), what runs NCCL's own tests as processes: its
#    calls checked at 1, 3 and 8 ranks, and a rank that dies stops the others.
mpi=$root/tests/nccltests
if gcc -std=gnu11 -O1 -Wall -Wextra -Werror -I"$mpi" -o "$out/minimpi_test" "$mpi/minimpi_test.c" "$mpi/minimpi.c" \
    -lpthread 2>"$out/minimpi.log"; then
  for n in 1 3 8; do
    log=$(timeout -k 5 30 "$mpi/launch.sh" "$n" "$out/minimpi_test" 2>&1)
    if [ $? -eq 0 ] && grep -q "PASS ($n ranks)" <<<"$log"; then pass "minimpi-$n-ranks"; else fail "minimpi-$n-ranks" "$log"; fi
  done
  start=$(date +%s)
  log=$(timeout -k 5 30 "$mpi/launch.sh" 4 "$out/minimpi_test" die 2>&1)
  rc=$? took=$(( $(date +%s) - start ))
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$took" -lt 10 ]; then pass "minimpi-rank-dies (status $rc, ${took}s)"
  else fail "minimpi-rank-dies" "status $rc after ${took}s: $log"; fi
else
  fail "minimpi-compile" "$(head -20 "$out/minimpi.log")"
fi

echo "abi: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
