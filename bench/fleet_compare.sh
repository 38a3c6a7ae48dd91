#!/usr/bin/env bash
# The ways sluiced enforces one limit across a fleet, side by side on the same traffic:
# what each adds to a check's latency, its throughput, and what it admits of one key's burst.
#
#   bench/fleet_compare.sh           prints two markdown tables (raw lines on stderr)
#
# The configurations, three nodes each but the first, all on this machine:
#   - memory: one sluiced, in memory (the baseline: one node, no fleet)
#   - central: three sluiced --store redis:// on one redis-server with sluice-redis.so
#   - split: three sluiced --split 3
#   - route: three sluiced --peers A,B,C --self X (each key decided by its owner)
#   - sync: three sluiced --store sync+redis://...?node=I&nodes=3 on that redis-server, its
#     database 1 (central's states are in 0, and the same keys hold sync records here; each
#     decides on its own leases, traded with Redis every $SYNC_INTERVAL); the simulator's
#     prediction for the same bursts (sluice simulate --strategy sync) is printed beside it
# The servers (every sluiced, --threads 1, and Redis) share $SERVER_CPU and the load
# generators have $CLIENT_CPU: on two cores the load generator needs one to itself, so a
# fleet of three here is three nodes taking turns on one core, and its throughput is that
# core's, not three machines'.
#
# Latency and throughput: redis-benchmark, CL.THROTTLE on $KEYSPACE random keys that stay
# under their limit, at pipelining 1 and 16. Three redis-benchmark processes run at once,
# one per node ($CLIENTS clients spread over them), so that the nodes serve together as a
# fleet does and each forwarded check meets the others' load; for memory the three go to
# its one node, so that the load generator is the same in every row. Throughput is the sum
# of the three; p50 and p99 are each process's (each node's clients'). The servers' CPU
# time per request is that of every server of the configuration (/proc/PID/stat).
# Where the servers answer faster than the three processes can ask (memory, split), the
# three take turns on $CLIENT_CPU and their latencies include the turns: AT_ONCE=0 runs
# them one after the other instead (throughput: the whole run's requests over its time).
#
# With $KEYSPACE keys each key sees a few checks a second: sync then trades nearly every key
# every interval, and Redis works for the keys touched rather than for the checks. KEYSPACE=100
# (hot keys, many checks per key per interval) shows the other end.
#
# Overshoot: one key, $LIMIT per $PERIOD_S s with a burst of $LIMIT (CL.THROTTLE key
# LIMIT-1 LIMIT PERIOD_S), requests sent one after the other by one client (redis-py),
# counted admitted: 3 x LIMIT spread round robin over the nodes, the same at 60/30/10 of
# the requests per node (a smooth weighted round robin), and LIMIT requests at 60/30/10.
# The sync row runs the same requests in the simulator, evenly spaced over the median time
# the measured even bursts took, with --sync-interval $SYNC_INTERVAL; then, since a burst
# that short ends before the first sync, every strategy in the simulator on the same
# requests spread over $SPREAD (several syncs).
#
# The rounds are interleaved (every configuration once per round); the tables give the
# median of each figure.
#
# Environment: SLUICED (build/bin/sluiced), SLUICE (build/bin/sluice), MODULE
# (build/lib/sluice-redis.so), REDIS_SERVER (redis-server), SERVER_CPU (0), CLIENT_CPU (1),
# CLIENTS (50), KEYSPACE (100000), REQUESTS_P1 (200000), REQUESTS_P16 (1000000), ROUNDS (3),
# AT_ONCE (1), LIMIT (100), PERIOD_S (10), SYNC_INTERVAL (100ms), SPREAD (1s).
set -euo pipefail
cd "$(dirname "$0")/.."

SLUICED=${SLUICED:-build/bin/sluiced}
SLUICE=${SLUICE:-build/bin/sluice}
MODULE=${MODULE:-build/lib/sluice-redis.so}
REDIS_SERVER=${REDIS_SERVER:-redis-server}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
CLIENTS=${CLIENTS:-50}
KEYSPACE=${KEYSPACE:-100000}
REQUESTS_P1=${REQUESTS_P1:-200000}
REQUESTS_P16=${REQUESTS_P16:-1000000}
ROUNDS=${ROUNDS:-3}
AT_ONCE=${AT_ONCE:-1}
LIMIT=${LIMIT:-100}
PERIOD_S=${PERIOD_S:-10}
SYNC_INTERVAL=${SYNC_INTERVAL:-100ms} # whole milliseconds: also sluiced's interval_ms
SPREAD=${SPREAD:-1s}
CELL_ARGS=(99 100 3600) # CL.THROTTLE key max_burst count period_s: keys stay all run
NODES=3

