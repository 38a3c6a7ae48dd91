#!/usr/bin/env bash
# sluiced's GET /v1/check vs nginx's own limit_req, with the same load generator (wrk),
# the same cores and the same connections, in one run.
#
#   bench/http_compare.sh        prints a markdown table
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
# of refusing, is measured. Environment: SLUICED (build/bin/sluiced), SERVER_CPU (0),
# CLIENT_CPU (1), CONNS (50), SECONDS (10).
set -euo pipefail
cd "$(dirname "$0")/.."

SLUICED=${SLUICED:-build/bin/sluiced}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
CONNS=${CONNS:-50}
SECONDS_=${SECONDS:-10}
for tool in nginx wrk taskset curl; do
  command -v "$tool" >/dev/null || { echo "http_compare: $tool is missing (apt-get install nginx wrk curl)" >&2; exit 2; }
done
[ -x "$SLUICED" ] || { echo "http_compare: $SLUICED is not built (make)" >&2; exit 2; }

work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_http() { for _ in $(seq 200); do curl -s -o /dev/null "$1" && return 0; sleep 0.05; done; echo "no answer from $1" >&2; exit 1; }

SL_PORT=$(free_port); SL_HTTP=$(free_port); NG_PORT=$(free_port)
taskset -c "$SERVER_CPU" "$SLUICED" --port "$SL_PORT" --http-port "$SL_HTTP" --threads 1 \
  --log-level warn 2>"$work/sluiced.log" &
pids+=($!)

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
pids+=($!)
wait_http "http://127.0.0.1:$SL_HTTP/healthz"
wait_http "http://127.0.0.1:$NG_PORT/free"

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

n_run=0
run() { # name url [script]
  local out
  if [ -n "${3:-}" ]; then
    out=$(taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNS" -d"${SECONDS_}s" --latency -s "$3" "$2")
  else
    out=$(taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNS" -d"${SECONDS_}s" --latency "$2")
  fi
  local rps p50 p99 non2xx
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  p50=$(awk '$1=="50%" {print $2}' <<<"$out")
  p99=$(awk '$1=="99%" {print $2}' <<<"$out")
  non2xx=$(awk '/Non-2xx/ {print $NF}' <<<"$out")
  printf '| %s | %s | %s | %s | %s |\n' "$1" "$rps" "$p50" "$p99" "${non2xx:-0}"
  n_run=$((n_run + 1))
  echo "$rps" >"$work/rps.$n_run"
}

echo "http_compare: wrk -t1 -c$CONNS -d${SECONDS_}s, servers on core $SERVER_CPU, wrk on core $CLIENT_CPU; load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo "| what | requests/s | p50 | p99 | non-2xx |"
echo "|---|---:|---:|---:|---:|"
# One key, as nginx's zone keyed by the client address has one key for all of wrk's
# connections; a static URL, so that wrk spends the same on every request of both.
run "sluiced GET /v1/check (GCRA)" "http://127.0.0.1:$SL_HTTP/v1/check?key=bench&limit=100000000&period=1"
run "sluiced GET /v1/check, a key per connection (wrk Lua)" "http://127.0.0.1:$SL_HTTP/" "$work/keys.lua"
run "nginx limit_req + empty_gif" "http://127.0.0.1:$NG_PORT/limited"
run "sluiced GET /healthz (no limit)" "http://127.0.0.1:$SL_HTTP/healthz"
run "nginx empty_gif (no limit)" "http://127.0.0.1:$NG_PORT/free"
a=$(cat "$work/rps.1"); b=$(cat "$work/rps.3")
echo
echo "sluiced / nginx limit_req: $(/usr/bin/python3 -c "print('%.2fx' % ($a / $b))")"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
