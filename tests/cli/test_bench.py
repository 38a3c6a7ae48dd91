"""`sluice bench` against a real sluiced on 127.0.0.1."""

import pytest

from conftest import Sluiced, free_port, run


def result(out):
    r = {}
    for line in out.splitlines():
        k, _, v = line.partition(" ")
        v = v.strip()
        try:
            r[k] = float(v) if "." in v else int(v)
        except ValueError:
            r[k] = v
    return r


def test_sl_take_pipelined(sluiced):
    p = run("bench", "--server", sluiced.addr, "--connections", 3, "--pipeline", 8,
            "--duration", "1500ms", "--keys", 50, check=0)
    r = result(p.stdout)
    assert r["command"] == "SL.TAKE" and r["connections"] == 3 and r["pipeline"] == 8
    assert r["requests"] > 0 and r["errors"] == 0
    assert r["allowed"] + r["limited"] == r["requests"]
    lat = [r["latency_p50_ms"], r["latency_p90_ms"], r["latency_p99_ms"], r["latency_p999_ms"],
           r["latency_max_ms"]]
    assert lat == sorted(lat) and lat[0] > 0
    assert r["throughput_rps"] > 0
    # The live progress line, once a second.
    assert "requests" in p.stderr and "req/s" in p.stderr


def test_cl_throttle_admits_exactly_the_burst(sluiced):
    # One key, 5 per hour: over a second exactly 5 are allowed, whatever the load.
    p = run("bench", "--server", sluiced.addr, "--command", "cl.throttle", "--keys", 1,
            "--prefix", "t:cl:",
            "--limit", 5, "--period", "1h", "--duration", 1, "--connections", 2, "--pipeline", 4,
            check=0)
    r = result(p.stdout)
    assert r["command"] == "CL.THROTTLE"
    assert r["errors"] == 0 and r["allowed"] == 5 and r["limited"] == r["requests"] - 5
    assert r["requests"] > 5


def test_sl_take_exact_over_keys_with_zipf(sluiced):
    p = run("bench", "--server", sluiced.addr, "--keys", 3, "--zipf", "0.5", "--limit", 2,
            "--prefix", "t:zipf:",
            "--period", "1h", "--algorithm", "sliding_log", "--duration", 1, "--seed", 9, check=0)
    r = result(p.stdout)
    assert r["errors"] == 0 and r["allowed"] == 6


def test_cost_beyond_the_limit_is_never_allowed(sluiced):
    p = run("bench", "--server", sluiced.addr, "--cost", 3, "--limit", 2, "--keys", 10,
            "--prefix", "t:cost:",
            "--duration", "500ms", check=0)
    r = result(p.stdout)
    assert r["allowed"] == 0 and r["limited"] == r["requests"] > 0


@pytest.mark.parametrize("estimator", [None, "aimd", "anchored"])
def test_sl_acquire_releases_every_lease_it_gets(sluiced, estimator):
    # 2 leases per key, 4 keys, 2 connections of 8 in flight: refusals come,
    # and every lease but those held at the end goes back.
    est = ["--estimator", estimator] if estimator else []
    p = run("bench", "--server", sluiced.addr, "--command", "sl.acquire", "--keys", 4,
            "--prefix", "t:acq:%s:" % (estimator or "fixed"), "--limit", 2, "--period", "30s",
            "--duration", "700ms", "--connections", 2, "--pipeline", 8, *est, check=0)
    r = result(p.stdout)
    assert r["errors"] == 0, p.stderr
    assert r["command"] == ("SL.ACQUIRE ADAPTIVE, SL.RELEASE" if estimator
                            else "SL.ACQUIRE, SL.RELEASE")
    assert r["allowed"] > 0 and r["limited"] > 0
    # each reply is an acquire's (a lease or a refusal) or a release's
    assert r["allowed"] + r["limited"] + r["released"] <= r["requests"]
    assert r["allowed"] - 2 * 8 <= r["released"] <= r["allowed"]


def test_http_bench():
    s = Sluiced(http=True).start()
    s.require_http()
    try:
        p = run("bench", "--server", "127.0.0.1:%d" % s.http_port, "--http", "--duration", 1,
                "--connections", 2, "--pipeline", 2, "--limit", 100, "--period", "1h",
                "--keys", 1, "--prefix", "t:http:")
        r = result(p.stdout)
        if r.get("errors") and r["errors"] == r["requests"]:
            pytest.skip("this sluiced does not serve /v1/check yet")
        assert p.returncode == 0, p.stderr
        assert r["allowed"] == 100 and r["limited"] == r["requests"] - 100
    finally:
        s.stop()


