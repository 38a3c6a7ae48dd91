"""Plans looked up by key (issue 20, item 3): a policy's `plans:` file of a million
`key: tier` lines gives each key its tier on every face, a request cannot choose its own,
and SIGHUP reloads the file, keeping what each key has used."""

import os
import signal
import time

import pytest
import requests

from conftest import Sluiced, free_port, write
from respclient import Error, as_map

KEYS = 1_000_000

CONFIG = """\
policies:
  api:
    limit: 2
    period: 1h
    plans: plans.txt
    tiers:
      free: {limit: 5, period: 1h}
      paid: {limit: 500, period: 1h}
"""


def plan_of(i):
    return "paid" if i % 3 == 0 else "free"


def write_plans(path, moved=()):
    """A million keys (k0000000 ...), every third one paid; `moved` are paid instead."""
    moved = set(moved)
    lines = ["# the api policy's plans\n"]
    lines += ["k%07d: %s\n" % (i, "paid" if i in moved else plan_of(i)) for i in range(KEYS)]
    tmp = str(path) + ".tmp"
    with open(tmp, "w") as f:
        f.writelines(lines)
    os.replace(tmp, str(path))


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def policy(c, *args):
    return {k.decode() if isinstance(k, bytes) else k: v
            for k, v in as_map(c.call("SL.POLICY", *args)).items()}


def wait_for(pred, what, timeout=30):
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "timed out waiting for " + what
        time.sleep(0.05)


@pytest.fixture(scope="module")
def plans_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("plans")
    write_plans(d / "plans.txt")
    return d


@pytest.fixture
def server(make_server, plans_dir, tmp_path):
    cfg = tmp_path / "sluice.yaml"
    write(cfg, CONFIG)
    os.symlink(str(plans_dir / "plans.txt"), str(tmp_path / "plans.txt"))
    http = free_port()
    plain = Sluiced(workdir=str(tmp_path / "plain"))  # its own log
    os.makedirs(plain.workdir)
    plain.start()
    t0 = time.monotonic()
    s = make_server(args=["--config", str(cfg), "--http-port", str(http)])
    took = time.monotonic() - t0
    grown = rss_kib(s.proc.pid) - rss_kib(plain.proc.pid)
    print("\nsluiced started with a plans file of %d keys in %.2f s; it holds %.1f MiB more "
          "than one without (%.0f bytes a key)" % (KEYS, took, grown / 1024, grown * 1024 / KEYS))
    plain.stop()
    s.config = cfg
    s.dir = tmp_path
    s.url = "http://127.0.0.1:%d" % http
    return s


def test_each_key_gets_the_tier_its_plan_names(server):
    with server.conn() as c:
        for i in (0, 1, 2, 3, 999_999):
            d = policy(c, "api", "k%07d" % i)
            assert d["limit"] == (500 if plan_of(i) == "paid" else 5), (i, d)
        assert policy(c, "api", "stranger")["limit"] == 2, "a key the file does not name"
        c.send_command("SL.POLICY", "api", "k0000001", "TIER", "paid")
        e = c.read_reply()
        assert isinstance(e, Error) and e.message == (
            "ERR policy 'api' takes each key's tier from its plans file: a request cannot "
            "name one"), e
    # forward-auth: the plan is the file's, whatever the request says
    r = requests.get(server.url + "/v1/auth/api", headers={"X-Api-Key": "k0000003"})
    assert r.status_code == 200 and r.headers["X-RateLimit-Limit"] == "500", r.headers
    r = requests.get(server.url + "/v1/auth/api?tier=paid", headers={"X-Api-Key": "k0000004"})
    assert r.status_code == 400 and r.json()["field"] == "tier", r.text
    r = requests.get(server.url + "/v1/check", params={"policy": "api", "key": "k0000004"})
    assert r.json()["limit"] == 5, r.text


def test_sighup_reloads_the_file_and_keys_keep_what_they_used(server):
    with server.conn() as c:
        for _ in range(5):
            assert policy(c, "api", "k0000002")["allowed"] == 1
        assert policy(c, "api", "k0000002")["allowed"] == 0, "free: 5 an hour"
        plans = server.dir / "plans.txt"
        os.unlink(str(plans))
        write_plans(plans, moved=[2])
        before = len(server.stderr())
        os.kill(server.proc.pid, signal.SIGHUP)
        wait_for(lambda: "plans %s: %d keys" % (plans, KEYS) in server.stderr()[before:],
                 "the reload of the plans file")
        d = policy(c, "api", "k0000002")
        assert (d["allowed"], d["limit"], d["remaining"]) == (1, 500, 494), \
            "upgraded: the 5 used before still count, %r" % (d,)
        # a bad file is refused, naming its line, and the old plans stay
        with open(str(plans), "a") as f:
            f.write("k0000002: platinum\n")
        before = len(server.stderr())
        os.kill(server.proc.pid, signal.SIGHUP)
        wait_for(lambda: "platinum" in server.stderr()[before:], "the refusal")
        log = server.stderr()[before:]
        assert "plans.txt:%d:" % (KEYS + 2) in log, log
        assert policy(c, "api", "k0000002")["limit"] == 500
