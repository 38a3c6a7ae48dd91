"""The decision log (--decision-log FILE|-, --decision-log-sample R) on a real sluiced: every
decision of a known sequence logged with its exact fields (RESP, HTTP, forward-auth,
ShouldRateLimit over HTTP and gRPC, a policy of several limits, a shadow policy, keys no
terminal would print), a sample of a tenth within a binomial bound, rotation by rename and
SIGHUP with nothing lost, drops counted while nobody reads the file and the server answering
all the while, and the paths refused at start."""

import base64
import datetime
import json
import math
import os
import signal
import stat
import subprocess
import sys
import time

import pytest
import requests

from conftest import SANITIZER_MARKS, Sluiced, binary, free_port, write
from respclient import Conn, as_map, pipeline

BIN = binary("SLUICED", "sluiced")

POLICIES = """\
policies:
  chat:
    limits:
      - {name: rps, limit: 10, period: 1s}
      - {name: tpm, limit: 5, period: 1m, cost: tokens}
  dry:
    limit: 1
    period: 1h
    shadow: true
  api:
    limit: 1
    period: 1h
"""

EDGE = """\
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: hour, requests_per_unit: 1, name: per_ip}
"""

FIELDS = ["time", "face", "policy", "key", "cost", "allowed", "shadow", "remaining",
          "retry_after_ms", "refused_by"]


def now_ms():
    return int(time.time() * 1000)


def wait_for(cond, what, timeout=20.0):
    """Waits (polling) until cond() is true: the writer is a thread of its own, and a line
    reaches the file a little after its decision. Not a timing assertion: the bound is only
    there so that a hang fails."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.02)
    raise AssertionError("timed out waiting for " + what)


def read_lines(path):
    """The file's whole lines (a write under way may show part of its last one)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return []
    return data.split(b"\n")[:-1]


def parse(line):
    """One line: valid UTF-8, valid JSON, its fields in their order."""
    text = line.decode("utf-8")  # raises on anything that is not UTF-8
    obj = json.loads(text, object_pairs_hook=lambda pairs: pairs)
    names = [k for k, _ in obj]
    want = list(FIELDS)
    if "key_base64" in names:
        want.insert(4, "key_base64")
    assert names == want, text
    return dict(obj)


def key_bytes(rec):
    """The key's exact bytes: key_base64 when the line has it, else the JSON string."""
    if "key_base64" in rec:
        return base64.b64decode(rec["key_base64"], validate=True)
    return rec["key"].encode("utf-8")


def metric(base, name):
    text = requests.get(base + "/metrics", timeout=10).text
    total = 0
    found = False
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            total += int(float(line.rsplit(" ", 1)[1]))
            found = True
    assert found, "no %s in /metrics" % name
    return total


def start(tmp_path, *args, threads=None, envoy=False, grpc=False):
    conf = tmp_path / "sluiced.yaml"
    write(conf, POLICIES)
    http = free_port()
    extra = ["--http-port", str(http), "--config", str(conf)] + [str(a) for a in args]
    if envoy:
        d = tmp_path / "envoy"
        d.mkdir(exist_ok=True)
        write(d / "edge.yaml", EDGE)
        extra += ["--envoy-config", str(d)]
    if grpc:
        extra += ["--grpc-port", str(free_port())]
    if threads:
        extra += ["--threads", str(threads)]  # after the harness's --threads 2: the last wins
    s = Sluiced(args=extra, workdir=str(tmp_path))
    s.base = "http://127.0.0.1:%d" % http
    s.start()
    if grpc:
        s.grpc_port = int(extra[extra.index("--grpc-port") + 1])
    return s


