#!/usr/bin/env bash
# sluiced's GET /v1/check vs nginx's own limit_req, with the same load generator (wrk),
# the same cores and the same connections, in one run.
#
#   bench/http_compare.sh        prints a markdown table, then the ratios
#
# Each server runs on core $SERVER_CPU (sluiced with --threads 1, nginx with one worker),
# wrk on core $CLIENT_CPU with $CONNS connections for $SECONDS seconds:
#   - sluiced GET /v1/check?key=K&limit=...&period=... on one key (and, through a wrk
#     Lua script that costs wrk some of its own speed, a key per connection)
#   - nginx limit_req, a zone keyed per client ($binary_remote_addr: every connection of
#     wrk comes from 127.0.0.1, so one key, as sluiced's hot key), in front of empty_gif
#     (a content handler: nginx's `return` runs before limit_req and would skip it)
#   - both with no limit at all (sluiced GET /healthz, nginx empty_gif): the ceiling
# The limits are high enough that every request is admitted: the cost of deciding, not
# of refusing, is measured.
#
# A shared machine makes single runs vary by a third, so the runs are interleaved in
# $ROUNDS rounds (each round runs every row once, sluiced and nginx back to back) and the
# table gives the median of each row, with every round's requests/s beside it; each ratio
# is given from the medians and within each round. Each run also
# measures the server's CPU time per request: user + system time of the server's
# processes (nginx: master and worker) from /proc/PID/stat before and after the run,
# divided by the requests wrk completed. CPU time counts only what the server itself
# did, so other work on the machine disturbs it far less than requests/s. The table also
# says how busy wrk kept its own core: on a small machine the load generator can be the
# bottleneck (wrk spends about as much CPU per request as the server), and a row whose
# wrk was near 100% measured the client as much as the server.
#
# Environment: SLUICED (build/bin/sluiced), SERVER_CPU (0), CLIENT_CPU (1), CONNS (50),
# SECONDS (10), ROUNDS (3).
set -euo pipefail
TIMEFORMAT='%U %S %R' # bash's `time`: user, system and wall seconds
# SECONDS is bash's own counter of seconds since the shell started, which starts from
# the environment's value when there is one, else from 0 (and then ${SECONDS:-10} would
# be 0): read it first, and take 0 as "not given".
SECONDS_=$SECONDS
[ "$SECONDS_" -gt 0 ] || SECONDS_=10
cd "$(dirname "$0")/.."

SLUICED=${SLUICED:-build/bin/sluiced}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
CONNS=${CONNS:-50}
ROUNDS=${ROUNDS:-3}
BENCH_NAME=http_compare
. bench/lib.sh
bench_need nginx wrk taskset curl pgrep
[ -x "$SLUICED" ] || bench_fail "$SLUICED is not built (make)"
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || bench_fail "ROUNDS must be a positive integer"
bench_workdir

wait_http() { for _ in $(seq 200); do curl -s -o /dev/null "$1" && return 0; sleep 0.05; done; echo "no answer from $1" >&2; exit 1; }

SL_PORT=$(free_port); SL_HTTP=$(free_port); NG_PORT=$(free_port)
taskset -c "$SERVER_CPU" "$SLUICED" --port "$SL_PORT" --http-port "$SL_HTTP" --threads 1 \
  --log-level warn 2>"$work/sluiced.log" &
SL_PID=$!
pids+=("$SL_PID")

mkdir -p "$work/nginx"
cat >"$work/nginx/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log error;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $work/nginx/body;
    proxy_temp_path $work/nginx/proxy;
    fastcgi_temp_path $work/nginx/fastcgi;
    uwsgi_temp_path $work/nginx/uwsgi;
    scgi_temp_path $work/nginx/scgi;
    limit_req_zone \$binary_remote_addr zone=per_client:10m rate=100000000r/s;
    server {
        listen 127.0.0.1:$NG_PORT;
        location /limited { limit_req zone=per_client burst=100000000 nodelay; empty_gif; }
        location /free { empty_gif; }
    }
}
EOF
taskset -c "$SERVER_CPU" nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" &
NG_PID=$!
pids+=("$NG_PID")
wait_http "http://127.0.0.1:$SL_HTTP/healthz"
wait_http "http://127.0.0.1:$NG_PORT/free"

CHECK_URL="http://127.0.0.1:$SL_HTTP/v1/check?key=bench&limit=100000000&period=1"
# Every row must answer 200 before it is measured.
for url in "$CHECK_URL" "http://127.0.0.1:$NG_PORT/limited"; do
  code=$(curl -s -o /dev/null -w '%{http_code}' "$url")
  [ "$code" = 200 ] || { echo "http_compare: $url answered $code, not 200" >&2; exit 1; }
done

# A Lua script for wrk: a key per connection for sluiced's checks.
cat >"$work/keys.lua" <<'EOF'
local counter = 0
setup = function(thread) thread:set("id", counter); counter = counter + 1 end
init = function(args) n = 0 end
request = function()
  n = n + 1
  return wrk.format("GET", "/v1/check?key=bench:" .. id .. ":" .. (n % 64) .. "&limit=100000000&period=1")
end
EOF

