#!/usr/bin/env bash
# sluiced vs Redis on the Redis protocol, with the same load generator in the same run.
#
#   bench/resp_compare.sh            prints a markdown table (and the raw CSV lines)
#
# Both servers run on one core (taskset -c $SERVER_CPU: sluiced with --threads 1),
# redis-benchmark on another ($CLIENT_CPU), $CLIENTS clients, pipelining 1 and 16:
#   - sluiced CL.THROTTLE on 100 000 random keys vs Redis running a token bucket in Lua
#     (bench/lua/token_bucket.lua, EVALSHA: the common way to rate limit on Redis today)
#   - sluiced CL.THROTTLE vs Redis answering PING (Redis doing nothing)
# then the resident memory per key of each after $RSS_KEYS keys are loaded through a
# pipeline (VmRSS before and after, from /proc/PID/status). Besides throughput and
# latency, each run reports the server's CPU time per request (/proc/PID/stat), which a
# busy machine disturbs much less than wall-clock figures.
#
# On a shared machine one run can be off by a third: the throughput runs are repeated
# ROUNDS times, interleaved (each round runs every command once, the compared pairs back
# to back), and the tables give the median of each figure; the ratio of each round is
# printed too.
#
# Environment: SLUICED (default build/bin/sluiced), SLUICED_ARGS (more flags for sluiced,
# split at spaces: e.g. "--decision-log /tmp/d.jsonl --decision-log-sample 0.01" to measure
# what the decision log costs), REDIS_SERVER (redis-server),
# SERVER_CPU (0), CLIENT_CPU (1), CLIENTS (50), KEYSPACE (100000), REQUESTS_P1 (200000),
# REQUESTS_P16 (1000000), ROUNDS (3), RSS_KEYS (1000000).
# Needs redis-server and redis-tools (redis-benchmark, redis-cli) from Debian.
set -euo pipefail
cd "$(dirname "$0")/.."

SLUICED=${SLUICED:-build/bin/sluiced}
read -r -a SLUICED_EXTRA <<<"${SLUICED_ARGS:-}"
REDIS_SERVER=${REDIS_SERVER:-redis-server}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
CLIENTS=${CLIENTS:-50}
KEYSPACE=${KEYSPACE:-100000}
REQUESTS_P1=${REQUESTS_P1:-200000}
REQUESTS_P16=${REQUESTS_P16:-1000000}
ROUNDS=${ROUNDS:-3}
RSS_KEYS=${RSS_KEYS:-1000000}
# The limit every request checks: 100 per hour, burst 100 (so that the keys stay in the
# stores for the whole run: a bucket that is full again is reclaimed by sluiced and
# expired by the Lua script's PEXPIRE).
CELL_ARGS=(99 100 3600)                 # CL.THROTTLE key max_burst count period_s
LUA_ARGS=(100 100 3600000 1)            # capacity, tokens per period, period_ms, cost
# For the memory figure, a day instead of an hour: loading a million keys into Redis
# through Lua takes longer than the 36 s after which an hour's bucket is full again.
CELL_ARGS_RSS=(99 100 86400)
LUA_ARGS_RSS=(100 100 86400000 1)

BENCH_NAME=resp_compare
. bench/lib.sh
bench_need "$REDIS_SERVER" redis-benchmark redis-cli taskset pgrep python3
[[ -x $SLUICED ]] || bench_fail "$SLUICED not built (make)"
(($(nproc) >= 2)) || bench_fail "needs 2 cores (server and load generator pinned apart); this machine has $(nproc)"
bench_workdir

start_sluiced() {
  SL_PORT=$(free_port)
  taskset -c "$SERVER_CPU" "$SLUICED" --port "$SL_PORT" --http-port 0 --threads 1 \
    ${SLUICED_EXTRA[@]+"${SLUICED_EXTRA[@]}"} 2>"$work/sluiced.log" &
  SL_PID=$!
  pids+=("$SL_PID")
  wait_ping "$SL_PORT" "$SL_PID"
}

start_redis() {
  RD_PORT=$(free_port)
  taskset -c "$SERVER_CPU" "$REDIS_SERVER" --port "$RD_PORT" --bind 127.0.0.1 --save '' \
    --appendonly no --daemonize no --logfile "$work/redis.log" &
  RD_PID=$!
  pids+=("$RD_PID")
  wait_ping "$RD_PORT" "$RD_PID"
  SHA=$(redis-cli -p "$RD_PORT" SCRIPT LOAD "$(cat bench/lua/token_bucket.lua)")
  [[ $SHA =~ ^[0-9a-f]{40}$ ]] || { echo "resp_compare: SCRIPT LOAD failed: $SHA" >&2; exit 1; }
}

