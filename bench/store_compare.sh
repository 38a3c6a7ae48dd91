#!/usr/bin/env bash
# sluiced on a central Redis (--store redis://) against the same clients calling the
# module in that Redis directly, with the same load generator in the same run.
#
#   bench/store_compare.sh           prints a markdown table (raw CSV lines on stderr)
#
# One redis-server with sluice-redis.so, pinned to $REDIS_CPU. redis-benchmark, $CLIENTS
# clients, $KEYSPACE random keys, CL.THROTTLE at pipelining 1 and 16:
#   - direct: redis-benchmark -> Redis (the module answers)
#   - through sluiced: redis-benchmark -> sluiced --threads 1 --store redis:// -> Redis
#     (sluiced sends SL.DECIDE; many clients' takes leave in one pipelined write)
#   - through sluiced on the Lua script: the same, Redis without the module
# The servers (Redis, and sluiced with --threads 1) share $REDIS_CPU, and redis-benchmark
# has $CLIENT_CPU, as in the other comparisons: on two cores the load generator needs one
# to itself ($SLUICED_CPU moves sluiced, to $CLIENT_CPU say). Each run
# reports throughput, latency, and the CPU time per request of Redis and of sluiced
# (/proc/PID/stat), which a busy machine disturbs far less than wall-clock figures.
# The rounds are interleaved (every configuration once per round); the table gives
# the median of each figure.
#
# Environment: SLUICED (build/bin/sluiced), MODULE (build/lib/sluice-redis.so),
# REDIS_SERVER (redis-server), REDIS_CPU (0), CLIENT_CPU (1), SLUICED_CPU ($REDIS_CPU), CLIENTS (50),
# KEYSPACE (100000), REQUESTS_P1 (200000), REQUESTS_P16 (1000000), ROUNDS (3).
set -euo pipefail
cd "$(dirname "$0")/.."

