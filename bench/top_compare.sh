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
# Each run reports the server's CPU time per request (/proc/PID/stat), user and system; the
# table gives the medians over the rounds and, per configuration, the median and the range of
# each round's difference to "off" in the same round, which cancels most of a busy machine's
# drift.
#
# Then, as the load does not move them, the instructions per request in sluiced (user space,
# all threads) under valgrind's callgrind: counters zeroed after a warm-up, $CG_REQUESTS
# requests at pipeline 16 after a warm-up, for the top keys off, every decision counted, and every decision
# sampled out (--top-exact-rate 1: the draw alone). At a sampling of 1 in S a decision costs
# the sampled-out figure plus 1/S of the difference between the other two.
#
# Environment: SLUICED (default build/bin/sluiced), SERVER_CPU (0), CLIENT_CPU (1),
# CLIENTS (50), KEYSPACE (100000), REQUESTS_P1 (200000), REQUESTS_P16 (1000000), ROUNDS (5),
# CG_REQUESTS (100000; 0 skips callgrind).
# Needs redis-tools (redis-benchmark, redis-cli) from Debian, and valgrind for the second part.
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
CG_REQUESTS=${CG_REQUESTS:-100000}
CELL_ARGS=(99 100 3600) # CL.THROTTLE key max_burst count period_s

BENCH_NAME=top_compare
. bench/lib.sh
bench_need redis-benchmark redis-cli taskset pgrep python3
((CG_REQUESTS == 0)) || bench_need valgrind callgrind_control
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

# User and system CPU time of a process and its threads, in clock ticks: "user total".
cpu_split() { # pid
  awk '{ sub(/^.*\) /, ""); print $12, $12 + $13 }' "/proc/$1/stat"
}

# One run: the server's CPU per request in µs, "user total".
cpu_per_request() { # config pipeline requests
  local c=$1 u0 t0 u1 t1
  read -r u0 t0 < <(cpu_split "${PID[$c]}")
  taskset -c "$CLIENT_CPU" redis-benchmark -h 127.0.0.1 -p "${PORT[$c]}" -c "$CLIENTS" -n "$3" \
    -P "$2" -r "$KEYSPACE" --csv CL.THROTTLE "key:__rand_int__" "${CELL_ARGS[@]}" >/dev/null 2>&1
  read -r u1 t1 < <(cpu_split "${PID[$c]}")
  awk -v u=$((u1 - u0)) -v t=$((t1 - t0)) -v hz="$CLK_TCK" -v n="$3" \
    'BEGIN { printf "%.4f %.4f\n", u * 1e6 / hz / n, t * 1e6 / hz / n }'
}

echo "top_compare: $(nproc) cores; servers on CPU $SERVER_CPU, redis-benchmark on CPU $CLIENT_CPU, $CLIENTS clients, $KEYSPACE random keys" >&2
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
# R[config.pipeline] holds a line "user total" per round.
for round in $(seq "$ROUNDS"); do
  for pipe in 16 1; do
    n=$REQUESTS_P1
    ((pipe == 16)) && n=$REQUESTS_P16
    echo "top_compare: round $round of $ROUNDS, pipeline $pipe, $n requests per run" >&2
    # A new order each round, so that no configuration always follows the same one.
    for c in $(printf '%s\n' "${CONFIGS[@]}" | shuf); do
      R[$c.$pipe]+="$(cpu_per_request "$c" "$pipe" "$n")"$'\n'
    done
  done
done

# The median of the numbers on stdin; "lowest … highest" too with a second argument.
median() { sort -g | awk -v range="${1:-}" '{ v[NR] = $1 } END {
  m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
  if (range) printf "%+.1f%% (%+.1f … %+.1f)\n", m, v[1], v[NR]; else printf "%.3f\n", m }'; }
field() { printf '%s' "${R[$1]}" | awk -v f="$2" 'NF { print $f }'; } # config.pipeline field
# Each round's change against off in the same round, in percent of off's total CPU: of the
# total (field 2), or of the user time alone (field 1), which is where the top keys run.
change() { # config pipeline field
  paste -d' ' <(field "$1.$2" "$3") <(field "off.$2" "$3") <(field "off.$2" 2) |
    awk '{ print ($1 - $2) / $3 * 100 }' | median range
}