# One redis-benchmark run; prints "rps p50 p99 cpu" (latencies in ms; cpu: the server's
# CPU time per request in microseconds, which a busy machine disturbs far less than the
# wall-clock figures).
bench() { # port server-pid pipeline requests command...
  local port=$1 pid=$2 pipe=$3 n=$4
  shift 4
  local out t0 t1
  t0=$(cpu_ticks "$pid")
  out=$(taskset -c "$CLIENT_CPU" redis-benchmark -h 127.0.0.1 -p "$port" -c "$CLIENTS" -n "$n" \
    -P "$pipe" -r "$KEYSPACE" --csv "$@" 2>/dev/null | tail -n 1)
  t1=$(cpu_ticks "$pid")
  echo "$out" >>"$work/raw.csv"
  # "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
  echo "$out" | awk -F'","' -v ticks=$((t1 - t0)) -v hz="$CLK_TCK" -v n="$n" \
    '{gsub(/"/, "", $0); split($0, f, ","); printf "%s %s %s %.2f\n", f[2], f[5], f[7], ticks * 1e6 / hz / n}'
}

# Sends CL.THROTTLE (sluiced) or EVALSHA (redis) for keys 0..RSS_KEYS-1 through one
# pipe (redis-cli --pipe), as fast as the server takes them.
load_keys() { # port kind
  python3 - "$1" "$2" "$RSS_KEYS" "${SHA:-}" "${CELL_ARGS_RSS[*]}" "${LUA_ARGS_RSS[*]}" <<'EOF' | redis-cli -p "$1" --pipe >"$work/pipe.$2.log"
import sys
port, kind, n, sha, cell, lua = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5].split(), sys.argv[6].split()
out = sys.stdout.buffer
def cmd(*args):
    b = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a.encode()
        b.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(b)
chunk = []
for i in range(n):
    key = "rss:%d" % i
    if kind == "sluiced":
        chunk.append(cmd("CL.THROTTLE", key, *cell))
    else:
        chunk.append(cmd("EVALSHA", sha, "1", key, *lua))
    if len(chunk) == 10000:
        out.write(b"".join(chunk)); chunk = []
out.write(b"".join(chunk))
EOF
  echo "resp_compare: $2: $(tail -n 1 "$work/pipe.$2.log")" >&2
  grep -q 'errors: 0,' "$work/pipe.$2.log" || { echo "resp_compare: error replies while loading $2" >&2; exit 1; }
}

# The commands under test answer what they should (redis-benchmark does not look).
probe() {
  local sl rd
  sl=$(redis-cli -p "$SL_PORT" CL.THROTTLE probe "${CELL_ARGS[@]}" | tr '\n' ' ')
  rd=$(redis-cli -p "$RD_PORT" EVALSHA "$SHA" 1 probe "${LUA_ARGS[@]}" | tr '\n' ' ')
  [[ $sl == "0 100 99 -1 36 " ]] || { echo "resp_compare: sluiced CL.THROTTLE answered: $sl" >&2; exit 1; }
  [[ $rd == "1 99 0 " ]] || { echo "resp_compare: Redis EVALSHA answered: $rd" >&2; exit 1; }
}

declare -A R

echo "resp_compare: $(nproc) cores; servers on CPU $SERVER_CPU, redis-benchmark on CPU $CLIENT_CPU, $CLIENTS clients, $KEYSPACE random keys" >&2
echo "resp_compare: $("$REDIS_SERVER" --version | head -c 60); sluiced: $SLUICED ${SLUICED_ARGS:-}" >&2
load_start=$(cut -d' ' -f1-3 /proc/loadavg)

start_sluiced
start_redis
probe
# Each entry of R holds one line "rps p50 p99 cpu" per round.
for round in $(seq "$ROUNDS"); do
  for pipe in 1 16; do
    n=$REQUESTS_P1
    ((pipe == 16)) && n=$REQUESTS_P16
    echo "resp_compare: round $round of $ROUNDS, pipeline $pipe, $n requests per run" >&2
    R[sl_cell_$pipe]+="$(bench "$SL_PORT" "$SL_PID" "$pipe" "$n" CL.THROTTLE "key:__rand_int__" "${CELL_ARGS[@]}")"$'\n'
    R[rd_ping_$pipe]+="$(bench "$RD_PORT" "$RD_PID" "$pipe" "$n" PING)"$'\n'
    R[rd_lua_$pipe]+="$(bench "$RD_PORT" "$RD_PID" "$pipe" "$n" EVALSHA "$SHA" 1 "key:__rand_int__" "${LUA_ARGS[@]}")"$'\n'
    R[sl_ping_$pipe]+="$(bench "$SL_PORT" "$SL_PID" "$pipe" "$n" PING)"$'\n'
  done
done
# sanity: the load reached the servers (keys stored, replies not errors)
sl_keys=$(redis-cli -p "$SL_PORT" INFO | tr -d '\r' | awk -F: '$1 == "keys" {print $2}')
rd_keys=$(redis-cli -p "$RD_PORT" DBSIZE)
echo "resp_compare: keys after the throughput runs: sluiced $sl_keys, redis $rd_keys" >&2
stop "$SL_PID"
stop "$RD_PID"

