#!/usr/bin/env bash
# tests/gpu/run.sh: the GPU suite, the one command the GPU machine runs (it has
# no Go). Build here first:
#   make gpu-tests   # build/gpu/cuda.test, build/gpu/lib/libpurlin.so (kernels embedded)
# then on
# the GPU machine, with build/ carried:  bash tests/gpu/run.sh
# Parts, in priority order, each under its own timeout, continuing after a
# failure, each ending in one PASS/FAIL/SKIP line:
#   build     purlin-perf-cuda on Purlin and on NCCL (nvidia-nccl-cu13 from
#             python3's site-packages, else the system NCCL), memalloc_e2e,
#             purlin-perf's staging test
#   e2e       tests/gpu/memalloc_e2e.c: comm on the CUDA Atom through the C ABI
#   staging   cmd/purlin-perf/tests/staging_test.c: purlin-perf's uploads and
#             downloads are ordered with its streams (else it flags NCCL itself)
#   peerdeath tests/gpu/peerdeath.c: init/AllReduce/destroy rounds polling async
#             errors (PEERDEATH_ROUNDS, default 20), and a peer's abort (log: e2e.log)
#   callpath  tests/gpu/callpath.c on Purlin and on NCCL: a library's own host time
#             per eager call (issue time minus a bare launch's; log: e2e.log)
#   callcache tests/c/callcache.c on device memory: the C API's call cache with the
#             CUDA Atom's records, then with PURLIN_CALL_CACHE=0 (log: e2e.log)
#   perf      the same purlin-perf on Purlin and on NCCL, -g $NGPUS, eager and -G
#             graph, every collective, -c 1, one process driving every GPU (eager
#             16 B..1 GiB by 4x for allreduce and allgather, 8 B..512 MiB for the
#             rest, the V (split evenly: -u 0), column-block and matrix collectives
#             16 B..1 GiB on Purlin alone, to compare with their even forms; graph 8 B..64 MiB, and bfloat16 to 1 MiB for the
#             reducing collectives); each run's seconds on a '## SECONDS' line
#   mproc     purlin-perf -m 1 on Purlin ($NGPUS processes: cuMem fds over SCM_RIGHTS)
#   difftest  tests/diff/difftest.py: seeded random programs of NCCL calls on Purlin
#             and on NCCL in one process, compared with each other and with a
#             float64 reference; one process driving $NGPUS GPUs (300 programs),
#             then $NGPUS processes (200), then large messages (40 programs, one
#             call in twenty up to 2^24 elements); where ranks share GPUs, with each
#             collective's blocks capped so that every rank's two streams'
#             collectives fit on the GPU together
#   memcheck  compute-sanitizer memcheck on a small purlin-perf run
#   gotests   build/gpu/cuda.test (atom/cuda's Go GPU tests), then comm's CUDA tests
#   perf-procs the same as perf with one process per GPU (-m 1): graph 8 B..1 MiB,
#             eager 256 MiB
#   perf-registered  the same with buffers from ncclMemAlloc registered as symmetric
#             windows on both libraries (-R 1): graph 8 B..1 MiB and eager 256 MiB,
#             one process (Purlin's copy collectives push straight into the outputs)
#             (perf-procs and perf-registered last, so a tight GPU_BUDGET_S cuts only these)
#   rmsnorm   tests/torch/bench_rmsnorm.py: the fused all-reduce + residual add + RMSNorm
#             against Purlin's and NCCL's all-reduce followed by PyTorch's ops (2+ ranks,
#             a GPU each, torch); its rows join perf.json as allreduce_rmsnorm
#   torch     tests/torch/bench_allreduce.py --with-library: torch.distributed.all_reduce on
#             Purlin (build/nccl-so/libnccl.so.2 under LD_PRELOAD, else build/gpu/lib/libpurlin.so)
#             and on NCCL, beside PyTorch's symmetric-memory one-shot and two-shot kernels
#             (bf16, graphs, a process a GPU); its rows join perf.json as torch_allreduce;
#             then tests/torch/bench_init.py: each library's communicator creation plus first
#             all_reduce, and its GPU memory, for the world and a second communicator
#             (perf.json "costs")
#   perf-blocks eager 256 MiB of every collective with at most 8, then 16 thread blocks a
#             call (PURLIN_MAX_CTAS, NCCL_MAX_CTAS), on Purlin and on NCCL; in perf.json
#             under "capped", with their "blocks", apart from the default runs' "rows"
#   ceilings  tests/gpu/smbench.cu (a plain copy kernel's NVLink push and pull at 4-132 blocks,
#             one direction and both; ceilings-sm.txt) and tests/gpu/cebench.cu (the copy
#             engine's; ceilings-ce.txt): perf.json keeps the first under "ceilings" and
#             gives each row of 256 MiB or more its fraction of the push ceiling ("of_ceiling")
# Everything lands in $PURLIN_GPU_LOGS (default build/gpu/logs): env.log, e2e.log (memalloc_e2e,
# the staging test, then difftest), perf-purlin.txt, perf-nccl.txt,
# perf-mproc.txt, memcheck.log, go-tests.log, summary.txt, and perf.json (every
# row Purlin measured, NCCL's beside it where NCCL has the collective, in the
# form of docs/perf/2xh200.json: copy it there to record a run), and perf.svg (its plot, tools/perfplot.py). GPU_BUDGET_S (default 560) bounds the whole run: a part that
# would start past it is skipped. NVLink multicast stays off.
# GPU_PARTS (default: every part) names the parts to run, e.g. GPU_PARTS="perf rmsnorm"; build
# always runs. A suite longer than one sitting runs in parts, each in its own logs directory;
# PURLIN_GPU_EARLIER names the earlier parts' directories (oldest first, same build: their
# COMMIT must match), whose perf rows this run's perf.json takes in (tests/gpu/compare.py --earlier).
# NGPUS (default: every GPU listed, tests/gpu/ngpus.sh) is the rank count; above
# the GPUs listed ranks share GPUs, and NCCL's runs are left out (it refuses them).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PURLIN_TIMEOUT="${PURLIN_TIMEOUT:-30}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${PURLIN_GPU_LOGS:-$root/build/gpu/logs}"
gpu="$root/build/gpu"
bin="$gpu/bin"
mkdir -p "$out" "$bin"
deadline=$(( $(date +%s) + ${GPU_BUDGET_S:-560} ))
summary="$out/summary.txt"
: >"$summary"
fail=0

