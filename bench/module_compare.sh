#!/usr/bin/env bash
# sluice-redis.so inside Redis vs what a Redis user would do without it, in one
# redis-server, with the same redis-benchmark settings, in the same run.
#
#   bench/module_compare.sh          prints markdown tables (raw CSV lines on stderr)
#
# One redis-server with the module loaded, pinned to $SERVER_CPU; redis-benchmark on
# $CLIENT_CPU, $CLIENTS clients, $KEYSPACE random keys, pipelining 1 and 16:
#   - CL.THROTTLE (the module)
#   - a token bucket in Lua through EVALSHA (bench/lua/token_bucket.lua: the usual way)
#   - sluice's own Lua fallback for CL.THROTTLE: EVALSHA of src/backend/lua/sluice.lua (the
#     central store's script, SL.DECIDE's arguments) with a cell group
#   - INCR (a fixed window done the cheap way: no expiry, no answer but a count)
#   - SET key <20 bytes> PXAT <a day from the start> (what the module writes for each take,
#     done by Redis itself, with no decision: the cost of the write and its expiry)
#   - PING (Redis doing nothing)
# Each run also gives the server's CPU time per request (/proc/PID/stat), which a busy
# machine disturbs much less than the wall-clock figures.
# Then memory per key: fresh servers, INFO memory used_memory before and after $KEYS
# distinct keys loaded through one pipe (redis-cli --pipe), for the module's
# CL.THROTTLE and the Lua token bucket.
#
# Environment: MODULE (default build/lib/sluice-redis.so), REDIS_SERVER (redis-server),
# SERVER_CPU (0), CLIENT_CPU (1), CLIENTS (50), KEYSPACE (100000), REQUESTS_P1 (300000),
# REQUESTS_P16 (2000000), KEYS (1000000), ROWS (which measurements to make, by name:
# default "cell lua celllua incr setpx ping mem", all of the above; e.g. ROWS="cell incr ping"
# for CL.THROTTLE against INCR and PING only).
set -euo pipefail
cd "$(dirname "$0")/.."

MODULE=${MODULE:-build/lib/sluice-redis.so}
REDIS_SERVER=${REDIS_SERVER:-redis-server}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
CLIENTS=${CLIENTS:-50}
KEYSPACE=${KEYSPACE:-100000}
REQUESTS_P1=${REQUESTS_P1:-300000}
REQUESTS_P16=${REQUESTS_P16:-2000000}
KEYS=${KEYS:-1000000}
ROWS=" ${ROWS:-cell lua celllua incr setpx ping mem} "
# Every request checks 100 an hour, burst 100, so that no key is full again (and
# expired) during the run; for the memory figure a day, as loading takes a while.
CELL_ARGS=(99 100 3600)          # CL.THROTTLE key max_burst count period_s
LUA_ARGS=(100 100 3600000 1)     # capacity, tokens per period, period_ms, cost
CELL_DECIDE=(cell "${CELL_ARGS[@]}" 1 0 0 0) # the same as sluice.lua's group (cost 1)
CELL_ARGS_MEM=(99 100 86400)
# The SET row's value has the module's 20 bytes; its expiry is a day away.
SET_VALUE=01234567890123456789
SET_PXAT=$(($(date +%s) * 1000 + 86400000))
LUA_ARGS_MEM=(100 100 86400000 1)

BENCH_NAME=module_compare
. bench/lib.sh
bench_need "$REDIS_SERVER" redis-benchmark redis-cli taskset pgrep python3
[[ -f $MODULE ]] || bench_fail "$MODULE not built (make)"
MODULE=$(realpath "$MODULE")
(($(nproc) >= 2)) || bench_fail "needs 2 cores (server and load generator apart)"
bench_workdir

start_redis() {
  PORT=$(free_port)
  taskset -c "$SERVER_CPU" "$REDIS_SERVER" --port "$PORT" --bind 127.0.0.1 --save '' \
    --appendonly no --daemonize no --logfile "$work/redis.log" --dir "$work" \
    --loadmodule "$MODULE" &
  PID=$!
  pids+=("$PID")
  wait_ping "$PORT" "$PID" "$work/redis.log"
  SHA_TB=$(redis-cli -p "$PORT" SCRIPT LOAD "$(cat bench/lua/token_bucket.lua)")
  SHA_CELL=$(redis-cli -p "$PORT" SCRIPT LOAD "$(cat src/backend/lua/sluice.lua)")
  [[ $SHA_TB =~ ^[0-9a-f]{40}$ && $SHA_CELL =~ ^[0-9a-f]{40}$ ]] ||
    { echo "module_compare: SCRIPT LOAD failed" >&2; exit 1; }
}

