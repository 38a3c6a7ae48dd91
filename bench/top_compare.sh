#!/usr/bin/env bash
# What the top keys (docs/observability.md) cost sluiced, side by side on one build:
#
#   bench/top_compare.sh             prints a markdown table
#
# Three sluiced servers, all up at once on one core (taskset -c $SERVER_CPU, --threads 1),
# loaded in turn by redis-benchmark on another ($CLIENT_CPU) with CL.THROTTLE on $KEYSPACE
# random keys (the top keys' worst case: most decisions bring a key the summary does not
# hold), rounds interleaved:
#   - off:     --top-keys 0
#   - default: the defaults (every decision counted up to --top-exact-rate, sampled above)
#   - exact:   --top-exact-rate 0 (every decision counted at any rate)
# Each run reports the server's CPU time per request (/proc/PID/stat); the table gives the
# medians over the rounds and, per configuration, the median and the range of each round's
# ratio to "off" in the same round, which cancels most of a busy machine's drift.
#
# Environment: SLUICED (default build/bin/sluiced), SERVER_CPU (0), CLIENT_CPU (1),
# CLIENTS (50), KEYSPACE (100000), REQUESTS_P1 (200000), REQUESTS_P16 (1000000), ROUNDS (5).
# Needs redis-tools (redis-benchmark, redis-cli) from Debian.
set -euo pipefail
cd "$(dirname "$0")/.."

SLUICED=${SLUICED:-build/bin/sluiced}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
CLIENTS=${CLIENTS:-50}
KEYSPACE=${KEYSPACE:-100000}
REQUESTS_P1=${REQUESTS_P1:-200000}
REQUESTS_P16=${REQUESTS_P16:-1000000}
ROUNDS=${ROUNDS:-5}
CELL_ARGS=(99 100 3600) # CL.THROTTLE key max_burst count period_s

BENCH_NAME=top_compare
. bench/lib.sh
bench_need redis-benchmark redis-cli taskset pgrep python3
[[ -x $SLUICED ]] || bench_fail "$SLUICED not built (make)"
(($(nproc) >= 2)) || bench_fail "needs 2 cores (server and load generator pinned apart); this machine has $(nproc)"
bench_workdir

CONFIGS=(off default exact)
declare -A PORT PID FLAGS R
FLAGS[off]="--top-keys 0"
FLAGS[default]=""
FLAGS[exact]="--top-exact-rate 0"

for c in "${CONFIGS[@]}"; do
  PORT[$c]=$(free_port)
  read -r -a extra <<<"${FLAGS[$c]}"
  taskset -c "$SERVER_CPU" "$SLUICED" --port "${PORT[$c]}" --http-port 0 --threads 1 \
    ${extra[@]+"${extra[@]}"} 2>"$work/sluiced.$c.log" &
  PID[$c]=$!
  pids+=("${PID[$c]}")
  wait_ping "${PORT[$c]}" "${PID[$c]}" "$work/sluiced.$c.log"
done
# The top keys answer where they are on, and refuse where they are off.
for c in default exact; do
  redis-cli -p "${PORT[$c]}" CL.THROTTLE probe "${CELL_ARGS[@]}" >/dev/null
  [[ $(redis-cli -p "${PORT[$c]}" SL.TOP ADMITTED) == *probe* ]] ||
    bench_fail "$c: SL.TOP ADMITTED does not list the probe's key"
done
[[ $(redis-cli -p "${PORT[off]}" SL.TOP 2>&1) == *ERR* ]] || bench_fail "off: SL.TOP answered"

cpu_per_request() { # config pipeline requests
  local c=$1 t0 t1
  t0=$(cpu_ticks "${PID[$c]}")
  taskset -c "$CLIENT_CPU" redis-benchmark -h 127.0.0.1 -p "${PORT[$c]}" -c "$CLIENTS" -n "$3" \
    -P "$2" -r "$KEYSPACE" --csv CL.THROTTLE "key:__rand_int__" "${CELL_ARGS[@]}" >/dev/null 2>&1
  t1=$(cpu_ticks "${PID[$c]}")
  awk -v t=$((t1 - t0)) -v hz="$CLK_TCK" -v n="$3" 'BEGIN { printf "%.3f\n", t * 1e6 / hz / n }'
}

echo "top_compare: $(nproc) cores; servers on CPU $SERVER_CPU, redis-benchmark on CPU $CLIENT_CPU, $CLIENTS clients, $KEYSPACE random keys" >&2
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
for round in $(seq "$ROUNDS"); do
  for pipe in 16 1; do
    n=$REQUESTS_P1
    ((pipe == 16)) && n=$REQUESTS_P16
    echo "top_compare: round $round of $ROUNDS, pipeline $pipe, $n requests per run" >&2
    # A new order each round, so that no configuration always follows the same one.
    for c in $(printf '%s\n' "${CONFIGS[@]}" | shuf); do
      R[$c.$pipe]+="$(cpu_per_request "$c" "$pipe" "$n") "
    done
  done
done

median() { tr ' ' '\n' | awk 'NF' | sort -g | awk '{ v[NR] = $1 } END {
  if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# Each round's change against "off", in percent: the median, then the lowest and highest.
change() { # config pipeline
  paste -d' ' <(tr ' ' '\n' <<<"${R[$1.$2]}" | awk 'NF') <(tr ' ' '\n' <<<"${R[off.$2]}" | awk 'NF') |
    awk '{ print ($1 / $2 - 1) * 100 }' | sort -g |
    awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
      printf "%+.1f%% (%+.1f … %+.1f)\n", m, v[1], v[NR] }'
}

echo
echo "Server CPU per CL.THROTTLE, medians of $ROUNDS rounds; the change is each round's ratio to off in the same round (median, lowest … highest)."
echo "| top keys | pipeline | server CPU µs/request | change against off |"
echo "|---|---:|---:|---:|"
for pipe in 16 1; do
  for c in "${CONFIGS[@]}"; do
    if [[ $c == off ]]; then ch=""; else ch=$(change "$c" "$pipe"); fi
    label=$c
    [[ -n ${FLAGS[$c]} ]] && label="$c (\`${FLAGS[$c]}\`)"
    echo "| $label | $pipe | $(median <<<"${R[$c.$pipe]}") | $ch |"
  done
done
echo
echo "Machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')); load average at start $load_start, at end $(cut -d' ' -f1-3 /proc/loadavg)."
