#!/usr/bin/env bash
# tests/nccltests/run.sh [LOGDIR]: runs NVIDIA's nccl-tests (built by build.sh
# into $NCCL_TESTS_BUILD, default build/nccl-tests) on Purlin's drop-in, and on
# the real NCCL beside it where NCCL can run the same ranks. Needs a machine
# with NVIDIA GPUs and a CUDA driver; no MPI (the programs use minimpi).
#
# Every program (all_reduce_perf ... hypercube_perf) runs every case below
# with -c 1, so each rank checks its own output; a run passes when the program
# exits 0 ("Out of bounds values : 0 OK"). The verdict is Purlin's runs; NCCL's
# are reported beside them as BASELINE lines. Ranks are processes:
#   1 rank, and NGPUS ranks one per GPU, on both libraries;
#   where only one GPU is listed, 2 and 4 ranks on GPU 0 (NCCL_TESTS_DEVICE=0),
#   on Purlin alone (NCCL refuses two ranks on one GPU).
# Cases (the nccl-tests options each adds):
#   check     every dtype and op (avg on five types), odd sizes from 24 B to 1.2 MiB
#   large     float sum, 16 MiB to 256 MiB
#   graph     every dtype, sum, CUDA graphs (-G 3)
#   agg       4 calls aggregated in one group, no barrier (-m 4 -z 0)
#   blocking  the null stream, blocking after each call (-y 1 -z 1)
#   unalign   buffers 3 elements past their allocation (-u 3), every dtype
#   register  buffers registered (-R 1), then as symmetric windows (-R 2)
#   cta       a communicator made with a config (-x 1, NCCL_CTA_POLICY_EFFICIENCY)
# Settings: NGPUS (tests/gpu/ngpus.sh), NCCL_TESTS_NCCL_LIB (the directory of the
# real libnccl.so.2; default the nvidia-nccl-cu13 package's, else the system's;
# "none" leaves NCCL out), NCCL_TESTS_LAYOUTS (RANKS:SHARED pairs, e.g. "2:1 4:1";
# SHARED=1 puts every rank on GPU 0), NCCL_TESTS_BUDGET_S (default 600: a run that would
# start past it is listed as not run), NCCL_TESTS_CASES and NCCL_TESTS_PROGRAMS
# (space-separated subsets). LOGDIR (default $PURLIN_GPU_LOGS/nccl-tests, else
# build/gpu/logs/nccl-tests) gets summary.txt and one log per run.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 PURLIN_TIMEOUT="${PURLIN_TIMEOUT:-20}"
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${NCCL_TESTS_BUILD:-$root/build/nccl-tests}
out=${1:-${PURLIN_GPU_LOGS:-$root/build/gpu/logs}/nccl-tests}
mkdir -p "$out"
summary=$out/summary.txt
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
[[ -x $build/all_reduce_perf ]] || { note "FAIL nccl-tests: no programs in $build (tests/nccltests/build.sh)"; exit 1; }

source "$root/tests/gpu/ngpus.sh"
purlin_lib=$root/build/nccl-so
source "$root/tests/gpu/find-nccl.sh"
nccl_lib=${NCCL_TESTS_NCCL_LIB:-$nccl_lib}
[[ $nccl_lib == none || ! -f $nccl_lib/libnccl.so.2 ]] && nccl_lib=
budget=${NCCL_TESTS_BUDGET_S:-600}
start=$(date +%s)
{ date -u; echo "NGPUS=$NGPUS GPUS_LISTED=$GPUS_LISTED nccl-tests $(cat "$build/SOURCE" 2>/dev/null)"
  echo "purlin=$purlin_lib/libnccl.so.2 nccl=${nccl_lib:-none}"; } >"$out/env.log"