used_memory() { redis-cli -p "$PORT" INFO memory | tr -d '\r' | awk -F: '$1 == "used_memory" {print $2}'; }

# One redis-benchmark run; prints "rps p50 p99 cpu" (latencies in ms; cpu: the server's
# CPU time per request in microseconds, which a busy machine disturbs far less than the
# wall-clock figures).
bench() { # pipeline requests command...
  local pipe=$1 n=$2 out t0 t1
  shift 2
  t0=$(cpu_ticks "$PID")
  out=$(taskset -c "$CLIENT_CPU" redis-benchmark -h 127.0.0.1 -p "$PORT" -c "$CLIENTS" -n "$n" \
    -P "$pipe" -r "$KEYSPACE" --csv "$@" 2>/dev/null | tail -n 1)
  t1=$(cpu_ticks "$PID")
  echo "$out" >>"$work/raw.csv"
  echo "$out" | awk -v ticks=$((t1 - t0)) -v hz="$CLK_TCK" -v n="$n" \
    '{gsub(/"/, "", $0); split($0, f, ","); printf "%s %s %s %.2f\n", f[2], f[5], f[7], ticks * 1e6 / hz / n}'
}

# The commands answer what they should before they are timed (redis-benchmark does not look).
probe() {
  local a b c d
  a=$(redis-cli -p "$PORT" CL.THROTTLE probe:m "${CELL_ARGS[@]}" | tr '\n' ' ')
  b=$(redis-cli -p "$PORT" EVALSHA "$SHA_TB" 1 probe:t "${LUA_ARGS[@]}" | tr '\n' ' ')
  c=$(redis-cli -p "$PORT" EVALSHA "$SHA_CELL" 1 probe:c TAKE 0 "${CELL_DECIDE[@]}" | tr '\n' ' ')
  d=$(redis-cli -p "$PORT" SL.DECIDE TAKE 0 1 probe:d "${CELL_DECIDE[@]}" | tr '\n' ' ')
  [[ $a == "0 100 99 -1 36 " ]] || { echo "module_compare: CL.THROTTLE answered: $a" >&2; exit 1; }
  [[ $b == "1 99 0 " ]] || { echo "module_compare: Lua token bucket answered: $b" >&2; exit 1; }
  [[ $c == "$d" ]] || { echo "module_compare: sluice.lua answered: $c, the module $d" >&2; exit 1; }
}

# Loads KEYS distinct keys through one pipe; kind: module or lua.
load_keys() {
  python3 - "$1" "$KEYS" "$SHA_TB" "${CELL_ARGS_MEM[*]}" "${LUA_ARGS_MEM[*]}" <<'PY' |
import sys
kind, n, sha, cell, lua = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4].split(), sys.argv[5].split()
out = sys.stdout.buffer
def cmd(*args):
    b = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a.encode()
        b.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(b)
chunk = []
for i in range(n):
    key = "mem:%d" % i
    chunk.append(cmd("CL.THROTTLE", key, *cell) if kind == "module" else cmd("EVALSHA", sha, "1", key, *lua))
    if len(chunk) == 10000:
        out.write(b"".join(chunk)); chunk = []
out.write(b"".join(chunk))
PY
    redis-cli -p "$PORT" --pipe >"$work/pipe.$1.log"
  echo "module_compare: $1: $(tail -n 1 "$work/pipe.$1.log")" >&2
  grep -q 'errors: 0,' "$work/pipe.$1.log" || { echo "module_compare: error replies loading $1" >&2; exit 1; }
}

# Whether measurement $1 is among ROWS.
want() { [[ $ROWS == *" $1 "* ]]; }

declare -A R
echo "module_compare: $(nproc) cores; redis-server on CPU $SERVER_CPU, redis-benchmark on CPU $CLIENT_CPU, $CLIENTS clients, $KEYSPACE random keys" >&2
echo "module_compare: $("$REDIS_SERVER" --version | head -c 60); module $MODULE" >&2
load_start=$(cut -d' ' -f1-3 /proc/loadavg)