def test_a_server_with_a_password():
    """SLUICE_PASSWORD: each RESP connection AUTHs first, each HTTP request carries the
    bearer token; a wrong one fails the run with the server's words."""
    s = Sluiced(http=True, extra=["--requirepass", "b-s3cret"]).start()
    try:
        resp = ["bench", "--server", s.addr, "--duration", 1, "--connections", 3, "--keys", 1,
                "--prefix", "t:pw:", "--limit", 7, "--period", "1h"]
        r = result(run(*resp, check=0, env={"SLUICE_PASSWORD": "b-s3cret"}).stdout)
        assert r["allowed"] == 7 and r["errors"] == 0
        p = run(*resp, check=1, env={"SLUICE_PASSWORD": "nope"})
        assert "WRONGPASS" in p.stderr, p.stderr
        http = ["bench", "--server", "127.0.0.1:%d" % s.http_port, "--http", "--duration", 1,
                "--connections", 2, "--keys", 1, "--prefix", "t:pwh:", "--limit", 5,
                "--period", "1h"]
        r = result(run(*http, check=0, env={"SLUICE_PASSWORD": "b-s3cret"}).stdout)
        assert r["allowed"] == 5 and r["errors"] == 0
    finally:
        s.stop()


def test_unreachable_server_fails_with_1():
    p = run("bench", "--server", "127.0.0.1:%d" % free_port(), "--duration", 1, check=1)
    assert "cannot connect" in p.stderr


@pytest.mark.parametrize("args,flag", [
    ([], "--server"),
    (["--server", "127.0.0.1:1", "--connections", "0"], "--connections"),
    (["--server", "127.0.0.1:1", "--connections", "5000"], "--connections"),
    (["--server", "127.0.0.1:1", "--pipeline", "x"], "--pipeline"),
    (["--server", "127.0.0.1:1", "--duration", "0"], "--duration"),
    (["--server", "127.0.0.1:1", "--keys", "0"], "--keys"),
    (["--server", "127.0.0.1:1", "--zipf", "-1"], "--zipf"),
    (["--server", "127.0.0.1:1", "--command", "get"], "--command"),
    (["--server", "127.0.0.1:1", "--command", "cl.throttle", "--period", "1500ms"], "--period"),
    (["--server", "127.0.0.1:1", "--command", "cl.throttle", "--http"], "--http"),
    (["--server", "127.0.0.1:1", "--command", "sl.acquire", "--http"], "--http"),
    (["--server", "127.0.0.1:1", "--estimator", "aimd"], "--estimator"),
    (["--server", "127.0.0.1:1", "--command", "sl.acquire", "--estimator", "tcp"], "--estimator"),
    (["--server", "127.0.0.1:1", "--algorithm", "concurrency"], "--algorithm"),
    (["--server", "127.0.0.1:1", "--turbo"], "--turbo"),
    (["--server", "127.0.0.1:1", "--prefix", "a b"], "--prefix"),
    (["--server", "127.0.0.1:1", "stray"], "stray"),
])
def test_bad_flags(args, flag):
    p = run("bench", *args, check=2)
    assert flag in p.stderr


@pytest.mark.parametrize("cmd", ["simulate", "take", "bench"])
def test_help_for_every_command(cmd):
    p = run(cmd, "--help", check=0)
    assert p.stdout.startswith("usage: sluice " + cmd)
    assert "examples:" in p.stdout


def test_main_usage():
    assert "simulate" in run("--help", check=0).stdout
    p = run("frobnicate", check=2)
    assert "unknown command 'frobnicate'" in p.stderr
    assert run(check=2).stderr.startswith("usage:")


LOG_LIMIT_ERROR = ("limit must be a positive integer of at most 2305843009213693951 "
                   "(65536 for sliding_log)")


def test_errors_are_told_with_their_text_and_count(sluiced):
    # A sliding log holds at most 65 536: every take is refused, and bench says why.
    p = run("bench", "--server", sluiced.addr, "--algorithm", "sliding_log", "--limit", 70000,
            "--prefix", "t:err:", "--duration", "500ms", "--connections", 2, check=0)
    r = result(p.stdout)
    assert r["requests"] > 0 and r["errors"] == r["requests"], p.stdout
    assert r["first_error"] == "ERR " + LOG_LIMIT_ERROR, p.stdout
    assert "%d error replies, 1 distinct:" % r["errors"] in p.stderr, p.stderr
    assert "%10d  ERR %s" % (r["errors"], LOG_LIMIT_ERROR) in p.stderr, p.stderr


def test_a_clean_run_tells_no_error(sluiced):
    p = run("bench", "--server", sluiced.addr, "--duration", "300ms", "--prefix", "t:clean:",
            check=0)
    assert "first_error" not in p.stdout and "error replies" not in p.stderr


def test_http_errors_are_told_with_status_and_body():
    s = Sluiced(http=True).start()
    s.require_http()
    try:
        p = run("bench", "--server", "127.0.0.1:%d" % s.http_port, "--http", "--duration", "500ms",
                "--algorithm", "sliding_log", "--limit", 70000, "--prefix", "t:herr:", check=0)
        r = result(p.stdout)
        want = 'HTTP 400 {"error":"%s","field":"limit"}' % LOG_LIMIT_ERROR
        assert r["requests"] > 0 and r["errors"] == r["requests"], p.stdout
        assert r["first_error"] == want, p.stdout
        assert "%10d  %s" % (r["errors"], want) in p.stderr, p.stderr
    finally:
        s.stop()