echo
echo "Server CPU per CL.THROTTLE, medians of $ROUNDS rounds. A change is each round's difference to off in the same round, in percent of off's total CPU (median, lowest … highest): of the total, and of the user time alone (where the top keys run; the system time is the sockets')."
echo "| top keys | pipeline | user µs/request | total µs/request | change of the total | change of the user time |"
echo "|---|---:|---:|---:|---:|---:|"
for pipe in 16 1; do
  for c in "${CONFIGS[@]}"; do
    label=$c ch=" | "
    [[ -n ${FLAGS[$c]} ]] && label="$c (\`${FLAGS[$c]}\`)"
    [[ $c != off ]] && ch="$(change "$c" "$pipe" 2) | $(change "$c" "$pipe" 1)"
    echo "| $label | $pipe | $(field "$c.$pipe" 1 | median) | $(field "$c.$pipe" 2 | median) | $ch |"
  done
done

# Instructions per request under callgrind: the totals of a dump taken after $CG_REQUESTS
# requests, the counters zeroed after a warm-up of twice the keyspace (so that most keys are
# in the store, and a thread's sampling is set, before counting).
instructions() { # label flags...
  local label=$1 port pid out total
  shift
  port=$(free_port)
  out="$work/callgrind.$label"
  taskset -c "$SERVER_CPU" valgrind --tool=callgrind --callgrind-out-file="$out.%p" \
    "$SLUICED" --port "$port" --http-port 0 --threads 1 "$@" 2>"$work/valgrind.$label.log" &
  pid=$!
  pids+=("$pid")
  for _ in $(seq 1 600); do
    [[ $(redis-cli -p "$port" PING 2>/dev/null) == PONG ]] && break
    kill -0 "$pid" 2>/dev/null || { tail "$work/valgrind.$label.log" >&2; bench_fail "$label: sluiced under valgrind exited"; }
    sleep 0.1
  done
  taskset -c "$CLIENT_CPU" redis-benchmark -h 127.0.0.1 -p "$port" -c 4 -n $((2 * KEYSPACE)) -P 16 \
    -r "$KEYSPACE" CL.THROTTLE "key:__rand_int__" "${CELL_ARGS[@]}" >/dev/null 2>&1
  callgrind_control -z "$pid" >/dev/null 2>&1
  taskset -c "$CLIENT_CPU" redis-benchmark -h 127.0.0.1 -p "$port" -c 4 -n "$CG_REQUESTS" -P 16 \
    -r "$KEYSPACE" CL.THROTTLE "key:__rand_int__" "${CELL_ARGS[@]}" >/dev/null 2>&1
  callgrind_control -d "$pid" >/dev/null 2>&1
  total=$(cat "$out.$pid".* 2>/dev/null | awk '/^totals:/ { s += $2 } END { print s + 0 }')
  stop "$pid"
  ((total > 0)) || bench_fail "$label: no callgrind dump"
  awk -v t="$total" -v n="$CG_REQUESTS" 'BEGIN { printf "%.0f\n", t / n }'
}

if ((CG_REQUESTS > 0)); then
  echo "top_compare: callgrind, $CG_REQUESTS requests per configuration" >&2
  cg_off=$(instructions off --top-keys 0)
  cg_all=$(instructions all --top-exact-rate 0)
  cg_out=$(instructions out --top-exact-rate 1)
  echo
  echo "Instructions per CL.THROTTLE at pipeline 16 (callgrind, all of sluiced's threads, $CG_REQUESTS requests after a warm-up):"
  echo "| top keys | instructions per request | more than off |"
  echo "|---|---:|---:|"
  echo "| off (\`--top-keys 0\`) | $cg_off | |"
  echo "| every decision counted (\`--top-exact-rate 0\`) | $cg_all | $((cg_all - cg_off)) |"
  echo "| every decision sampled out (\`--top-exact-rate 1\`) | $cg_out | $((cg_out - cg_off)) |"
fi
echo
echo "Machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')); load average at start $load_start, at end $(cut -d' ' -f1-3 /proc/loadavg)."