start_redis
probe
for pipe in 1 16; do
  n=$REQUESTS_P1
  ((pipe == 16)) && n=$REQUESTS_P16
  echo "module_compare: pipeline $pipe, $n requests per run" >&2
  if want cell; then R[cell_$pipe]=$(bench "$pipe" "$n" CL.THROTTLE "key:__rand_int__" "${CELL_ARGS[@]}"); fi
  if want lua; then R[lua_$pipe]=$(bench "$pipe" "$n" EVALSHA "$SHA_TB" 1 "lua:__rand_int__" "${LUA_ARGS[@]}"); fi
  if want celllua; then R[celllua_$pipe]=$(bench "$pipe" "$n" EVALSHA "$SHA_CELL" 1 "cl:__rand_int__" TAKE 0 "${CELL_DECIDE[@]}"); fi
  if want incr; then R[incr_$pipe]=$(bench "$pipe" "$n" INCR "incr:__rand_int__"); fi
  if want setpx; then R[setpx_$pipe]=$(bench "$pipe" "$n" SET "setpx:__rand_int__" "$SET_VALUE" PXAT "$SET_PXAT"); fi
  if want ping; then R[ping_$pipe]=$(bench "$pipe" "$n" PING); fi
done
echo "module_compare: keys after the throughput runs: $(redis-cli -p "$PORT" DBSIZE)" >&2
stop "$PID"

declare -A M
mem_kinds=()
if want mem; then mem_kinds=(module lua); fi
for kind in "${mem_kinds[@]}"; do
  start_redis
  before=$(used_memory)
  load_keys "$kind"
  after=$(used_memory)
  keys=$(redis-cli -p "$PORT" DBSIZE)
  M[$kind]="$keys $before $after"
  stop "$PID"
done

row() {
  [[ -n ${R[$3]:-} ]] || return 0
  read -r rps p50 p99 cpu <<<"${R[$3]}"
  printf '| %s | %s | %s | %s | %s | %s |\n' "$1" "$2" "$rps" "$p50" "$p99" "$cpu"
}
first() { echo "${R[$1]:-0}" | awk '{print $1}'; }
cpu() { echo "${R[$1]:-0 0 0 0}" | awk '{print $4}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

echo
echo "| command (one redis-server, module loaded) | pipeline | requests/s | p50 ms | p99 ms | server CPU µs/request |"
echo "|---|---:|---:|---:|---:|---:|"
for pipe in 1 16; do
  row "CL.THROTTLE (sluice-redis.so)" "$pipe" "cell_$pipe"
  row "EVALSHA token bucket (bench/lua/token_bucket.lua)" "$pipe" "lua_$pipe"
  row "EVALSHA CL.THROTTLE in Lua (src/backend/lua/sluice.lua, a cell group)" "$pipe" "celllua_$pipe"
  row "INCR" "$pipe" "incr_$pipe"
  row "SET key <20 bytes> PXAT <ms>" "$pipe" "setpx_$pipe"
  row "PING" "$pipe" "ping_$pipe"
done
echo
echo "| ratio | pipeline 1 | pipeline 16 |"
echo "|---|---:|---:|"
ratio_row() { # label numerator denominator (row names without the pipeline)
  [[ -n ${R[$2_1]:-} && -n ${R[$3_1]:-} ]] || return 0
  echo "| $1 | $(ratio "$(first "$2_1")" "$(first "$3_1")")× | $(ratio "$(first "$2_16")" "$(first "$3_16")")× |"
}
ratio_row "CL.THROTTLE / EVALSHA token bucket" cell lua
ratio_row "CL.THROTTLE / EVALSHA sluice.lua" cell celllua
ratio_row "CL.THROTTLE / INCR" cell incr
ratio_row "CL.THROTTLE / SET ... PXAT" cell setpx
cpu_row() { # label command row (server CPU per request: its / CL.THROTTLE's)
  [[ -n ${R[cell_1]:-} && -n ${R[$2_1]:-} ]] || return 0
  echo "| server CPU per request: $1 / CL.THROTTLE | $(ratio "$(cpu "$2_1")" "$(cpu cell_1)")× | $(ratio "$(cpu "$2_16")" "$(cpu cell_16)")× |"
}
cpu_row INCR incr
cpu_row "SET ... PXAT" setpx
if want mem; then
echo
echo "| memory after $KEYS keys (INFO used_memory) | keys | before | after | bytes per key |"
echo "|---|---:|---:|---:|---:|"
fi
for kind in "${mem_kinds[@]}"; do
  read -r keys before after <<<"${M[$kind]}"
  label="CL.THROTTLE (module: 20-byte string value + expiry)"
  [[ $kind == lua ]] && label="Lua token bucket (hash of 2 fields + expiry)"
  echo "| $label | $keys | $before | $after | $(awk -v a="$before" -v b="$after" -v n="$keys" 'BEGIN { printf "%.1f", (b - a) / n }') |"
done
echo
echo "Machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')); load average at start $load_start, at end $(cut -d' ' -f1-3 /proc/loadavg)."
echo "raw redis-benchmark CSV (the rows run, in the tables' order; P1 then P16):" >&2
cat "$work/raw.csv" >&2
