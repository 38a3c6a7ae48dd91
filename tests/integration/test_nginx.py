"""A real nginx (Debian's) in front of a tiny upstream, asking sluiced with auth_request
before every request: nginx's client gets 200 until the limit, then 429 with Retry-After
and the rate limit headers passed on. The nginx config is the one docs/deployment.md shows.

nginx's auth_request accepts only 2xx, 401 and 403 from the auth server, so sluiced runs
with --http-deny-status 403 and nginx turns that 403 back into a 429."""

import http.client
import os
import shutil
import signal
import subprocess
import time

import pytest
import requests

from conftest import Sluiced, free_port

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"

CONF = """
worker_processes 1;
daemon off;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;

    # the tiny upstream: the application sluice protects
    server {{
        listen 127.0.0.1:{upstream};
        location / {{ return 200 "hello from the app\\n"; }}
    }}

    server {{
        listen 127.0.0.1:{front};

        location / {{
            auth_request /_sluice;
            # what sluice said, for the headers below
            auth_request_set $rl_limit $upstream_http_x_ratelimit_limit;
            auth_request_set $rl_remaining $upstream_http_x_ratelimit_remaining;
            auth_request_set $rl_reset $upstream_http_x_ratelimit_reset;
            auth_request_set $rl_retry $upstream_http_retry_after;
            auth_request_set $rl_policy $upstream_http_ratelimit_policy;
            auth_request_set $rl_state $upstream_http_ratelimit;
            add_header X-RateLimit-Limit $rl_limit always;
            add_header X-RateLimit-Remaining $rl_remaining always;
            add_header X-RateLimit-Reset $rl_reset always;
            add_header RateLimit-Policy $rl_policy always;
            add_header RateLimit $rl_state always;
            error_page 403 = @limited;
            proxy_pass http://127.0.0.1:{upstream};
        }}

        location = /_sluice {{
            internal;
            proxy_pass http://127.0.0.1:{sluice}/v1/auth/api;
            proxy_pass_request_body off;
            proxy_set_header Content-Length "";
            proxy_set_header X-Api-Key $http_x_api_key;
        }}

        location @limited {{
            add_header Retry-After $rl_retry always;
            add_header X-RateLimit-Limit $rl_limit always;
            add_header X-RateLimit-Remaining $rl_remaining always;
            add_header X-RateLimit-Reset $rl_reset always;
            add_header RateLimit-Policy $rl_policy always;
            add_header RateLimit $rl_state always;
            default_type application/json;
            return 429 '{{"error":"rate limited"}}\\n';
        }}
    }}
}}
"""


@pytest.fixture
def stack(tmp_path):
    yield from run_stack(tmp_path, "policies:\n  api: {limit: 3, period: 1h}\n")


@pytest.fixture
def shadow_stack(tmp_path):
    yield from run_stack(tmp_path, "policies:\n  api: {limit: 1, period: 1h, shadow: true}\n")


