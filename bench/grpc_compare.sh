#!/usr/bin/env bash
# sluiced's gRPC face (Envoy's ShouldRateLimit) beside its HTTP/1.1 face, the same check
# on each, with one load generator (h2load, Debian's nghttp2-client) for both, in one run.
#
#   bench/grpc_compare.sh        prints a markdown table, then the ratios
#
# sluiced runs on core $SERVER_CPU with --threads 1, h2load on core $CLIENT_CPU:
#   - gRPC ShouldRateLimit, one descriptor (remote_address, 10.0.0.1) of domain edge, a rule
#     of 100000000 a second (a fixed window, as envoyproxy/ratelimit's);
#   - HTTP/1.1 GET /v1/check of one key under a fixed window of the same limit;
#   - gRPC Health/Check and HTTP GET /healthz: each face's ceiling, no limit;
# each with $CONNS connections and one request at a time per connection, then gRPC with
# $MUX_CONNS connections of $MUX_STREAMS streams each, as Envoy multiplexes its checks on
# a few connections. Every request is admitted: the cost of deciding is measured.
# The runs are interleaved in $ROUNDS rounds; the table gives each row's median. The
# server's CPU per request is its user + system time from /proc/PID/stat over the run,
# divided by the requests h2load completed; h2load's own core's busy share says whether
# the client set the pace.
#
# Environment: SLUICED (build/bin/sluiced), SERVER_CPU (0), CLIENT_CPU (1), CONNS (50),
# MUX_CONNS (4), MUX_STREAMS (32), REQUESTS (300000), ROUNDS (3).
set -euo pipefail
TIMEFORMAT='%U %S %R'
cd "$(dirname "$0")/.."

SLUICED=${SLUICED:-build/bin/sluiced}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
CONNS=${CONNS:-50}
MUX_CONNS=${MUX_CONNS:-4}
MUX_STREAMS=${MUX_STREAMS:-32}
REQUESTS=${REQUESTS:-300000}
ROUNDS=${ROUNDS:-3}
BENCH_NAME=grpc_compare
. bench/lib.sh
bench_need h2load taskset curl
[ -x "$SLUICED" ] || bench_fail "$SLUICED is not built (make)"
bench_workdir

mkdir -p "$work/envoy"
cat >"$work/envoy/edge.yaml" <<'EOF'
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 100000000}
EOF
# RateLimitRequest{domain: "edge", descriptors: [{entries: [(remote_address, 10.0.0.1)]}]},
# 36 bytes, behind gRPC's 5-byte prefix; and an empty HealthCheckRequest.
printf '\x00\x00\x00\x00\x24\x0a\x04edge\x12\x1c\x0a\x1a\x0a\x0eremote_address\x12\x0810.0.0.1' \
  >"$work/rls.bin"
printf '\x00\x00\x00\x00\x00' >"$work/health.bin"

HTTP=$(free_port); GRPC=$(free_port)
taskset -c "$SERVER_CPU" "$SLUICED" --port 0 --http-port "$HTTP" --grpc-port "$GRPC" \
  --envoy-config "$work/envoy" --threads 1 --log-level warn 2>"$work/sluiced.log" &
SL_PID=$!
pids+=("$SL_PID")
for _ in $(seq 200); do curl -s -o /dev/null "http://127.0.0.1:$HTTP/healthz" && break; sleep 0.05; done

RLS="http://127.0.0.1:$GRPC/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
HEALTH="http://127.0.0.1:$GRPC/grpc.health.v1.Health/Check"
CHECK="http://127.0.0.1:$HTTP/v1/check?key=bench&limit=100000000&period=1&algorithm=fixed_window"
GRPC_H=(-H 'content-type: application/grpc' -H 'te: trailers')
# The gRPC answer must be grpc-status 0 and overall_code OK (h2load counts any 200).
answer=$(curl -s --http2-prior-knowledge "${GRPC_H[@]}" --data-binary @"$work/rls.bin" -D - \
  -o "$work/answer.bin" "$RLS" | tr -d '\r')