note() { echo "$*" | tee -a "$summary"; }
all_parts=" e2e staging peerdeath callpath callcache perf mproc difftest memcheck gotests perf-procs perf-registered rmsnorm torch perf-blocks ceilings "
parts=${GPU_PARTS:-} parts=" ${parts//,/ } "
for p in $parts; do
  [[ $all_parts == *" $p "* ]] || { echo "run.sh: GPU_PARTS names '$p', which is none of:$all_parts" >&2; exit 2; }
done
for d in ${PURLIN_GPU_EARLIER:-}; do  # checked now, not after the parts have run
  [[ $(cat "$d/COMMIT" 2>/dev/null) == $(cat "$gpu/COMMIT" 2>/dev/null) ]] ||
    { echo "run.sh: PURLIN_GPU_EARLIER: $d holds no run of this build ($(cat "$gpu/COMMIT" 2>/dev/null || echo 'no build/gpu/COMMIT'))" >&2; exit 2; }
done
# chosen PART: whether PART is among GPU_PARTS (all when unset); want PART: the same, and a
# part left out says SKIP.
chosen() { [[ -z ${GPU_PARTS:-} || $parts == *" $1 "* ]]; }
want() { chosen "$1" && return 0; note "SKIP $1 (not in GPU_PARTS)"; return 1; }
# left CAP: seconds a part may run: CAP, or what the budget leaves (0: none).
left() { local l=$(( deadline - $(date +%s) - 10 )); (( l < $1 )) && echo $(( l > 5 ? l : 0 )) || echo "$1"; }
# verdict NAME STATUS [detail]: one line, with the seconds since the last verdict.
last=$(date +%s)
verdict() {
  local now; now=$(date +%s)
  if [[ $2 == 0 ]]; then note "PASS $1 ${3:-} [$(( now - last )) s]"; else note "FAIL $1 (status $2) ${3:-} [$(( now - last )) s]"; fail=1; fi
  last=$now
}

