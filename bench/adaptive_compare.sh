#!/usr/bin/env bash
# What an adaptive concurrency limit costs sluiced beside a fixed one, on the Redis protocol.
#
#   bench/adaptive_compare.sh        prints a markdown table (and the raw lines)
#
# sluiced --threads 1 on one core (taskset -c $SERVER_CPU), `sluice bench` on another
# ($CLIENT_CPU), $CONNS connections at pipeline $PIPELINE over $KEYS random keys, each
# request an acquire or the release of a lease the connection holds (--command sl.acquire:
# every admitted acquire is released by the connection's next request):
#   - SL.ACQUIRE key N ttl (a fixed limit of N leases, a state in the store), then SL.RELEASE;
#   - SL.ACQUIRE key N ttl ADAPTIVE ESTIMATOR E for each estimator, then SL.RELEASE (which
#     feeds the estimator the time between the two);
#   - CL.THROTTLE on the same keys, for reference: the cheapest decision sluiced makes.
# Each figure is the median of $ROUNDS interleaved rounds; besides throughput and latency,
# the server's CPU time per request (/proc/PID/stat), which the load generator's pace on a
# 2-core machine disturbs far less.
#
# Environment: SLUICED (build/bin/sluiced), SLUICE (build/bin/sluice), SERVER_CPU (0),
# CLIENT_CPU (1), CONNS (8), PIPELINE (16), KEYS (10000), LIMIT (100), DURATION (5, seconds),
# ROUNDS (3). Needs redis-cli (redis-tools) for the readiness check.
set -euo pipefail
cd "$(dirname "$0")/.."

SLUICED=${SLUICED:-build/bin/sluiced}
SLUICE=${SLUICE:-build/bin/sluice}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
CONNS=${CONNS:-8}
PIPELINE=${PIPELINE:-16}
KEYS=${KEYS:-10000}
LIMIT=${LIMIT:-100}
DURATION=${DURATION:-5}
ROUNDS=${ROUNDS:-3}

BENCH_NAME=adaptive_compare
. bench/lib.sh
bench_need redis-cli taskset pgrep
[[ -x $SLUICED && -x $SLUICE ]] || bench_fail "$SLUICED or $SLUICE not built (make)"
(($(nproc) >= 2)) || bench_fail "needs 2 cores (server and load generator pinned apart)"
bench_workdir

PORT=$(free_port)
taskset -c "$SERVER_CPU" "$SLUICED" --port "$PORT" --http-port 0 --threads 1 \
  2>"$work/sluiced.log" &
PID=$!
pids+=("$PID")
wait_ping "$PORT" "$PID" "$work/sluiced.log"

# The commands answer what they should before anything is timed.
lease=$(redis-cli -p "$PORT" SL.ACQUIRE probe "$LIMIT" 30000 ADAPTIVE)
[[ $lease =~ ^[0-9a-f]{24}$ ]] || bench_fail "SL.ACQUIRE ADAPTIVE answered: $lease"
[[ $(redis-cli -p "$PORT" SL.RELEASE probe "$lease") == 1 ]] || bench_fail "SL.RELEASE failed"

# One run: prints "rps p50 p99 cpu_us admitted_share".
run() { # args for sluice bench...
  local out t0 t1
  t0=$(cpu_ticks "$PID")
  out=$(taskset -c "$CLIENT_CPU" "$SLUICE" bench --server "127.0.0.1:$PORT" \
    --connections "$CONNS" --pipeline "$PIPELINE" --threads 1 --keys "$KEYS" \
    --duration "${DURATION}s" "$@" 2>/dev/null)
  t1=$(cpu_ticks "$PID")
  echo "$* :: $(echo "$out" | tr '\n' ' ')" >>"$work/raw.txt"
  echo "$out" | awk -v ticks=$((t1 - t0)) -v hz="$CLK_TCK" '
    $1 == "requests" { n = $2 } $1 == "errors" { e = $2 } $1 == "allowed" { a = $2 }
    $1 == "limited" { l = $2 } $1 == "throughput_rps" { rps = $2 }
    $1 == "latency_p50_ms" { p50 = $2 } $1 == "latency_p99_ms" { p99 = $2 }
    END {
      if (e > 0 || n == 0) { print "errors" ; exit }
      printf "%s %s %s %.2f %.3f\n", rps, p50, p99, ticks * 1e6 / hz / n, (a + l) ? a / (a + l) : 1
    }'
}

names=("fixed" "aimd" "vegas" "gradient2" "anchored" "throttle")
args_of() {
  case $1 in
    fixed) echo "--command sl.acquire --limit $LIMIT --period 30s" ;;
    throttle) echo "--command cl.throttle --limit 1000000 --period 3600s --prefix cell:" ;;
    *) echo "--command sl.acquire --limit $LIMIT --period 30s --estimator $1" ;;
  esac
}

declare -A R
echo "adaptive_compare: $(nproc) cores; sluiced on CPU $SERVER_CPU, sluice bench on CPU $CLIENT_CPU, $CONNS connections, pipeline $PIPELINE, $KEYS keys, limit $LIMIT" >&2
for round in $(seq "$ROUNDS"); do
  for name in "${names[@]}"; do
    # shellcheck disable=SC2046
    line=$(run $(args_of "$name"))
    [[ $line == errors ]] && bench_fail "$name: error replies (see $work/raw.txt)"
    R[$name]+="$line"$'\n'
    echo "adaptive_compare: round $round $name: $line" >&2
  done
done

median() { # column (1-based), lines on stdin
  sort -g -k"$1","$1" | awk -v c="$1" '{ v[NR] = $c } END { print v[int((NR + 1) / 2)] }'
}

label() {
  case $1 in
    fixed) echo "\`SL.ACQUIRE key $LIMIT 30000\` + \`SL.RELEASE\` (fixed)" ;;
    throttle) echo "\`CL.THROTTLE\` (reference)" ;;
    *) echo "\`SL.ACQUIRE key $LIMIT 30000 ADAPTIVE ESTIMATOR $1\` + \`SL.RELEASE\`" ;;
  esac
}

echo "| requests (half acquires, half releases) | requests/s | p50 ms | p99 ms | server CPU µs/request |"
echo "|---|---:|---:|---:|---:|"
for name in "${names[@]}"; do
  rps=$(printf '%s' "${R[$name]}" | median 1)
  p50=$(printf '%s' "${R[$name]}" | median 2)
  p99=$(printf '%s' "${R[$name]}" | median 3)
  cpu=$(printf '%s' "${R[$name]}" | median 4)
  printf '| %s | %s | %s | %s | %s |\n' "$(label "$name")" \
    "$(printf "%'.0f" "$rps" | tr ',' ' ')" "$p50" "$p99" "$cpu"
done
fixed_cpu=$(printf '%s' "${R[fixed]}" | median 4)
echo
echo "| server CPU per request, against the fixed lease | ratio |"
echo "|---|---:|"
for name in aimd vegas gradient2 anchored throttle; do
  cpu=$(printf '%s' "${R[$name]}" | median 4)
  printf '| %s | %s× |\n' "$name" "$(awk -v a="$cpu" -v b="$fixed_cpu" 'BEGIN { printf "%.2f", a / b }')"
done
echo
echo "raw lines: $work/raw.txt (kept with BENCH_KEEP=1)" >&2