programs=(${NCCL_TESTS_PROGRAMS:-all_reduce all_gather broadcast reduce_scatter reduce alltoall alltoallv scatter gather sendrecv hypercube})
cases=(${NCCL_TESTS_CASES:-check large graph agg blocking unalign register cta})
common=(-c 1 -n 2 -w 1)
reducing=" all_reduce reduce reduce_scatter "
options() { # options CASE PROGRAM RANKS: the runs of one case, one a line: a name, then nccl-tests options
  local sizes="-b 24 -e 2M -f 37" op t
  case $1 in
  check)
    # On one rank NCCL refuses avg and PreMulSum on fp8 (and so does Purlin), where -o all
    # stops: those two ops get types of their own there.
    if [[ $reducing != *" $2 "* || $3 != 1 ]]; then echo "check -d all -o all $sizes"; return; fi
    for op in sum prod max min; do echo "check-$op -d all -o $op $sizes"; done
    for op in avg mulsum; do
      for t in int8 uint64 half bfloat16 double; do echo "check-$op-$t -d $t -o $op $sizes"; done
    done ;;
  large) echo "large -d float -o sum -b 16M -e 256M -f 4" ;;
  graph) echo "graph -d all -o sum $sizes -G 3" ;;
  agg) echo "agg -d float -o sum $sizes -m 4 -z 0" ;;
  blocking) echo "blocking -d half -o max $sizes -y 1 -z 1" ;;
  unalign) echo "unalign -d all -o sum $sizes -u 3" ;;
  register) echo "register -d float -o sum $sizes -R 1"; echo "register-symmetric -d bfloat16 -o sum $sizes -R 2" ;;
  cta) echo "cta -d float -o sum $sizes -x 1" ;;
  *) return 1 ;;
  esac
}

# layouts: RANKS:SHARED, where SHARED=1 puts every rank on GPU 0.
if [[ -n ${NCCL_TESTS_LAYOUTS:-} ]]; then layouts=($NCCL_TESTS_LAYOUTS)
elif (( GPUS_LISTED > 1 )); then layouts=(1:0 "$NGPUS:0")
else layouts=(1:0 2:1 4:1); fi

fail=0 notrun=0
for layout in "${layouts[@]}"; do
  ranks=${layout%:*} shared=${layout#*:}
  libs=(purlin); [[ -n $nccl_lib && $shared == 0 ]] && libs+=(nccl)
  for c in "${cases[@]}"; do
    (( ranks == 1 )) && [[ $c != check && $c != graph ]] && continue # one rank: the two that check the most
    options "$c" x 1 >/dev/null || { note "FAIL unknown case $c"; fail=1; continue; }
    for p in "${programs[@]}"; do
      mapfile -t runs < <(options "$c" "$p" "$ranks")
      for lib in "${libs[@]}"; do
        for run in "${runs[@]}"; do
          name="$lib-r$ranks$([[ $shared == 1 ]] && echo -gpu0)-${run%% *}-$p"
          log=$out/$name.log
          left=$(( budget - ($(date +%s) - start) ))
          if (( left < 10 )); then notrun=$((notrun + 1)); continue; fi
          libdir=$purlin_lib; [[ $lib == nccl ]] && libdir=$nccl_lib
          env=(LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
          [[ $shared == 1 ]] && env+=(NCCL_TESTS_DEVICE=0)
          t0=$(date +%s)
          # shellcheck disable=SC2086
          env "${env[@]}" timeout -k 5 "$(( left < 120 ? left : 120 ))" \
            "$here/launch.sh" "$ranks" "$build/${p}_perf" "${common[@]}" ${run#* } >"$log" 2>&1
          rc=$?
          bounds=$(grep -h "Out of bounds" "$log" | head -1 | sed 's/^# *//')
          verdict=PASS; (( rc == 0 )) || verdict=FAIL
          [[ $lib == purlin && $verdict == FAIL ]] && fail=1
          [[ $lib == nccl ]] && verdict="BASELINE $verdict" # NCCL's own result: reported, not judged
          if (( rc == 0 )); then note "$verdict $name ($(( $(date +%s) - t0 ))s; $bounds)"
          else note "$verdict $name (status $rc, $(( $(date +%s) - t0 ))s; ${bounds:-$(grep -v '^#' "$log" | grep -iE 'error|fail|invalid' | head -1)})"; fi
        done
      done
    done
  done
done
(( notrun > 0 )) && note "NOTE $notrun runs not started: NCCL_TESTS_BUDGET_S=$budget spent"
note "nccl-tests: $([[ $fail == 0 ]] && echo PASS || echo FAIL) (Purlin: $(grep -c '^PASS' "$summary") passed, $(grep -c '^FAIL' "$summary") failed; NCCL: $(grep -c '^BASELINE PASS' "$summary") passed, $(grep -c '^BASELINE FAIL' "$summary") failed; $(( $(date +%s) - start ))s)"
exit "$fail"