grep -q '^grpc-status: 0' <<<"$answer" || bench_fail "ShouldRateLimit did not answer OK: $answer"
[ "$(od -An -tx1 -j5 -N2 "$work/answer.bin" | tr -d ' ')" = 0801 ] ||
  bench_fail "ShouldRateLimit's overall_code is not OK"

run() { # row h2load-args...
  local row=$1 t0 t1 busy
  shift
  t0=$(cpu_ticks "$SL_PID")
  { time taskset -c "$CLIENT_CPU" h2load -n "$REQUESTS" "$@" >"$work/h2load.out"; } 2>"$work/h2load.time"
  t1=$(cpu_ticks "$SL_PID")
  busy=$(awk '{ printf "%.0f", ($1 + $2) * 100 / $3 }' "$work/h2load.time")
  awk -v row="$row" -v ticks=$((t1 - t0)) -v hz="$CLK_TCK" -v busy="$busy" '
    function us(v) { if (v ~ /us$/) return v + 0; if (v ~ /ms$/) return v * 1000; return v * 1e6 }
    /^finished in/ { rps = $4 }
    /^requests:/ { ok = $8 }
    /^time for request:/ { mean = us($6) }
    END {
      if (ok == 0) { print "grpc_compare: no request succeeded for " row > "/dev/stderr"; exit 1 }
      printf "%s\t%s\t%.0f\t%.2f\t%s\n", row, rps, mean, ticks * 1e6 / hz / ok, busy
    }' "$work/h2load.out" >>"$work/runs"
}

ROWS=(
  "gRPC ShouldRateLimit, -c$CONNS -m1"
  "HTTP/1.1 GET /v1/check, -c$CONNS"
  "gRPC Health/Check (no limit), -c$CONNS -m1"
  "HTTP/1.1 GET /healthz (no limit), -c$CONNS"
  "gRPC ShouldRateLimit, -c$MUX_CONNS -m$MUX_STREAMS"
)
echo "grpc_compare: $ROUNDS rounds of $REQUESTS requests per row, sluiced on core $SERVER_CPU, h2load on core $CLIENT_CPU" >&2
for round in $(seq "$ROUNDS"); do
  run "${ROWS[0]}" -c "$CONNS" -m 1 "${GRPC_H[@]}" -d "$work/rls.bin" "$RLS"
  run "${ROWS[1]}" --h1 -c "$CONNS" -m 1 "$CHECK"
  run "${ROWS[2]}" -c "$CONNS" -m 1 "${GRPC_H[@]}" -d "$work/health.bin" "$HEALTH"
  run "${ROWS[3]}" --h1 -c "$CONNS" -m 1 "http://127.0.0.1:$HTTP/healthz"
  run "${ROWS[4]}" -c "$MUX_CONNS" -m "$MUX_STREAMS" "${GRPC_H[@]}" -d "$work/rls.bin" "$RLS"
  echo "grpc_compare: round $round of $ROUNDS done" >&2
done

/usr/bin/python3 - "$work/runs" "$ROUNDS" "${ROWS[@]}" <<'EOF'
import statistics, sys
path, rounds, rows = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
runs = {r: [] for r in rows}
for line in open(path):
    row, rps, mean, cpu, busy = line.rstrip("\n").split("\t")
    runs[row].append((float(rps), float(mean), float(cpu), float(busy)))
med = {r: [statistics.median(v[i] for v in runs[r]) for i in range(4)] for r in rows}
print("| what | requests/s (median of %d) | each round | mean latency | server CPU µs/request | h2load's core busy |" % rounds)
print("|---|---:|---:|---:|---:|---:|")
for r in rows:
    rps, mean, cpu, busy = med[r]
    each = " / ".join("%.0f" % v[0] for v in runs[r])
    print("| %s | %.0f | %s | %.0f µs | %.2f | %.0f%% |" % (r, rps, each, mean, cpu, busy))
print()
print("server CPU per check, gRPC / HTTP/1.1: %.2fx (target: at most 2x)" % (med[rows[0]][2] / med[rows[1]][2]))
print("server CPU per check, gRPC multiplexed / HTTP/1.1: %.2fx" % (med[rows[4]][2] / med[rows[1]][2]))
print("throughput, gRPC / HTTP/1.1: %.2fx" % (med[rows[0]][0] / med[rows[1]][0]))
EOF