BENCH_NAME=fleet_compare
. bench/lib.sh
bench_need "$REDIS_SERVER" redis-benchmark redis-cli taskset
[[ -x $SLUICED ]] || bench_fail "$SLUICED not built (make)"
[[ -x $SLUICE ]] || bench_fail "$SLUICE not built (make)"
[[ -f $MODULE ]] || bench_fail "$MODULE not built (make)"
(($(nproc) >= 2)) || bench_fail "needs 2 cores; this machine has $(nproc)"
((CLIENTS >= NODES)) || bench_fail "CLIENTS must be at least $NODES"
((LIMIT >= NODES && LIMIT <= 1000000)) || bench_fail "LIMIT must be in $NODES..1000000"
[[ $SYNC_INTERVAL =~ ^[1-9][0-9]*ms$ ]] || bench_fail "SYNC_INTERVAL must be whole milliseconds (100ms)"
/usr/bin/python3 -c 'import redis' 2>/dev/null || bench_fail "redis-py not found (scripts/deps.sh)"
bench_workdir

RD_PORT=$(free_port)
taskset -c "$SERVER_CPU" "$REDIS_SERVER" --port "$RD_PORT" --bind 127.0.0.1 --save '' \
  --appendonly no --daemonize no --logfile "$work/redis.log" --loadmodule "$(realpath "$MODULE")" &
RD_PID=$!
pids+=("$RD_PID")
wait_ping "$RD_PORT" "$RD_PID"

# NODE_PORTS[config] and NODE_PIDS[config]: the nodes' ports and PIDs, space-separated.
declare -A NODE_PORTS NODE_PIDS
start_node() { # config port flags...
  local config=$1 port=$2
  shift 2
  taskset -c "$SERVER_CPU" "$SLUICED" --port "$port" --http-port 0 --threads 1 "$@" \
    2>"$work/sluiced.$config.$port.log" &
  pids+=("$!")
  NODE_PORTS[$config]+="$port "
  NODE_PIDS[$config]+="$! "
}

# Three distinct free ports, for a fleet whose nodes must know each other's before start.
three_ports() {
  local a b c
  a=$(free_port)
  b=$(free_port)
  while [[ $b == "$a" ]]; do b=$(free_port); done
  c=$(free_port)
  while [[ $c == "$a" || $c == "$b" ]]; do c=$(free_port); done
  echo "$a $b $c"
}

start_node memory "$(free_port)"
for p in $(three_ports); do
  start_node central "$p" --store "redis://127.0.0.1:$RD_PORT" --store-timeout-ms 1000
done
for p in $(three_ports); do start_node split "$p" --split "$NODES"; done
read -r -a RP <<<"$(three_ports)"
PEERS="127.0.0.1:${RP[0]},127.0.0.1:${RP[1]},127.0.0.1:${RP[2]}"
for p in "${RP[@]}"; do
  start_node route "$p" --peers "$PEERS" --self "127.0.0.1:$p" --store-timeout-ms 1000
done
i=0
for p in $(three_ports); do
  start_node sync "$p" --store-timeout-ms 1000 \
    --store "sync+redis://127.0.0.1:$RD_PORT/1?node=$i&nodes=$NODES&interval_ms=${SYNC_INTERVAL%ms}"
  i=$((i + 1))
done
CONFIGS=(memory central split route sync)
for c in "${CONFIGS[@]}"; do
  read -r -a ports <<<"${NODE_PORTS[$c]}"
  read -r -a ps <<<"${NODE_PIDS[$c]}"
  for i in "${!ports[@]}"; do wait_ping "${ports[$i]}" "${ps[$i]}" "$work/sluiced.$c.${ports[$i]}.log"; done
done