def run_stack(tmp_path, policies, sluice_args=(), nginx_conf=CONF):
    """sluiced with these policies (and flags), nginx in front of the upstream with this
    config; yields (base, sluiced)."""
    conf = tmp_path / "sluice.yaml"
    conf.write_text(policies)
    sluice_http = free_port()
    sl = Sluiced(args=["--http-port", str(sluice_http), "--http-deny-status", "403",
                       "--config", str(conf)] + list(sluice_args), workdir=str(tmp_path)).start()
    prefix = tmp_path / "nginx"
    prefix.mkdir()
    front, upstream = free_port(), free_port()
    (prefix / "nginx.conf").write_text(nginx_conf.format(prefix=prefix, front=front, upstream=upstream,
                                                   sluice=sluice_http))
    ng = subprocess.Popen([NGINX, "-p", str(prefix), "-c", str(prefix / "nginx.conf")],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = "http://127.0.0.1:%d" % front
    deadline = time.monotonic() + 10
    while True:
        try:
            requests.get(base + "/", timeout=1)
            break
        except requests.ConnectionError:
            if ng.poll() is not None or time.monotonic() > deadline:
                err = (prefix / "error.log").read_text() if (prefix / "error.log").exists() else ""
                sl.stop(check=False)
                pytest.fail("nginx did not start: %s %s" % (ng.stderr.read().decode(), err))
            time.sleep(0.05)
    yield base, sl
    os.kill(ng.pid, signal.SIGQUIT)
    try:
        ng.wait(timeout=10)
    except subprocess.TimeoutExpired:
        ng.kill()
    sl.stop()


def test_nginx_auth_request_turns_the_limit_into_429(stack):
    base, _ = stack
    hdr = {"X-Api-Key": "customer-42"}
    for remaining in (2, 1, 0):
        r = requests.get(base + "/orders", headers=hdr, timeout=5)
        assert r.status_code == 200, r.text
        assert r.text == "hello from the app\n"
        assert r.headers["X-RateLimit-Limit"] == "3"
        assert r.headers["X-RateLimit-Remaining"] == str(remaining)
        assert r.headers["RateLimit-Policy"] == '"api";q=3;w=3600'
    r = requests.get(base + "/orders", headers=hdr, timeout=5)
    assert r.status_code == 429
    assert r.json() == {"error": "rate limited"}
    retry = int(r.headers["Retry-After"])
    assert 1190 <= retry <= 1200, "3 per hour: one comes back after 20 minutes"
    assert r.headers["X-RateLimit-Remaining"] == "0"
    assert r.headers["RateLimit"].startswith('"api";r=0;t=')
    # another customer is not affected
    r = requests.get(base + "/orders", headers={"X-Api-Key": "customer-7"}, timeout=5)
    assert r.status_code == 200


def test_nginx_without_a_key_gets_401(stack):
    base, _ = stack
    r = requests.get(base + "/orders", timeout=5)
    assert r.status_code == 401


def test_nginx_client_never_sees_a_shadow_policy(shadow_stack):
    base, sl = shadow_stack
    hdr = {"X-Api-Key": "customer-42"}
    for _ in range(3):  # the first would be admitted, the others refused
        r = requests.get(base + "/orders", headers=hdr, timeout=5)
        assert r.status_code == 200 and r.text == "hello from the app\n", r.text
        present = [f for f in ("X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset",
                               "Retry-After", "RateLimit", "RateLimit-Policy") if f in r.headers]
        assert present == [], "a dry run reaches the client as %s" % present
    # the would-be refusals are on the operator's side
    with sl.conn() as c:
        text = c.call("INFO", "stats")
    text = text.decode() if isinstance(text, bytes) else text
    assert "decisions_shadow_rejected:2\r\n" in text, text


# docs/deployment.md's per-address variant: nginx appends the address it sees to whatever
# X-Forwarded-For the client sent, and sluiced believes only nginx's own entry.
CONF_XFF = CONF.replace("proxy_set_header X-Api-Key $http_x_api_key;",
                        "proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;")


@pytest.fixture
def xff_stack(tmp_path):
    yield from run_stack(tmp_path, "policies:\n  api: {limit: 2, period: 1h}\n",
                         sluice_args=["--http-auth-header", "X-Forwarded-For",
                                      "--trusted-proxies", "127.0.0.1"],
                         nginx_conf=CONF_XFF)


def test_nginx_a_forged_x_forwarded_for_does_not_escape_the_limit(xff_stack):
    """Clients connect to nginx from 127.0.0.2 and 127.0.0.3; nginx (127.0.0.1, the one
    trusted proxy) asks sluiced with "<what the client sent>, <its address>"."""
    base, sl = xff_stack
    port = int(base.rsplit(":", 1)[1])

    def get(source, forged=None):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5,
                                       source_address=(source, 0))
        try:
            c.putrequest("GET", "/orders")
            if forged:
                c.putheader("X-Forwarded-For", forged)
            c.endheaders()
            r = c.getresponse()
            r.read()
            return r.status
        finally:
            c.close()

    # a new forged address on every request: the limit holds for 127.0.0.2 all the same
    assert get("127.0.0.2", "1.1.1.1") == 200
    assert get("127.0.0.2", "2.2.2.2, 3.3.3.3") == 200
    assert get("127.0.0.2", "4.4.4.4") == 429
    assert get("127.0.0.2") == 429
    # another client has its own limit
    assert get("127.0.0.3", "127.0.0.2") == 200
    with sl.conn() as c:
        assert c.call("SL.INSPECT", "api:127.0.0.2") is not None
        assert c.call("SL.INSPECT", "api:127.0.0.3") is not None
        for forged in ("1.1.1.1", "2.2.2.2", "3.3.3.3", "4.4.4.4"):
            assert c.call("SL.INSPECT", "api:" + forged) is None, forged
