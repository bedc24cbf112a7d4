# tests/common/client.sh: sourced by the run scripts of the NCCL clients (tests/torch,
# tests/cupy, tests/pynccl).
#
# run_client NAME SECONDS TAIL LOG LINES CMD...: runs CMD under a timeout of SECONDS with its
# output in LOG, then prints LOG's lines that match the regular expression LINES but not those
# that end in ": ok", a note if it timed out, LOG's last TAIL lines if it failed, and LOG's
# path. Returns CMD's status.
run_client() {
  local name=$1 seconds=$2 tail=$3 log=$4 lines=$5 rc
  shift 5
  timeout "$seconds" "$@" >"$log" 2>&1
  rc=$?
  grep -E "$lines" "$log" | grep -vE ": ok$"
  [[ $rc == 124 ]] && echo "$name: timed out after $seconds s (log: $log)"
  [[ $rc != 0 ]] && tail -n "$tail" "$log"
  echo "$name log: $log"
  return $rc
}