# Each node answers CL.THROTTLE as redis-cell would (redis-benchmark does not look at
# replies): the whole limit, or with --split 3 the node's share (a burst of 100 / 3 = 33,
# at 100 per 3 periods). A route node is asked one key of each owner's, so that the probe
# crosses every forwarding path. A sync node admits the first check of a new key on the lease
# its first trade brings: "0 100" and what that lease leaves.
probe() { # config
  local want="0 100 99 -1 36 " port got k
  [[ $1 == split ]] && want="0 33 32 -1 108 "
  for port in ${NODE_PORTS[$1]}; do
    for k in a b c d e f; do
      got=$(redis-cli -p "$port" CL.THROTTLE "probe:$1:$port:$k" "${CELL_ARGS[@]}" | tr '\n' ' ')
      [[ $got == "$want" || ($1 == sync && $got == "0 100 "*) ]] ||
        bench_fail "$1 node on port $port answered CL.THROTTLE with: $got"
    done
  done
}
for c in "${CONFIGS[@]}"; do probe "$c"; done

# Every server of a configuration: its nodes, and Redis for central and sync.
servers_of() { # config
  echo "${NODE_PIDS[$1]}"
  [[ $1 == central || $1 == sync ]] && echo "$RD_PID"
  return 0
}
cpu_sum() { # pids...
  local p t=0
  for p in "$@"; do t=$((t + $(cpu_ticks "$p"))); done
  echo "$t"
}

