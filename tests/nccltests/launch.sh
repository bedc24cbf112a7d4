#!/usr/bin/env bash
# tests/nccltests/launch.sh N COMMAND [ARG...]: runs N copies of COMMAND as the
# world ranks of minimpi (mpi.h), like `mpirun -np N`. Exits 0 when every rank
# did, else with a failing rank's status; when one rank fails the hub
# stops the others, and a rank still running 5 s later is killed.
set -u
n=${1:?usage: launch.sh N COMMAND [ARG...]}; shift
dir=$(mktemp -d "${TMPDIR:-/tmp}/minimpi.XXXXXX")
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
trap 'exit 143' TERM INT
for ((r = 0; r < n; r++)); do
  MINIMPI_RANK=$r MINIMPI_SIZE=$n MINIMPI_HUB=$dir/hub "$@" &
  pids+=($!)
done
rc=0 deadline=
while (( ${#pids[@]} )); do
  sleep 0.1
  for i in "${!pids[@]}"; do
    kill -0 "${pids[i]}" 2>/dev/null && continue
    wait "${pids[i]}"; s=$?
    unset 'pids[i]'
    if (( s != 0 && rc == 0 )); then rc=$s deadline=$((SECONDS + 5)); fi
  done
  # After a failure the hub's exit stops the others; a rank stuck elsewhere is killed after 5 s.
  if [[ -n $deadline ]] && (( SECONDS >= deadline && ${#pids[@]} )); then kill "${pids[@]}" 2>/dev/null; fi
done
exit "$rc"