# ---------- environment and builds ----------
{
  date -u; nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
  nvidia-smi topo -m; nvcc --version 2>/dev/null | tail -2
  cuobjdump --list-elf "$root/build/kernels.fatbin" 2>/dev/null | head -5
  ls -la "$gpu" "$gpu/lib" 2>&1
} >"$out/env.log" 2>&1
head -4 "$out/env.log"

source "$root/tests/gpu/ngpus.sh"
echo "NGPUS=$NGPUS GPUS_LISTED=$GPUS_LISTED" >>"$out/env.log"
# Ranks that share GPUs (NGPUS above the GPUs listed): NCCL refuses them
# ("Duplicate GPU detected"), so its runs are left out and difftest checks
# Purlin against its float64 reference alone; timings then cross no NVLink.
# difftest runs calls of several communicators at once, on two streams a rank:
# on a shared GPU their blocks must fit it together (README, Configuration), so
# each collective there gets at most SMs / (2 x ranks a GPU) - 1 blocks (a
# group's sends and receives merged into a collective's launch add theirs).
libs=(purlin nccl) difftest_env=()
if (( GPUS_LISTED > 0 && NGPUS > GPUS_LISTED )); then
  libs=(purlin)
  note "NOTE $NGPUS ranks on $GPUS_LISTED GPU(s): ranks share GPUs, which NCCL refuses; NCCL's runs are left out, difftest checks Purlin alone"
  sms=$(python3 -c 'import ctypes as c; cu = c.CDLL("libcuda.so.1"); d, v = c.c_int(), c.c_int(); cu.cuInit(0); cu.cuDeviceGet(c.byref(d), 0); print(v.value if cu.cuDeviceGetAttribute(c.byref(v), 16, d) == 0 else 0)' 2>/dev/null || echo 0)
  per=$(( (NGPUS + GPUS_LISTED - 1) / GPUS_LISTED ))
  (( sms > 0 )) && difftest_env=("PURLIN_MAX_CTAS=$(( sms / (2 * per) > 1 ? sms / (2 * per) - 1 : 1 ))")
  echo "difftest: ${difftest_env[*]:-no block cap} ($sms SMs, $per ranks a GPU)" >>"$out/env.log"
fi
source "$root/tests/gpu/build-perf.sh"
verdict build $? "(purlin-perf on Purlin and NCCL, memalloc_e2e; env.log)"

cp "$gpu/COMMIT" "$out/COMMIT" 2>/dev/null || echo unknown >"$out/COMMIT"

# ---------- e2e: comm on the CUDA Atom through the C ABI ----------
t=$(left 60)
if ! want e2e; then :; elif (( t > 0 )) && [[ -x $bin/memalloc_e2e ]]; then
  PURLIN_DEBUG=INFO timeout "$t" "$bin/memalloc_e2e" "$NGPUS" >"$out/e2e.log" 2>&1
  verdict e2e $? "$(grep -c ^PASS "$out/e2e.log") checks passed; $(grep -m1 -o 'CUDA Atom on device [0-9].*' "$out/e2e.log")"
  grep -E "^FAIL" "$out/e2e.log" | head -5 | tee -a "$summary"
else note "SKIP e2e"; fi

# ---------- staging: purlin-perf's own copies, before its results are trusted ----------
t=$(left 60)
if ! want staging; then :; elif (( t > 0 )) && [[ -x $bin/perf-staging-test ]]; then
  echo "## perf-staging-test" >>"$out/e2e.log"
  timeout "$t" "$bin/perf-staging-test" >>"$out/e2e.log" 2>&1
  verdict staging $? "($(grep -m1 '^staging: [0-9]' "$out/e2e.log"))"
else note "SKIP staging"; fi
# ---------- peerdeath: ranks of one process never taken for gone; a peer's abort ----------
t=$(left 90)
if ! want peerdeath; then :; elif (( t > 0 )) && [[ -x $bin/peerdeath ]]; then
  { echo "## peerdeath"; PURLIN_DEBUG=WARN timeout "$t" "$bin/peerdeath" "$NGPUS" "${PEERDEATH_ROUNDS:-20}"; } >>"$out/e2e.log" 2>&1
  s=$?
  if skip=$(sed -n '/^## peerdeath/,$p' "$out/e2e.log" | grep -m1 '^SKIP'); [[ $s == 0 && -n $skip ]]; then
    note "$skip"  # it needs a GPU a rank
  else
    verdict peerdeath $s "($(sed -n '/^## peerdeath/,$p' "$out/e2e.log" | grep -c ^PASS) checks passed)"
    sed -n '/^## peerdeath/,$p' "$out/e2e.log" | grep -E "^FAIL" | head -5 | tee -a "$summary"
  fi