SLUICED=${SLUICED:-build/bin/sluiced}
MODULE=${MODULE:-build/lib/sluice-redis.so}
REDIS_SERVER=${REDIS_SERVER:-redis-server}
REDIS_CPU=${REDIS_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
SLUICED_CPU=${SLUICED_CPU:-$REDIS_CPU}
CLIENTS=${CLIENTS:-50}
KEYSPACE=${KEYSPACE:-100000}
REQUESTS_P1=${REQUESTS_P1:-200000}
REQUESTS_P16=${REQUESTS_P16:-1000000}
ROUNDS=${ROUNDS:-3}
CELL_ARGS=(99 100 3600) # CL.THROTTLE key max_burst count period_s: keys stay all run

BENCH_NAME=store_compare
. bench/lib.sh
bench_need "$REDIS_SERVER" redis-benchmark redis-cli taskset
[[ -x $SLUICED ]] || bench_fail "$SLUICED not built (make)"
[[ -f $MODULE ]] || bench_fail "$MODULE not built (make)"
(($(nproc) >= 2)) || bench_fail "needs 2 cores; this machine has $(nproc)"
bench_workdir

start_redis() { # module|script -> RD_PORT RD_PID
  RD_PORT=$(free_port)
  local load=()
  [[ $1 == module ]] && load=(--loadmodule "$(realpath "$MODULE")")
  taskset -c "$REDIS_CPU" "$REDIS_SERVER" --port "$RD_PORT" --bind 127.0.0.1 --save '' \
    --appendonly no --daemonize no --logfile "$work/redis.$1.log" "${load[@]}" &
  RD_PID=$!
  pids+=("$RD_PID")
  wait_ping "$RD_PORT" "$RD_PID"
}

start_sluiced() { # redis-port -> SL_PORT SL_PID
  SL_PORT=$(free_port)
  taskset -c "$SLUICED_CPU" "$SLUICED" --port "$SL_PORT" --http-port 0 --threads 1 \
    --store "redis://127.0.0.1:$1" --store-timeout-ms 1000 2>"$work/sluiced.$1.log" &
  SL_PID=$!
  pids+=("$SL_PID")
  wait_ping "$SL_PORT" "$SL_PID"
}

# One redis-benchmark run; prints "rps p50 p99 redis_cpu sluiced_cpu" (latencies in
# ms, CPU in µs per request; sluiced_cpu 0 for a direct run).
bench() { # port pipeline requests sluiced-pid-or-0 redis-pid
  local port=$1 pipe=$2 n=$3 spid=$4 rpid=$5 out r0 r1 s0=0 s1=0
  r0=$(cpu_ticks "$rpid")
  ((spid)) && s0=$(cpu_ticks "$spid")
  out=$(taskset -c "$CLIENT_CPU" redis-benchmark -h 127.0.0.1 -p "$port" -c "$CLIENTS" \
    -n "$n" -P "$pipe" -r "$KEYSPACE" --csv CL.THROTTLE "key:__rand_int__" "${CELL_ARGS[@]}" \
    2>/dev/null | tail -n 1)
  r1=$(cpu_ticks "$rpid")
  ((spid)) && s1=$(cpu_ticks "$spid")
  echo "$out" >>"$work/raw.csv"
  echo "$out" | awk -F'","' -v rt=$((r1 - r0)) -v st=$((s1 - s0)) -v hz="$CLK_TCK" -v n="$n" \
    '{gsub(/"/, "", $0); split($0, f, ","); printf "%s %s %s %.2f %.2f\n", f[2], f[5], f[7], rt * 1e6 / hz / n, st * 1e6 / hz / n}'
}

# Each configuration answers CL.THROTTLE as redis-cell would (redis-benchmark does not
# look at replies).
probe() { # port label
  local got
  got=$(redis-cli -p "$1" CL.THROTTLE "probe:$2" "${CELL_ARGS[@]}" | tr '\n' ' ')
  [[ $got == "0 100 99 -1 36 " ]] || bench_fail "$2 answered CL.THROTTLE with: $got"
}

declare -A R
echo "store_compare: Redis on CPU $REDIS_CPU, sluiced on CPU $SLUICED_CPU, redis-benchmark on CPU $CLIENT_CPU, $CLIENTS clients, $KEYSPACE random keys" >&2
start_redis module
MOD_PORT=$RD_PORT MOD_PID=$RD_PID
start_redis script
LUA_PORT=$RD_PORT LUA_PID=$RD_PID
start_sluiced "$MOD_PORT"
SLM_PORT=$SL_PORT SLM_PID=$SL_PID
start_sluiced "$LUA_PORT"
SLL_PORT=$SL_PORT SLL_PID=$SL_PID
probe "$MOD_PORT" direct
probe "$SLM_PORT" sluiced-module
probe "$SLL_PORT" sluiced-script
for round in $(seq "$ROUNDS"); do
  for pipe in 1 16; do
    n=$REQUESTS_P1
    ((pipe == 16)) && n=$REQUESTS_P16
    echo "store_compare: round $round of $ROUNDS, pipeline $pipe, $n requests per run" >&2
    R[direct_$pipe]+="$(bench "$MOD_PORT" "$pipe" "$n" 0 "$MOD_PID")"$'\n'
    R[module_$pipe]+="$(bench "$SLM_PORT" "$pipe" "$n" "$SLM_PID" "$MOD_PID")"$'\n'
    R[script_$pipe]+="$(bench "$SLL_PORT" "$pipe" "$n" "$SLL_PID" "$LUA_PID")"$'\n'
  done
done
# The decisions were Redis's, not a store-down policy's.
for p in "$SLM_PORT" "$SLL_PORT"; do
  fb=$(redis-cli -p "$p" INFO store | tr -d '\r' |
    awk -F: '/^decisions_(fail_open|fail_closed|local):/ { s += $2 } END { print s + 0 }')
  ((fb == 0)) || bench_fail "sluiced on port $p let a store-down policy decide $fb times"
done
for pid in "$SLM_PID" "$SLL_PID" "$MOD_PID" "$LUA_PID"; do stop "$pid"; done

median() { # entry field (1 rps, 2 p50, 3 p99, 4 redis cpu, 5 sluiced cpu)
  printf '%s' "${R[$1]}" | awk -v f="$2" 'NF { print $f }' | sort -g |
    awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
row() { # label pipeline key
  printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$1" "$2" "$(median "$3" 1)" \
    "$(median "$3" 2)" "$(median "$3" 3)" "$(median "$3" 4)" "$(median "$3" 5)"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

echo
echo "Medians of $ROUNDS rounds."
echo "| path (CL.THROTTLE) | pipeline | requests/s | p50 ms | p99 ms | Redis CPU µs/request | sluiced CPU µs/request |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for pipe in 1 16; do
  row "direct: the module in Redis" "$pipe" "direct_$pipe"
  row "through sluiced, module" "$pipe" "module_$pipe"
  row "through sluiced, Lua script" "$pipe" "script_$pipe"
done
echo
for pipe in 1 16; do
  echo "Pipeline $pipe: through sluiced / direct, throughput $(ratio "$(median "module_$pipe" 1)" "$(median "direct_$pipe" 1)")×, Redis CPU per request $(ratio "$(median "module_$pipe" 4)" "$(median "direct_$pipe" 4)")×; added p50 $(awk -v a="$(median "module_$pipe" 2)" -v b="$(median "direct_$pipe" 2)" 'BEGIN { printf "%.0f", (a - b) * 1000 }') µs"
done
