# bench/lib.sh: what the comparison scripts share. Sourced (not run) from the
# repository root by bench/*_compare.sh, after `set -euo pipefail`, with
# BENCH_NAME set to the script's name for its messages.
#
#   bench_need TOOL...      exits with a message when a tool is not on the PATH
#   bench_workdir           makes $work (a temporary directory) and the $pids list;
#                           on exit every process in $pids is stopped, $work removed
#                           (kept, with the servers' logs, when BENCH_KEEP is set)
#   free_port               a free TCP port on 127.0.0.1
#   wait_ping PORT PID [LOG]  waits for a RESP server's PONG (10 s), or exits (with
#                           the tail of LOG when the server has exited)
#   stop PID                stops a process and reaps it
#   cpu_ticks PID           CPU time (user + system, all threads) of a process and
#                           its children, in clock ticks ($CLK_TCK a second)
#   rss_kb PID              the process's resident memory, in KiB

bench_fail() {
  echo "$BENCH_NAME: $*" >&2
  exit 1
}

bench_need() {
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null || bench_fail "$tool not found (scripts/deps.sh)"
  done
}

bench_workdir() {
  work=$(mktemp -d)
  pids=()
  trap bench_cleanup EXIT
}

bench_cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [[ -n ${BENCH_KEEP:-} ]]; then
    echo "$BENCH_NAME: the servers' logs are kept in $work (BENCH_KEEP)" >&2
  else
    rm -rf "$work"
  fi
}

free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

wait_ping() { # port pid [log]
  for _ in $(seq 1 200); do
    if ! kill -0 "$2" 2>/dev/null; then
      [[ -n ${3:-} ]] && tail "$3" >&2
      bench_fail "the server on port $1 exited"
    fi
    [[ $(redis-cli -p "$1" PING 2>/dev/null) == PONG ]] && return 0
    sleep 0.05
  done
  bench_fail "no PONG on port $1 within 10 s"
}

stop() { # pid
  kill "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}

cpu_ticks() { # pid
  local p total=0
  for p in "$1" $(pgrep -P "$1" || true); do
    total=$((total + $(awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$p/stat")))
  done
  echo "$total"
}
CLK_TCK=$(getconf CLK_TCK)

rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