else note "SKIP peerdeath"; fi

# ---------- callpath: the host's time per eager call, the launch excluded ----------
t=$(left 60)
if ! want callpath; then :; elif (( t > 0 )) && [[ -x $bin/callpath-purlin ]]; then
  cs=0
  for lib in purlin nccl; do
    { echo "## callpath $lib"; timeout "$t" "$bin/callpath-$lib"; } >>"$out/e2e.log" 2>&1 || cs=1
  done
  verdict callpath $cs "($(grep -h 'own host time' "$out/e2e.log" | sed 's/^callpath: //' | paste -sd ';' -))"
else note "SKIP callpath"; fi

# ---------- callcache: calls issued from the C API's records, on the CUDA Atom ----------
t=$(left 60)
if ! want callcache; then :; elif (( t > 0 )) && [[ -x $bin/callcache ]]; then
  cs=0
  for on in 1 0; do
    { echo "## callcache PURLIN_CALL_CACHE=$on"; PURLIN_CALL_CACHE=$on timeout "$t" "$bin/callcache"; } >>"$out/e2e.log" 2>&1 || cs=1
  done
  verdict callcache $cs "($(sed -n '/^## callcache/,$p' "$out/e2e.log" | grep -c ^PASS) checks passed)"
  sed -n '/^## callcache/,$p' "$out/e2e.log" | grep -E "^FAIL" | head -5 | tee -a "$summary"
else note "SKIP callcache"; fi

# ---------- perf: the same program on Purlin and on NCCL ----------
big=(allreduce allgather)
rest=(reducescatter alltoall broadcast reduce gather scatter sendrecv)
# perf_blocks: the most thread blocks a call of the runs that follow may use on either library
# (PURLIN_MAX_CTAS, NCCL_MAX_CTAS), named in their headers; empty: each library's default.
perf_blocks=""
perf() { # perf LIB MODE CAP COLL ARGS...: one purlin-perf run appended to perf-LIB.txt
  local lib=$1 mode=$2 cap=$3 coll=$4; shift 4
  local f="$out/perf-$lib.txt" t t0 blocks=(); t=$(left "$cap") t0=$(date +%s)
  [[ -n $perf_blocks ]] && blocks=("PURLIN_MAX_CTAS=$perf_blocks" "NCCL_MAX_CTAS=$perf_blocks")
  echo "## RUN mode=$mode lib=$lib coll=$coll${perf_blocks:+ blocks=$perf_blocks} args: -g $NGPUS $*" >>"$f"
  if (( t == 0 )) || [[ ! -x $bin/perf-$lib ]]; then echo "## EXIT $coll status=SKIP" >>"$f"; note "SKIP perf $lib $mode $coll"; return; fi
  env "${blocks[@]}" timeout "$t" "$bin/perf-$lib" "$coll" -g "$NGPUS" "$@" >>"$f" 2>&1
  local s=$?
  echo "## SECONDS $coll $(( $(date +%s) - t0 ))" >>"$f"
  echo "## EXIT $coll status=$s" >>"$f"
  [[ $s == 0 ]] || { note "FAIL perf $lib $mode $coll (status $s)"; fail=1; }
}
declare -A perf_from=([purlin]=1 [nccl]=1)
perf_verdicts() { # perf_verdicts PART: a verdict per library on its runs since the last verdicts
  local lib w r ok s part
  for lib in "${libs[@]}"; do
    part=$(tail -n "+${perf_from[$lib]}" "$out/perf-$lib.txt")
    perf_from[$lib]=$(( $(wc -l <"$out/perf-$lib.txt") + 1 ))
    w=$(grep "Out of bounds" <<<"$part" | grep -c FAILED)
    r=$(grep "^## EXIT" <<<"$part" | grep -vc "status=SKIP"); ok=$(grep -c "^## EXIT .* status=0$" <<<"$part")
    if (( r == 0 )); then note "SKIP $1-$lib (no run: no time or no binary)"; continue; fi
    s=0; (( w == 0 && ok == r )) || s=1
    verdict "$1-$lib" $s "($ok of $r runs exited 0; $w reported wrong values)"
  done
}
# One process driving every GPU: eager up to 1 GiB (AllReduce, AllGather) or
# 512 MiB, and CUDA graphs up to 64 MiB (one process per GPU: part perf-procs).
: >"$out/perf-purlin.txt"; : >"$out/perf-nccl.txt"
if want perf; then
  for lib in "${libs[@]}"; do
    for c in "${big[@]}"; do perf "$lib" eager 60 "$c" -b 16 -e 1G -f 4 -n 20 -w 2 -c 1; done
    for c in "${rest[@]}"; do perf "$lib" eager 40 "$c" -b 8 -e 512M -f 4 -n 20 -w 2 -c 1; done
    [[ $lib == purlin ]] && for c in allgatherv reducescatterv alltoallv allgathercolumns reducescattercolumns alltoallmatrix; do
      perf "$lib" eager 40 "$c" -b 16 -e 1G -f 4 -n 10 -w 1 -c 1 -u 0
    done
  done
  for lib in "${libs[@]}"; do
    for c in "${big[@]}" "${rest[@]}"; do perf "$lib" graph 30 "$c" -b 8 -e 64M -f 2 -n 20 -w 2 -c 1 -G 10; done
    for c in allreduce reducescatter reduce; do perf "$lib" graph 20 "$c" -d bfloat16 -b 8 -e 1M -f 4 -n 20 -w 2 -c 1 -G 10; done
  done
  perf_verdicts perf