# One wrk run against a server; appends a tab-separated line to $work/runs:
# row, requests/s, p50 µs, p99 µs, server CPU µs per request, non-2xx answers, and how
# busy wrk kept its own core (user + system time over wall time, bash's `time`): near
# 100%, the run measured the load generator as much as the server.
run() { # row server-pid url [script]
  local row=$1 pid=$2 url=$3 script=${4:-} out t0 t1 busy
  local args=(-t1 -c"$CONNS" -d"${SECONDS_}s" --latency)
  [ -n "$script" ] && args+=(-s "$script")
  t0=$(cpu_ticks "$pid")
  { time taskset -c "$CLIENT_CPU" wrk "${args[@]}" "$url" >"$work/wrk.out"; } 2>"$work/wrk.time"
  t1=$(cpu_ticks "$pid")
  out=$(cat "$work/wrk.out")
  busy=$(awk '{ printf "%.0f", ($1 + $2) * 100 / $3 }' "$work/wrk.time")
  awk -v row="$row" -v ticks=$((t1 - t0)) -v hz="$CLK_TCK" -v busy="$busy" '
    function us(v) {  # wrk prints 594.00us, 1.62ms, 1.01s
      if (v ~ /us$/) return v + 0
      if (v ~ /ms$/) return v * 1000
      if (v ~ /m$/) return v * 60e6
      return v * 1e6
    }
    $2 == "requests" && $3 == "in" { n = $1 }
    /^Requests\/sec/ { rps = $2 }
    $1 == "50%" { p50 = us($2) }
    $1 == "99%" { p99 = us($2) }
    /Non-2xx/ { bad = $NF }
    END {
      if (n == 0) { print "http_compare: wrk completed no request for " row > "/dev/stderr"; exit 1 }
      printf "%s\t%s\t%.0f\t%.0f\t%.2f\t%d\t%s\n", row, rps, p50, p99, ticks * 1e6 / hz / n, bad, busy
    }' <<<"$out" >>"$work/runs"
}

ROWS=(
  "sluiced GET /v1/check (GCRA)"
  "sluiced GET /v1/check, a key per connection (wrk Lua)"
  "nginx limit_req + empty_gif"
  "sluiced GET /healthz (no limit)"
  "nginx empty_gif (no limit)"
)
echo "http_compare: $ROUNDS rounds of wrk -t1 -c$CONNS -d${SECONDS_}s, servers on core $SERVER_CPU, wrk on core $CLIENT_CPU; load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for round in $(seq "$ROUNDS"); do
  # One key, as nginx's zone keyed by the client address has one key for all of wrk's
  # connections; a static URL, so that wrk spends the same on every request of both.
  # The pairs that make the ratios run back to back, so that they share the machine's
  # mood; the key-per-connection row last.
  run "${ROWS[0]}" "$SL_PID" "$CHECK_URL"
  run "${ROWS[2]}" "$NG_PID" "http://127.0.0.1:$NG_PORT/limited"
  run "${ROWS[3]}" "$SL_PID" "http://127.0.0.1:$SL_HTTP/healthz"
  run "${ROWS[4]}" "$NG_PID" "http://127.0.0.1:$NG_PORT/free"
  run "${ROWS[1]}" "$SL_PID" "http://127.0.0.1:$SL_HTTP/" "$work/keys.lua"
  echo "http_compare: round $round of $ROUNDS done; load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
done

/usr/bin/python3 - "$work/runs" "$ROUNDS" "${ROWS[@]}" <<'EOF'
import statistics, sys
path, rounds, rows = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
runs = {r: [] for r in rows}
for line in open(path):
    row, rps, p50, p99, cpu, bad, busy = line.rstrip("\n").split("\t")
    runs[row].append((float(rps), float(p50), float(p99), float(cpu), int(bad), float(busy)))
med = {r: [statistics.median(v[i] for v in runs[r]) for i in (0, 1, 2, 3, 5)] for r in rows}

def lat(us):
    return "%.0f µs" % us if us < 1000 else "%.2f ms" % (us / 1000)

print("| what | requests/s (median of %d) | each round | p50 | p99 | server CPU µs/request | wrk's core busy | non-2xx |" % rounds)
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    rps, p50, p99, cpu, busy = med[r]
    each = " / ".join("%.0f" % v[0] for v in runs[r])
    bad = sum(v[4] for v in runs[r])
    print("| %s | %.0f | %s | %s | %s | %.2f | %.0f%% | %d |" % (r, rps, each, lat(p50), lat(p99), cpu, busy, bad))

# Each ratio is the median of the rows, then in brackets the same ratio within each
# round (whose two runs came one after the other): rounds that disagree say how far the
# machine's noise reaches.
def ratio(a, b, i, invert=False):
    num, den = (b, a) if invert else (a, b)
    each = ", ".join("%.2fx" % (x[i] / y[i]) for x, y in zip(runs[num], runs[den]))
    return "%.2fx (rounds: %s)" % (med[num][i] / med[den][i], each)

print()
print("sluiced / nginx limit_req: %s" % ratio(rows[0], rows[2], 0))
print("server CPU per request, nginx limit_req / sluiced: %s; above 1: sluiced spends less"
      % ratio(rows[0], rows[2], 3, invert=True))
print("without a limit, sluiced /healthz / nginx empty_gif: %s throughput, %s CPU per request"
      % (ratio(rows[3], rows[4], 0), ratio(rows[3], rows[4], 3, invert=True)))
EOF
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
