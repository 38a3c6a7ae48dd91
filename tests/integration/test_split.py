"""The fixed split (--split N): each of N sluiced, with no coordination, enforces its share
of every limit, so that the N together admit no more than one would. Real sluiced
processes on the in-memory store, real clients (redis-py, HTTP), 127.0.0.1 only."""

import http.client
import os
import subprocess

import pytest

from conftest import Sluiced, free_port

ALGORITHMS = ["gcra", "token_bucket", "leaky_bucket", "fixed_window", "sliding_log",
              "sliding_window"]

POLICIES = """
policies:
  api:
    limit: 30
    period: 1h
    global: {limit: 12, period: 1h}
"""


def as_map(reply):
    return {reply[i].decode() if isinstance(reply[i], bytes) else reply[i]: reply[i + 1]
            for i in range(0, len(reply), 2)}


def start(tmp_path, name, extra):
    port = free_port()
    s = Sluiced(args=["--http-port", str(port)] + list(extra), workdir=str(tmp_path / name))
    os.makedirs(s.workdir, exist_ok=True)
    s.start()
    s.http_port = port
    return s


@pytest.fixture
def split3(tmp_path):
    conf = tmp_path / "sluice.yaml"
    conf.write_text(POLICIES)
    nodes = [start(tmp_path, "n%d" % i, ["--split", "3", "--config", str(conf)])
             for i in range(3)]
    yield nodes
    for n in nodes:
        n.stop()


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_burst_over_three_nodes_admits_the_limit(split3, algorithm):
    """30 an hour over 3 nodes: 10 each, 30 in all, whichever node a request reaches."""
    clients = [n.redis() for n in split3]
    got = [as_map(clients[i % 3].execute_command("SL.TAKE", "b:" + algorithm, 30, "1h",
                                                 "ALGORITHM", algorithm))
           for i in range(60)]
    assert sum(g["allowed"] for g in got) == 30
    assert all(g["limit"] == 10 for g in got), got[0]
    # Each node refuses once its own share is spent, and not before.
    for k in range(3):
        assert [g["allowed"] for g in got[k::3]] == [1] * 10 + [0] * 10
    for c in clients:
        c.close()


def test_a_rate_that_does_not_divide_is_shared_exactly(split3):
    """10 an hour (burst 10) over 3 nodes: each node 10 per 3 hours, a burst of 3, so 9
    at once and the fleet's rate is the limit's exactly (no node refills faster)."""
    clients = [n.redis() for n in split3]
    got = [as_map(clients[i % 3].execute_command("SL.TAKE", "odd", 10, "1h"))
           for i in range(15)]
    assert sum(g["allowed"] for g in got) == 9
    refused = next(g for g in got if not g["allowed"])
    # The next unit on a node comes after 3 hours / 10 = 18 minutes.
    assert 1070_000 <= refused["retry_after_ms"] <= 1080_000, refused


def test_cl_throttle_reports_the_share(split3):
    """CL.THROTTLE key 14 30 60: a burst of 15 is 5 a node, 30 a minute is 10 a node."""
    clients = [n.redis() for n in split3]
    replies = [clients[i % 3].execute_command("CL.THROTTLE", "cell", 14, 30, 60)
               for i in range(21)]
    assert sum(1 for r in replies if r[0] == 0) == 15
    assert replies[0][:3] == [0, 5, 4]
    assert replies[18][0] == 1 and replies[18][3] == 6  # 60 s / 10: the next in 6 s
    for c in clients:
        c.close()


def test_policies_and_their_global_limit_are_shared(split3):
    """The policy's 30 an hour is 10 a node, its global 12 is 4 a node."""
    clients = [n.redis() for n in split3]
    got = [as_map(clients[0].execute_command("SL.POLICY", "api", "k%d" % i))["allowed"]
           for i in range(6)]
    assert got == [1] * 4 + [0] * 2, "node 0's share of the global limit is 4"
    got = [as_map(c.execute_command("SL.POLICY", "api", "other"))["allowed"]
           for c in clients[1:] for _ in range(5)]
    assert sum(got) == 8
    for c in clients:
        c.close()


def test_http_headers_say_the_share(split3):
    c = http.client.HTTPConnection("127.0.0.1", split3[1].http_port, timeout=10)
    c.request("GET", "/v1/check?key=h&limit=30&period=60")
    r = c.getresponse()
    r.read()
    assert r.status == 200
    assert r.getheader("X-RateLimit-Limit") == "10"
    assert r.getheader("X-RateLimit-Remaining") == "9"
    c.close()


@pytest.mark.parametrize("flag,nodes,limit", [("--split", "1", 30), ("--fleet-nodes", "3", 10),
                                              ("--split", "7", 4)])
def test_the_share_one_node_enforces(tmp_path, flag, nodes, limit):
    """--split 1 (the default) is the whole limit; --fleet-nodes is --split's old name."""
    n = start(tmp_path, "one", [flag, nodes])
    c = n.redis()
    assert as_map(c.execute_command("SL.TAKE", "w", 30, "1h", "ALGORITHM",
                                    "fixed_window"))["limit"] == limit
    c.close()
    n.stop()


@pytest.mark.parametrize("value", ["0", "-1", "10001", "x", ""])
def test_bad_split_is_refused(value):
    s = Sluiced()
    r = subprocess.run([s.binary, "--port", "0", "--http-port", str(free_port()),
                        "--split", value], capture_output=True, timeout=30)
    assert r.returncode == 2
    err = r.stderr.decode()
    assert "--split" in err and "an integer from 1 to 10000" in err, err