fi

# ---------- mproc: NGPUS processes, cuMem fds shared over SCM_RIGHTS ----------
t=$(left 60)
if ! want mproc; then :; elif (( t > 0 )) && [[ -x $bin/perf-purlin ]]; then
  PURLIN_DEBUG=INFO timeout "$t" "$bin/perf-purlin" all -g "$NGPUS" -m 1 -b 8 -e 16M -f 16 -n 5 -w 1 -c 1 >"$out/perf-mproc.txt" 2>&1
  verdict mproc $? "($(grep -h "Out of bounds" "$out/perf-mproc.txt" | sort | uniq -c | tr -s ' ' | tr '\n' ';'))"
else note "SKIP mproc"; fi

# ---------- difftest: random programs on Purlin and on NCCL, compared (tests/diff) ----------
# One process driving every GPU, then one process per GPU; each run prints one
# "difftest: PASS|FAIL" line, and every failure its seed and program (they replay it).
difftest() { # difftest NAME CAP PROCS PROGRAMS [DIFFTEST-OPTION...]
  local t; t=$(left "$2")
  local with="purlin=$gpu/lib/libpurlin.so" missing=0
  if [[ ${libs[*]} == *nccl* ]]; then
    with+=",nccl=$nccl_lib/libnccl.so.2"
    [[ -f $nccl_lib/libnccl.so.2 ]] || missing=1
  fi
  if (( t > 10 && missing == 0 )) && [[ -f $gpu/lib/libpurlin.so ]]; then
    echo "## difftest $1" >>"$out/e2e.log"
    env "${difftest_env[@]}" timeout -k 5 "$t" python3 "$root/tests/diff/difftest.py" --device cuda --nranks "$NGPUS" --procs "$3" \
      --programs "$4" --libs "$with" --timeout "$(( t - 5 ))" "${@:5}" \
      >>"$out/e2e.log" 2>&1
    local s=$?
    verdict "difftest-$1" $s "($(grep -E '^difftest: (PASS|FAIL)' "$out/e2e.log" | tail -1 | cut -c11-220))"
    [[ $s == 0 ]] || sed -n '/^## difftest '"$1"'$/,$p' "$out/e2e.log" | grep -E -m6 '^difftest FAIL|^  - ' | cut -c1-300 | tee -a "$summary"
  else note "SKIP difftest-$1"; fi
}
if want difftest; then
  difftest 1proc 60 1 300
  difftest nproc 45 "$NGPUS" 200
  # Large messages: one call in twenty up to 2^24 elements (the pipelined Plans).
  difftest large 90 1 40 --max-count $(( 1 << 24 )) --max-bytes $(( 1 << 28 ))
fi