# One run: three redis-benchmark processes at once, one per node (for memory all three on
# its node). Prints "rps p50_1 p50_2 p50_3 p99_1 p99_2 p99_3 cpu" (throughput summed,
# latencies in ms, the servers' CPU in µs per request).
bench() { # config pipeline requests
  local config=$1 pipe=$2 n=$3 ports i c0 c1 total=0 bp=() srv
  read -r -a ports <<<"${NODE_PORTS[$config]}"
  while ((${#ports[@]} < NODES)); do ports+=("${ports[0]}"); done
  read -r -a srv <<<"$(servers_of "$config" | tr '\n' ' ')"
  c0=$(cpu_sum "${srv[@]}")
  for i in 0 1 2; do
    # The clients and requests are spread as evenly as they divide.
    local c=$(((CLIENTS + i) / NODES)) m=$(((n + i) / NODES))
    total=$((total + m))
    taskset -c "$CLIENT_CPU" redis-benchmark -h 127.0.0.1 -p "${ports[$i]}" -c "$c" -n "$m" \
      -P "$pipe" -r "$KEYSPACE" --csv CL.THROTTLE "key:__rand_int__" "${CELL_ARGS[@]}" \
      >"$work/rb.$i" 2>"$work/rb.$i.err" &
    bp+=("$!")
    ((AT_ONCE)) || wait "$!" || bench_fail "redis-benchmark against port ${ports[$i]} failed: $(tail -n 2 "$work/rb.$i.err")"
  done
  if ((AT_ONCE)); then
    for i in 0 1 2; do wait "${bp[$i]}" || bench_fail "redis-benchmark against port ${ports[$i]} failed: $(tail -n 2 "$work/rb.$i.err")"; done
  fi
  c1=$(cpu_sum "${srv[@]}")
  for i in 0 1 2; do echo "$config,$pipe,$(tail -n 1 "$work/rb.$i")" >&2; done
  for i in 0 1 2; do tail -n 1 "$work/rb.$i"; done | tr -d '"' |
    awk -F, -v ct=$((c1 - c0)) -v hz="$CLK_TCK" -v n="$total" -v at_once="$AT_ONCE" \
      '{ rps += $2; inv += 1 / $2; p50[NR] = $5; p99[NR] = $7 }
       END { if (!at_once) rps = NR / inv
             printf "%.0f %s %s %s %s %s %s %.2f\n", rps, p50[1], p50[2], p50[3], p99[1], p99[2], p99[3], ct * 1e6 / hz / n }'
}

# One burst on one key: prints "admitted microseconds" (the burst's wall time).
burst() { # config key requests weights
  local ports
  read -r -a ports <<<"${NODE_PORTS[$1]}"
  taskset -c "$CLIENT_CPU" /usr/bin/python3 -B - "$2" "$3" "$4" "$((LIMIT - 1))" "$LIMIT" \
    "$PERIOD_S" "${ports[@]}" <<'EOF'
import sys, time, redis
key, n, weights = sys.argv[1], int(sys.argv[2]), [int(w) for w in sys.argv[3].split(",")]
args = sys.argv[4:7]
conns = [redis.Redis(host="127.0.0.1", port=int(p)) for p in sys.argv[7:]]
for c in conns:
    c.ping()
weights = weights[:len(conns)]
# A smooth weighted round robin: each node gets its share, spread evenly in time.
cur = [0] * len(conns)
admitted = 0
t0 = time.monotonic_ns()
for _ in range(n):
    for i, w in enumerate(weights):
        cur[i] += w
    i = max(range(len(conns)), key=lambda j: cur[j])
    cur[i] -= sum(weights)
    if conns[i].execute_command("CL.THROTTLE", key, *args)[0] == 0:
        admitted += 1
print(admitted, (time.monotonic_ns() - t0) // 1000)
EOF
}

declare -A R
echo "fleet_compare: servers on CPU $SERVER_CPU, load generators on CPU $CLIENT_CPU, $CLIENTS clients over $NODES redis-benchmark, $KEYSPACE random keys; burst of one key at $LIMIT per ${PERIOD_S}s" >&2
for round in $(seq "$ROUNDS"); do
  for pipe in 1 16; do
    n=$REQUESTS_P1
    ((pipe == 16)) && n=$REQUESTS_P16
    echo "fleet_compare: round $round of $ROUNDS, pipeline $pipe, $n requests per run" >&2
    for c in "${CONFIGS[@]}"; do R[${c}_$pipe]+="$(bench "$c" "$pipe" "$n")"$'\n'; done
  done
  for c in "${CONFIGS[@]}"; do
    even=$(burst "$c" "burst:$round:$c:even" $((3 * LIMIT)) 1,1,1)
    uneven=$(burst "$c" "burst:$round:$c:uneven" $((3 * LIMIT)) 60,30,10)
    small=$(burst "$c" "burst:$round:$c:small" "$LIMIT" 60,30,10)
    echo "$c,burst,$even,$uneven,$small" >&2
    R[${c}_burst]+="${even% *} ${uneven% *} ${small% *} ${even#* }"$'\n'
  done
done

# The decisions were the stores' and the owners', not a store-down policy's, and the
# route nodes agreed on every key's owner with none marked down.
for c in central route; do
  for p in ${NODE_PORTS[$c]}; do
    fb=$(redis-cli -p "$p" INFO store | tr -d '\r' |
      awk -F: '/^decisions_(fail_open|fail_closed|local):/ { s += $2 } END { print s + 0 }')
    ((fb == 0)) || bench_fail "$c node on port $p let a store-down policy decide $fb times"
  done
done
for p in ${NODE_PORTS[sync]}; do
  bad=$(redis-cli -p "$p" INFO sync | tr -d '\r' |
    awk -F: '/^(sync_failures|sync_unleased_takes):/ { s += $2 } END { print s + 0 }')
  ((bad == 0)) || bench_fail "sync node on port $p saw $bad failed trades or unleased takes"
done
for p in ${NODE_PORTS[route]}; do
  bad=$(redis-cli -p "$p" INFO peers | tr -d '\r' |
    awk -F: '/^(peers_down|peer_disagreements):/ { s += $2 } END { print s + 0 }')
  ((bad == 0)) || bench_fail "route node on port $p saw a peer down or a disagreement ($bad)"
done
for p in "${pids[@]}"; do stop "$p"; done

median() { # entry field
  printf '%s' "${R[$1]}" | awk -v f="$2" 'NF { print $f }' | sort -g |
    awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
# The mean over the three nodes of their median p50 (the table's p99 is the highest
# node's median p99; the raw lines on stderr have every process's).
p50_mean() { # entry
  awk -v a="$(median "$1" 2)" -v b="$(median "$1" 3)" -v c="$(median "$1" 4)" \
    'BEGIN { printf "%.3f", (a + b + c) / 3 }'
}

# The sync strategy on the same requests, in the simulator: evenly spaced over the time the
# measured even bursts took (their median over every configuration), one key.
span_us=$(for c in "${CONFIGS[@]}"; do printf '%s' "${R[${c}_burst]}"; done | awk 'NF { print $4 }' |
  sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
simulate() { # requests span-us weights strategy -> admitted
  awk -v n="$1" -v us="$2" 'BEGIN { for (i = 0; i < n; i++) printf "%dus\n", int(i * us / n) }' \
    >"$work/trace"
  "$SLUICE" simulate --limit "$LIMIT" --period "${PERIOD_S}s" --burst "$LIMIT" \
    --traffic "$work/trace" --nodes "$NODES" --strategy "$4" --sync-interval "$SYNC_INTERVAL" \
    --node-weights "$3" | tee -a /dev/stderr | awk -v s="$4" '$1 == s { print $2 }'
}
sim_even=$(simulate $((3 * LIMIT)) "$span_us" 1,1,1 sync)
sim_uneven=$(simulate $((3 * LIMIT)) "$span_us" 60,30,10 sync)
sim_small=$(simulate "$LIMIT" "$span_us" 60,30,10 sync)
# SPREAD in microseconds, through the simulator's own reading of durations (its header).
spread_us=$("$SLUICE" simulate --limit 1 --period 1s --duration "$SPREAD" --algorithms gcra |
  awk '/ ns simulated/ { for (i = 1; i < NF; i++) if ($(i + 1) == "ns") print int($i / 1000) }')
[[ -n $spread_us ]] || bench_fail "SPREAD $SPREAD is not a duration sluice simulate reads"

label() {
  case $1 in
    memory) echo "one sluiced, in memory (one node)" ;;
    central) echo "central Redis (\`--store redis://\`, module)" ;;
    split) echo "split (\`--split 3\`)" ;;
    route) echo "route (\`--peers\`, \`--self\`)" ;;
    sync) echo "sync (\`--store sync+redis://\`, module, every $SYNC_INTERVAL)" ;;
  esac
}

echo
how="three redis-benchmark at once"
((AT_ONCE)) || how="three redis-benchmark one after the other"
echo "Medians of $ROUNDS rounds; $NODES nodes (memory: one), all sharing CPU $SERVER_CPU; $how."
echo "| strategy | pipeline | requests/s | p50 ms (mean of the nodes') | p99 ms (the highest node's) | added p50 µs | servers' CPU µs/request |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for pipe in 1 16; do
  base=$(p50_mean "memory_$pipe")
  for c in "${CONFIGS[@]}"; do
    e=${c}_$pipe
    printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$(label "$c")" "$pipe" \
      "$(median "$e" 1)" "$(p50_mean "$e")" \
      "$(printf '%s\n' "$(median "$e" 5)" "$(median "$e" 6)" "$(median "$e" 7)" | sort -g | tail -n 1)" \
      "$(awk -v a="$(p50_mean "$e")" -v b="$base" 'BEGIN { printf "%.0f", (a - b) * 1000 }')" \
      "$(median "$e" 8)"
  done
done
echo
echo "One key, $LIMIT per ${PERIOD_S} s (burst $LIMIT); requests one after the other over the nodes; admitted (medians of $ROUNDS rounds; a burst took $span_us µs at the median)."
echo "| strategy | $((3 * LIMIT)) requests, even | $((3 * LIMIT)) requests, 60/30/10 | $LIMIT requests, 60/30/10 |"
echo "|---|---:|---:|---:|"
for c in "${CONFIGS[@]}"; do
  printf '| %s | %s | %s | %s |\n' "$(label "$c")" "$(median "${c}_burst" 1)" \
    "$(median "${c}_burst" 2)" "$(median "${c}_burst" 3)"
done
printf "| sync (simulated: \`sluice simulate --strategy sync --sync-interval %s\`) | %s | %s | %s |\n" \
  "$SYNC_INTERVAL" "$sim_even" "$sim_uneven" "$sim_small"
echo
echo "Simulated (\`sluice simulate --nodes $NODES --sync-interval $SYNC_INTERVAL\`): the same key and limit, the requests spread evenly over $SPREAD; admitted."
echo "| strategy | $((3 * LIMIT)) requests, even | $((3 * LIMIT)) requests, 60/30/10 | $LIMIT requests, 60/30/10 |"
echo "|---|---:|---:|---:|"
for s in central route split sync; do
  printf '| %s | %s | %s | %s |\n' "$s" "$(simulate $((3 * LIMIT)) "$spread_us" 1,1,1 "$s")" \
    "$(simulate $((3 * LIMIT)) "$spread_us" 60,30,10 "$s")" "$(simulate "$LIMIT" "$spread_us" 60,30,10 "$s")"
done