def test_every_decision_logged_with_exact_fields(tmp_path):
    log = tmp_path / "decisions.jsonl"
    # One worker: the lines come in the order of the decisions.
    s = start(tmp_path, "--decision-log", log, threads=1, envoy=True, grpc=True)
    try:
        before = now_ms()
        want = []  # (face, policy, key bytes, cost, allowed, shadow, remaining, retry, refused_by)
        with s.conn() as c:
            # CL.THROTTLE: two admitted, then refused (redis-cell's whole seconds)
            cell = [c.call("CL.THROTTLE", "cell:1", 1, 1, 60) for _ in range(3)]
            assert [r[0] for r in cell] == [0, 0, 1]
            for r in cell:
                want.append(("resp", None, b"cell:1", 1, r[0] == 0, False, r[2],
                             ("cell", r[3]), None if r[0] == 0 else "default"))
            # SL.TAKE at cost 2: twice, the second refused
            for _ in range(2):
                d = as_map(c.call("SL.TAKE", "take:1", 3, "1m", "COST", 2))
                want.append(("resp", None, b"take:1", 2, d["allowed"] == 1, False,
                             d["remaining"], d["retry_after_ms"],
                             None if d["allowed"] else "default"))
            assert want[-1][4] is False
            # SL.TAKEMANY: its second limit refuses; the line names it, under the first key
            for _ in range(2):
                d = as_map(c.call("SL.TAKEMANY", 2, "many:a", "many:b", "LIMIT", 5, 60,
                                  "LIMIT", 1, 60))
                many = [as_map(x) for x in d["results"]]
                # the numbers of the limit that binds: the one with fewer left, or that refused
                want.append(("resp", None, b"many:a", 1, d["allowed"] == 1, False,
                             many[1]["remaining"], many[1]["retry_after_ms"],
                             None if d["allowed"] else "limit1"))
            assert d["allowed"] == 0 and d["rejected_by"] == 1
            # A policy of two limits: the second refuses, by its name
            for _ in range(2):
                d = as_map(c.call("SL.POLICY", "chat", "alice", "TOKENS", 3))
                want.append(("resp", "chat", b"chat:alice", 3, d["allowed"] == 1, False,
                             d["remaining"], d["retry_after_ms"],
                             None if d["allowed"] else "chat.tpm"))
            assert d["allowed"] == 0 and d["binding"] == b"chat.tpm"
            # A shadow policy: let through, and logged as the refusal it would have been
            for _ in range(2):
                d = as_map(c.call("SL.POLICY", "dry", "bob"))
                assert d["allowed"] == 1
                refused = d["would_allow"] == 0
                want.append(("resp", "dry", b"dry:bob", 1, True, refused, d["remaining"],
                             d["would_retry_after_ms"], "dry" if refused else None))
            assert refused
            # Keys with quotes, backslashes, control bytes, bytes that are not UTF-8
            for key in (b'q"uo\\te', b"ctl\x00\x01\n\r\t\x1f\x7f", b"bad\xff\xfe\xc0\xafutf8",
                        "\u00e9t\u00e9 \u20ac \U0001f600".encode()):
                d = as_map(c.call("SL.TAKE", key, 100, 60))
                want.append(("resp", None, key, 1, True, False, d["remaining"], 0, None))
        # HTTP: an ad-hoc check, twice
        for _ in range(2):
            r = requests.get(s.base + "/v1/check",
                             params={"key": "http:1", "limit": 1, "period": 60}, timeout=10)
            j = r.json()
            want.append(("http", None, b"http:1", 1, r.status_code == 200, False,
                         j["remaining"], j["retry_after_ms"],
                         None if r.status_code == 200 else "default"))
        assert r.status_code == 429
        # A policy over HTTP's JSON body
        r = requests.post(s.base + "/v1/check", json={"key": "bea", "policy": "chat",
                                                      "tokens": 1}, timeout=10)
        j = r.json()
        want.append(("http", "chat", b"chat:bea", 1, True, False, j["remaining"], 0, None))
        # Forward-auth: the key from the header, under the policy's template
        for _ in range(2):
            r = requests.get(s.base + "/v1/auth/api", headers={"X-Api-Key": "fa-1"}, timeout=10)
            j = r.json()
            want.append(("http", "api", b"api:fa-1", 1, r.status_code == 200, False,
                         j["remaining"], j["retry_after_ms"],
                         None if r.status_code == 200 else "api"))
        assert r.status_code == 429
        # ShouldRateLimit over HTTP's POST /json: the rule's stats key is the policy
        envoy_key = b"\x1fenvoy\x1fedge\x1fremote_address\x1f10.0.0.9"
        for _ in range(2):
            r = requests.post(s.base + "/json", json={"domain": "edge", "descriptors": [
                {"entries": [{"key": "remote_address", "value": "10.0.0.9"}]}]}, timeout=10)
            over = r.status_code == 429
            want.append(("http", ("prefix", "edge.remote_address"), envoy_key, 1, not over,
                         False, 0, ("positive", over), "default" if over else None))
        assert over
        after = now_ms()

        lines = wait_for(lambda: len(read_lines(log)) >= len(want) and read_lines(log),
                         "%d lines" % len(want))
        assert len(lines) == len(want), lines[len(want):]
        last = 0
        for line, w in zip(lines, want):
            rec = parse(line)
            face, policy, key, cost, allowed, shadow, remaining, retry, refused = w
            assert rec["face"] == face, rec
            if isinstance(policy, tuple):
                assert rec["policy"].startswith(policy[1]), rec
            else:
                assert rec["policy"] == policy, rec
            assert key_bytes(rec) == key, rec
            assert ("key_base64" in rec) == (b"\xff" in key), rec
            assert rec["cost"] == cost, rec
            assert rec["allowed"] is allowed and rec["shadow"] is shadow, rec
            assert rec["remaining"] == remaining, rec
            if isinstance(retry, tuple) and retry[0] == "cell":
                ms = rec["retry_after_ms"]
                if retry[1] == -1:
                    assert ms == 0, rec
                else:  # redis-cell's seconds from the same wait
                    assert 0 < ms <= 60000 and retry[1] in (ms // 1000, -(-ms // 1000)), rec
            elif isinstance(retry, tuple):
                assert (rec["retry_after_ms"] > 0) == retry[1], rec
            else:
                assert rec["retry_after_ms"] == retry, rec
            assert rec["refused_by"] == refused, rec
            t = datetime.datetime.strptime(rec["time"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
                tzinfo=datetime.timezone.utc)
            ms = int(t.timestamp() * 1000 + 0.5)
            assert rec["time"].endswith("Z") and len(rec["time"]) == 24, rec
            assert before - 1000 <= ms <= after + 1000, (rec, before, after)
            assert ms >= last, "one worker's lines in the order of its decisions"
            last = ms
        # The invalid key's JSON string: each byte that is not UTF-8 is U+FFFD
        bad = [parse(x) for x in lines if b"key_base64" in x][0]
        assert bad["key"] == "bad\ufffd\ufffd\ufffd\ufffdutf8"
        assert metric(s.base, "sluice_decision_log_written_total") == len(want)
        assert metric(s.base, "sluice_decision_log_dropped_total") == 0

        # And over gRPC (its own face), when the Python gRPC runtime is there
        grpc = pytest.importorskip("grpc")
        import test_grpc
        ch = grpc.insecure_channel("127.0.0.1:%d" % s.grpc_port)
        grpc.channel_ready_future(ch).result(timeout=10)
        call = test_grpc.rls(ch)
        for _ in range(2):
            call(test_grpc.request(descriptors=(("remote_address", "10.0.0.10"),)), timeout=10)
        ch.close()
        lines = wait_for(lambda: len(read_lines(log)) >= len(want) + 2 and read_lines(log),
                         "the gRPC lines")
        g = [parse(x) for x in lines[len(want):]]
        assert [x["face"] for x in g] == ["grpc", "grpc"]
        assert [x["allowed"] for x in g] == [True, False]
        assert [x["refused_by"] for x in g] == [None, "default"]
        assert key_bytes(g[0]) == b"\x1fenvoy\x1fedge\x1fremote_address\x1f10.0.0.10"
    finally:
        s.stop()


def test_decisions_a_central_store_answers_later_keep_their_keys(tmp_path):
    """With Redis as the store, a decision comes after its request's bytes have moved on:
    each line still names its own key (RESP pipelined, HTTP, a policy, ShouldRateLimit)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
    from redis_server import RedisServer
    redis = RedisServer(str(tmp_path / "redis")).start()
    log = tmp_path / "remote.jsonl"
    s = start(tmp_path, "--decision-log", log, "--store", "redis://127.0.0.1:%d" % redis.port,
              "--store-timeout-ms", "5000", threads=1, envoy=True)
    try:
        keys = [b"remote:%d:" % i + bytes([0xff, i % 32]) for i in range(300)]
        with Conn(s.host, s.port, timeout=60) as c:
            replies = pipeline(c, [("SL.TAKE", k, 10, 60) for k in keys]
                               + [("SL.POLICY", "chat", "carol", "TOKENS", 2)])
            assert all(isinstance(r, list) for r in replies), replies[:3]
        r = requests.get(s.base + "/v1/check", params={"key": "remote:http", "limit": 1,
                                                       "period": 60}, timeout=10)
        assert r.status_code == 200
        r = requests.post(s.base + "/json", json={"domain": "edge", "descriptors": [
            {"entries": [{"key": "remote_address", "value": "10.1.1.1"}]}]}, timeout=10)
        assert r.status_code == 200
        n = len(keys) + 3
        recs = [parse(x) for x in wait_for(lambda: len(read_lines(log)) >= n and read_lines(log),
                                           "%d lines" % n)]
        assert len(recs) == n
        got = [key_bytes(x) for x in recs]
        assert sorted(got[:len(keys)]) == sorted(keys)
        assert got[len(keys)] == b"chat:carol" and recs[len(keys)]["policy"] == "chat"
        assert recs[len(keys)]["cost"] == 2
        assert got[len(keys) + 1:] == [b"remote:http",
                                       b"\x1fenvoy\x1fedge\x1fremote_address\x1f10.1.1.1"]
        assert all(x["allowed"] for x in recs)
    finally:
        s.stop()
        redis.stop()


def test_a_tenth_sampled_within_a_binomial_bound(tmp_path):
    log = tmp_path / "sampled.jsonl"
    s = start(tmp_path, "--decision-log", log, "--decision-log-sample", "0.1")
    n = 40000
    try:
        with Conn(s.host, s.port, timeout=60) as c:
            for batch in range(4):
                replies = pipeline(c, [("SL.TAKE", "s:%d" % i, 1000, 60)
                                       for i in range(batch * n // 4, (batch + 1) * n // 4)])
                assert all(isinstance(r, list) for r in replies)
        dropped = metric(s.base, "sluice_decision_log_dropped_total")
    finally:
        s.stop()  # the writer writes what it holds before the process exits
    with open(log, "rb") as f:
        assert f.read().endswith(b"\n"), "every line whole at exit"
    lines = read_lines(log)
    keys = [parse(x)["key"] for x in lines]
    assert len(set(keys)) == len(keys), "each decision once"
    assert dropped == 0
    # Binomial(n, 0.1): mean 4000, standard deviation 60; six of them either side.
    mean, sd = n * 0.1, math.sqrt(n * 0.1 * 0.9)
    assert abs(len(lines) - mean) <= 6 * sd, (len(lines), mean, sd)


def test_sighup_reopens_the_file_after_a_rename(tmp_path):
    log = tmp_path / "d.log"
    s = start(tmp_path, "--decision-log", log)
    try:
        with s.conn() as c:
            for i in range(50):
                c.call("SL.TAKE", "rot:a%d" % i, 10, 60)
        wait_for(lambda: len(read_lines(log)) == 50, "the first 50 lines")
        os.rename(log, str(log) + ".1")
        os.kill(s.proc.pid, signal.SIGHUP)
        wait_for(lambda: "decision log %s reopened" % log in s.stderr(), "the reopen")
        assert os.path.exists(log), "the path is created again"
        assert stat.S_IMODE(os.stat(log).st_mode) & 0o007 == 0, "no access for others"
        with s.conn() as c:
            for i in range(30):
                c.call("SL.TAKE", "rot:b%d" % i, 10, 60)
        wait_for(lambda: len(read_lines(log)) == 30, "30 lines in the new file")
        old = [parse(x)["key"] for x in read_lines(str(log) + ".1")]
        new = [parse(x)["key"] for x in read_lines(log)]
        assert sorted(old) == sorted("rot:a%d" % i for i in range(50))
        assert sorted(new) == sorted("rot:b%d" % i for i in range(30))
        assert metric(s.base, "sluice_decision_log_written_total") == 80
        # A path that cannot be opened now (a directory took its place): logged, and the
        # writer keeps the file it has
        os.rename(log, str(log) + ".2")
        os.mkdir(log)
        os.kill(s.proc.pid, signal.SIGHUP)
        wait_for(lambda: "cannot reopen: Is a directory" in s.stderr(), "the refused reopen")
        with s.conn() as c:
            c.call("SL.TAKE", "rot:c", 10, 60)
        wait_for(lambda: len(read_lines(str(log) + ".2")) == 31, "the line in the file kept")
        s.assert_serving()
    finally:
        s.stop()


def test_standard_output(tmp_path):
    http = free_port()
    p = subprocess.Popen([BIN, "--port", str(free_port()), "--http-port", str(http),
                          "--threads", "1", "--decision-log", "-"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=str(tmp_path))
    try:
        base = "http://127.0.0.1:%d" % http
        wait_for(lambda: _up(base), "the server")
        for _ in range(3):
            requests.get(base + "/v1/check", params={"key": "out", "limit": 2, "period": 60},
                         timeout=10)
    finally:
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    recs = [parse(x) for x in out.splitlines()]
    assert [r["allowed"] for r in recs] == [True, True, False]
    assert all(r["key"] == "out" and r["face"] == "http" for r in recs)
    for mark in SANITIZER_MARKS:
        assert mark.encode() not in err, err


def _up(base):
    try:
        return requests.get(base + "/healthz", timeout=1).status_code == 200
    except requests.RequestException:
        return False


def test_a_writer_that_cannot_keep_up_drops_and_counts(tmp_path):
    """A FIFO that nobody reads: the writer's writes block, its rings fill, and every
    sampled decision past that is dropped and counted, while the server answers as ever."""
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    rd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # held open, never read (until the end)
    try:
        s = start(tmp_path, "--decision-log", fifo)
        try:
            with Conn(s.host, s.port, timeout=60) as c:
                total = 0
                for batch in range(5):
                    replies = pipeline(c, [("SL.TAKE", "f:%d:%d" % (batch, i), 1000, 60)
                                           for i in range(10000)])
                    assert len(replies) == 10000 and all(isinstance(r, list) for r in replies)
                    total += len(replies)
                    assert c.call("PING") == "PONG"
                dropped = metric(s.base, "sluice_decision_log_dropped_total")
                written = metric(s.base, "sluice_decision_log_written_total")
                assert dropped > 0
                # More decisions: more drops, and the answers come as before
                pipeline(c, [("SL.TAKE", "g:%d" % i, 1000, 60) for i in range(10000)])
                total += 10000
                assert c.call("PING") == "PONG"
                with s.conn() as c2:
                    assert as_map(c2.call("SL.TAKE", "other", 1, 60))["allowed"] == 1
                dropped2 = metric(s.base, "sluice_decision_log_dropped_total")
                assert dropped2 > dropped
                assert written <= total - dropped
        finally:
            s.stop()  # gives up on the FIFO at its deadline, and exits 0
        assert "not written at shutdown" in s.stderr()
        # What did reach the pipe is whole lines of JSON
        data = b""
        while True:
            try:
                chunk = os.read(rd, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            data += chunk
        # (the last one may be cut: the writer gave up on it at the deadline)
        lines = data.split(b"\n")[:-1]
        assert len(lines) > 100
        for line in lines:
            assert parse(line)["key"].startswith(("f:", "g:"))
    finally:
        os.close(rd)


def test_a_write_that_fails_is_counted_and_logged_and_the_writer_goes_on(tmp_path):
    """/dev/full opens, and every write to it fails with ENOSPC, as a full disk's do."""
    s = start(tmp_path, "--decision-log", "/dev/full")
    try:
        base = s.base
        with s.conn() as c:
            for i in range(20):
                c.call("SL.TAKE", "full:%d" % i, 5, 60)
                # one write per line at this pace: each fails on its own
                wait_for(lambda: metric(base, "sluice_decision_log_write_errors_total") > i,
                         "write error %d" % (i + 1))
            assert c.call("PING") == "PONG"
        assert metric(base, "sluice_decision_log_written_total") == 0
        text = requests.get(base + "/metrics", timeout=10).text
        assert 'sluice_decision_log_dropped_total{reason="error"} 20' in text, text
        assert 'sluice_decision_log_dropped_total{reason="full"} 0' in text, text
        err = s.stderr()
        assert err.count("write failed: No space left on device") == 1, err
        assert "1 line dropped (at most one such message every 10 s)" in err, err
    finally:
        s.stop()


def refused(*args):
    p = subprocess.run([BIN, "--threads", "2", "--port", str(free_port()), "--http-port", "0"]
                       + [str(a) for a in args], stdin=subprocess.DEVNULL, capture_output=True,
                       timeout=30)
    err = p.stderr.decode("utf-8", "replace")
    for mark in SANITIZER_MARKS:
        assert mark not in err, err
    return p.returncode, err


def test_a_path_that_cannot_be_written_is_refused_at_start(tmp_path):
    rc, err = refused("--decision-log", tmp_path / "no" / "such" / "dir.log")
    assert rc == 2
    assert "--decision-log: cannot open %s: No such file or directory" % (
        tmp_path / "no" / "such" / "dir.log") in err, err
    rc, err = refused("--decision-log", tmp_path)
    assert rc == 2 and "Is a directory" in err, err
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    rc, err = refused("--decision-log", fifo)
    assert rc == 2 and "a FIFO that no process has open for reading" in err, err
    for bad in ("0", "1.5", "-1", "abc", "0.0000001", "101%", ""):
        rc, err = refused("--decision-log", tmp_path / "ok.log", "--decision-log-sample", bad)
        assert rc == 2 and "invalid value '%s' for --decision-log-sample" % bad in err, err
    rc, err = refused("--decision-log", "")
    assert rc == 2 and "invalid value '' for --decision-log" in err, err
    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(ro, 0o500)
    try:
        if os.access(ro, os.W_OK):  # root ignores the mode: nothing to refuse
            return
        rc, err = refused("--decision-log", ro / "x.log")
        assert rc == 2 and "Permission denied" in err, err
    finally:
        os.chmod(ro, 0o700)


def test_the_config_files_server_section_and_the_flag_that_wins(tmp_path):
    in_file = tmp_path / "from-file.jsonl"
    from_flag = tmp_path / "from-flag.jsonl"
    conf = tmp_path / "c.yaml"
    write(conf, "server:\n  decision_log: %s\n  decision_log_sample: 100%%\n" % in_file)
    s = Sluiced(args=["--config", str(conf)], workdir=str(tmp_path)).start()
    try:
        with s.conn() as c:
            c.call("SL.TAKE", "cf:1", 5, 60)
        wait_for(lambda: len(read_lines(in_file)) == 1, "the line in the file's log")
    finally:
        s.stop()
    s = Sluiced(args=["--config", str(conf), "--decision-log", str(from_flag)],
                workdir=str(tmp_path)).start()
    try:
        with s.conn() as c:
            c.call("SL.TAKE", "cf:2", 5, 60)
        wait_for(lambda: len(read_lines(from_flag)) == 1, "the line in the flag's log")
        assert len(read_lines(in_file)) == 1
    finally:
        s.stop()
    rc, err = refused("--decision-log-sample", "2", "--decision-log", tmp_path / "x")
    assert rc == 2