# ---------- memcheck on a small purlin-perf run ----------
t=$(left 90)
if ! want memcheck; then :; elif (( t > 0 )) && command -v compute-sanitizer >/dev/null && [[ -x $bin/perf-purlin ]]; then
  timeout "$t" compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$bin/perf-purlin" allreduce -g "$NGPUS" -b 8 -e 1M -f 32 -n 2 -w 1 -c 1 >"$out/memcheck.log" 2>&1
  verdict memcheck $? "($(grep -m1 "ERROR SUMMARY" "$out/memcheck.log"))"
else note "SKIP memcheck"; fi

# ---------- Go GPU tests (atom/cuda) ----------
t=$(left 170)
if ! want gotests; then :; elif (( t > 20 )) && [[ -x $gpu/cuda.test ]]; then
  (cd "$root/atom/cuda" && timeout "$t" "$gpu/cuda.test" -test.v -test.count=1 -test.timeout "$(( t - 5 ))s") >"$out/go-tests.log" 2>&1
  verdict gotests $? "($(grep -c -- '--- PASS' "$out/go-tests.log") passed, $(grep -c -- '--- FAIL' "$out/go-tests.log") failed, $(grep -c -- '--- SKIP' "$out/go-tests.log") skipped)"
  grep -E -- "--- FAIL|^panic|SPEED" "$out/go-tests.log" | head -12 | tee -a "$summary"
else note "SKIP gotests (no time or no binary)"; fi
# comm's GPU tests (windows across processes on the CUDA Atom), appended to the same log
t=$(left 90)
if ! chosen gotests; then :; elif (( t > 20 )) && [[ -x $gpu/comm.test ]]; then
  (cd "$root/comm" && timeout "$t" "$gpu/comm.test" -test.v -test.count=1 -test.run 'CUDA' -test.timeout "$(( t - 5 ))s") >>"$out/go-tests.log" 2>&1
  verdict gotests-comm $? "($(grep -c -- '--- PASS: TestCUDA' "$out/go-tests.log") passed)"
else note "SKIP gotests-comm (no time or no binary)"; fi

# ---------- perf-procs: one process per GPU (-m 1), Purlin and NCCL, near the end: it may be cut ----------
if want perf-procs; then
  for lib in "${libs[@]}"; do
    for c in "${big[@]}" "${rest[@]}"; do perf "$lib" graph 30 "$c" -m 1 -b 8 -e 1M -f 4 -n 20 -w 2 -c 1 -G 10; done
    for c in "${big[@]}" "${rest[@]}"; do perf "$lib" eager 30 "$c" -m 1 -b 256M -e 256M -n 10 -w 2 -c 1; done
  done
  perf_verdicts perf-procs
fi

# ---------- perf-registered: symmetric windows on both libraries (-R 1), last: it may be cut ----------
if want perf-registered; then
  for lib in "${libs[@]}"; do
    for c in "${big[@]}" "${rest[@]}"; do perf "$lib" graph 30 "$c" -R 1 -b 8 -e 1M -f 4 -n 20 -w 2 -c 1 -G 10; done
    # Large messages in windows: the copy collectives push straight into the outputs (snac direct.go).
    for c in "${big[@]}" "${rest[@]}"; do perf "$lib" eager 30 "$c" -R 1 -b 256M -e 256M -n 10 -w 2 -c 1; done
  done
  perf_verdicts perf-registered
fi

# ---------- rmsnorm: fused all-reduce + residual add + RMSNorm against the unfused sequences ----------
t=$(left 120)
rm -f "$out/rmsnorm.json"
if ! want rmsnorm; then :; elif (( t > 30 && NGPUS >= 2 && NGPUS <= GPUS_LISTED )) && python3 -c "import torch" 2>/dev/null; then
  PURLIN_LIBRARY="$gpu/lib/libpurlin.so" PYTHONPATH="$root/python" timeout "$t" \
    python3 "$root/tests/torch/bench_rmsnorm.py" --nranks "$NGPUS" --json "$out/rmsnorm.json" >"$out/rmsnorm.txt" 2>&1
  verdict rmsnorm $? "(rmsnorm.txt)"
else note "SKIP rmsnorm (no time, no torch, or fewer GPUs than ranks: it needs a GPU a rank)"; fi