# Memory: fresh servers, RSS before and after RSS_KEYS distinct keys.
start_sluiced
sl_rss0=$(rss_kb "$SL_PID")
load_keys "$SL_PORT" sluiced
sl_rss1=$(rss_kb "$SL_PID")
sl_keys=$(redis-cli -p "$SL_PORT" INFO | tr -d '\r' | awk -F: '$1 == "keys" {print $2}')
stop "$SL_PID"
start_redis
rd_rss0=$(rss_kb "$RD_PID")
load_keys "$RD_PORT" redis
rd_rss1=$(rss_kb "$RD_PID")
rd_keys=$(redis-cli -p "$RD_PORT" DBSIZE)
rd_used=$(redis-cli -p "$RD_PORT" INFO memory | tr -d '\r' | awk -F: '$1 == "used_memory" {print $2}')
stop "$RD_PID"

# The median over the rounds of field $2 (1 rps, 2 p50, 3 p99, 4 cpu) of entry $1.
median() {
  printf '%s' "${R[$1]}" | awk -v f="$2" 'NF { print $f }' | sort -g |
    awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
row() { # label pipeline key
  printf '| %s | %s | %s | %s | %s | %s |\n' "$1" "$2" "$(median "$3" 1)" "$(median "$3" 2)" \
    "$(median "$3" 3)" "$(median "$3" 4)"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
first() { median "$1" 1; }
cpu() { median "$1" 4; }
# The ratio a/b of field $3 in each round, e.g. "0.95 1.02 0.99".
per_round() {
  paste -d' ' <(printf '%s' "${R[$1]}" | awk -v f="$3" 'NF { print $f }') \
    <(printf '%s' "${R[$2]}" | awk -v f="$3" 'NF { print $f }') |
    awk '{ printf "%s%.2f", (NR > 1 ? " " : ""), ($2 > 0 ? $1 / $2 : 0) } END { print "" }'
}

echo
echo "Medians of $ROUNDS rounds."
echo "| server and command | pipeline | requests/s | p50 ms | p99 ms | server CPU µs/request |"
echo "|---|---:|---:|---:|---:|---:|"
for pipe in 1 16; do
  row "sluiced CL.THROTTLE" "$pipe" "sl_cell_$pipe"
  row "Redis EVALSHA token bucket (Lua)" "$pipe" "rd_lua_$pipe"
  row "Redis PING" "$pipe" "rd_ping_$pipe"
  row "sluiced PING" "$pipe" "sl_ping_$pipe"
done
echo
echo "| ratio | pipeline 1 | pipeline 16 |"
echo "|---|---:|---:|"
echo "| sluiced CL.THROTTLE / Redis EVALSHA token bucket | $(ratio "$(first sl_cell_1)" "$(first rd_lua_1)")× | $(ratio "$(first sl_cell_16)" "$(first rd_lua_16)")× |"
echo "| sluiced CL.THROTTLE / Redis PING | $(ratio "$(first sl_cell_1)" "$(first rd_ping_1)")× | $(ratio "$(first sl_cell_16)" "$(first rd_ping_16)")× |"
echo "| server CPU per request: Redis EVALSHA / sluiced CL.THROTTLE | $(ratio "$(cpu rd_lua_1)" "$(cpu sl_cell_1)")× | $(ratio "$(cpu rd_lua_16)" "$(cpu sl_cell_16)")× |"
echo "| server CPU per request: Redis PING / sluiced CL.THROTTLE | $(ratio "$(cpu rd_ping_1)" "$(cpu sl_cell_1)")× | $(ratio "$(cpu rd_ping_16)" "$(cpu sl_cell_16)")× |"
echo
echo "Each round's ratio, CL.THROTTLE / PING throughput: pipeline 1: $(per_round sl_cell_1 rd_ping_1 1); pipeline 16: $(per_round sl_cell_16 rd_ping_16 1)."
echo "Each round's ratio, Redis PING / sluiced CL.THROTTLE server CPU: pipeline 1: $(per_round rd_ping_1 sl_cell_1 4); pipeline 16: $(per_round rd_ping_16 sl_cell_16 4)."
echo
echo "| memory after $RSS_KEYS keys | keys held | VmRSS before | VmRSS after | bytes per key |"
echo "|---|---:|---:|---:|---:|"
per_key() { awk -v a="$1" -v b="$2" -v n="$3" 'BEGIN { if (n > 0) printf "%.0f", (b - a) * 1024 / n; else print "n/a" }'; }
echo "| sluiced (CL.THROTTLE state) | ${sl_keys:-?} | ${sl_rss0} kB | ${sl_rss1} kB | $(per_key "$sl_rss0" "$sl_rss1" "${sl_keys:-0}") |"
echo "| Redis (Lua token bucket hash + TTL) | ${rd_keys:-?} | ${rd_rss0} kB | ${rd_rss1} kB | $(per_key "$rd_rss0" "$rd_rss1" "${rd_keys:-0}") (used_memory $rd_used) |"
echo
echo "Machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')); load average at start $load_start, at end $(cut -d' ' -f1-3 /proc/loadavg)."
echo "raw redis-benchmark CSV lines (in run order, each round: sluiced CL.THROTTLE, Redis PING, Redis EVALSHA, sluiced PING; P1 then P16):" >&2
cat "$work/raw.csv" >&2