# ---------- torch: torch.distributed.all_reduce on Purlin (LD_PRELOAD) and on NCCL, beside symmetric memory ----------
t=$(left 240)
rm -f "$out/torch-allreduce.json" "$out/torch-init.json"
dropin="$root/build/nccl-so/libnccl.so.2"
[[ -f $dropin ]] || dropin="$gpu/lib/libpurlin.so"
if ! want torch; then :; elif (( t > 60 && NGPUS >= 2 && NGPUS <= GPUS_LISTED )) && python3 -c "import torch" 2>/dev/null; then
  timeout "$t" python3 "$root/tests/torch/bench_allreduce.py" --nranks "$NGPUS" --with-library "$dropin" \
    --json "$out/torch-allreduce.json" >"$out/torch-allreduce.txt" 2>&1
  verdict torch $? "(torch-allreduce.txt, on $(basename "$dropin"))"
  # What a communicator costs: its creation and first all_reduce, and its GPU memory (issue 11).
  timeout "$(left 90)" python3 "$root/tests/torch/bench_init.py" --nranks "$NGPUS" --with-library "$dropin" \
    --json "$out/torch-init.json" >"$out/torch-init.txt" 2>&1
  verdict torch-init $? "(torch-init.txt)"
else note "SKIP torch (no time, no torch, or fewer GPUs than ranks: it needs a GPU a rank)"; fi

# ---------- perf-blocks: 256 MiB calls on 8 and 16 blocks, Purlin and NCCL, last: it may be cut ----------
# Inference overlaps collectives with compute, so the SMs a call takes matter: the bandwidth
# each library reaches with its blocks capped (perf.json "capped", apart from "rows").
if want perf-blocks; then
  for perf_blocks in 8 16; do
    for lib in "${libs[@]}"; do
      for c in "${big[@]}" "${rest[@]}"; do perf "$lib" eager 30 "$c" -b 256M -e 256M -n 10 -w 2 -c 1; done
    done
  done
  perf_blocks=""
  perf_verdicts perf-blocks
fi

# ---------- ceilings: what thread blocks and copy engines move over NVLink at most ----------
t=$(left 90)
if ! want ceilings; then :; elif (( t > 30 )); then
  for b in smbench cebench; do
    nvcc -std=c++17 -O3 -arch=sm_90 -o "$bin/$b" "$root/tests/gpu/$b.cu" >>"$out/env.log" 2>&1 || { note "FAIL ceilings ($b did not build: env.log)"; fail=1; }
  done
  [[ -x $bin/smbench ]] && timeout "$(( t / 2 ))" "$bin/smbench" 1024 >"$out/ceilings-sm.txt" 2>&1
  verdict ceilings $? "($(grep -E '^push both 64 ' "$out/ceilings-sm.txt" | cut -c1-40))"
  [[ -x $bin/cebench ]] && timeout "$(( t / 2 ))" "$bin/cebench" 1024 >"$out/ceilings-ce.txt" 2>&1
else note "SKIP ceilings (no time)"; fi

# ---------- summary ----------
{
  echo; echo "## Purlin vs NCCL (tests/gpu/compare.py)"
  earlier=() nccl_logs=("$out/perf-nccl.txt")
  for d in ${PURLIN_GPU_EARLIER:-}; do earlier+=(--earlier "$d"); nccl_logs+=("$d/perf-nccl.txt"); done
  python3 "$root/tests/gpu/compare.py" "$out/perf-purlin.txt" "$out/perf-nccl.txt" --json "$out/perf.json" \
    --rmsnorm "$out/rmsnorm.json" --torch "$out/torch-allreduce.json" --ceilings "$out/ceilings-sm.txt" \
    --costs "$out/torch-init.json" "${earlier[@]}" \
    --commit "$(cat "$out/COMMIT")" --gpus "$NGPUS" \
    --nccl-version "$(cat "${nccl_logs[@]}" 2>/dev/null | grep -m1 -o 'NCCL API version [0-9]*' | grep -o '[0-9]*$')" || fail=1
  python3 "$root/tools/perfplot.py" "$out/perf.json" -o "$out/perf.svg" && echo "plot: perf.svg"
} >>"$summary" 2>&1
grep -E "^(PASS|FAIL|SKIP)|#wrong total" "$summary"
echo "gpu suite: $([[ $fail == 0 ]] && echo PASS || echo FAIL)" | tee -a "$summary"
exit $fail
