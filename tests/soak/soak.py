#!/usr/bin/python3
"""make soak: steady mixed load on sluiced's RESP and HTTP faces for --seconds, with faults
on a schedule (reloads that change a policy's algorithm, snapshots on demand, client churn,
slow clients, transactions, a flood of short-lived keys against the memory cap), then a check
that no key was ever admitted more than its algorithm allows over the run, that sluiced still
answers, and that it stops cleanly (SIGTERM: exit 0, snapshot written).

Each checked key starts fresh and is hammered far beyond its limit, so a fresh budget handed
out anywhere (a reload that dropped a state, a conversion that forgot units, a lost update
between threads) shows up as a count above the bound. The bounds are over the whole run of D
seconds for a limit of L per period P: a bucket (gcra, token_bucket, leaky_bucket) admits its
burst L plus its rate, L * D / P; a window (fixed_window, sliding_window) at most L in each
aligned window it touches, L * (D / P + 2); the sliding log at most L in any span of P,
L * (D / P + 1); the policy, whose algorithm the reloads switch between gcra, fixed_window and
sliding_window (units carried over), at most the largest of those plus one period's L.

Usage: tests/soak/soak.py [--seconds N] [--sluiced PATH]   (default 60, build/bin/sluiced)
Talks to 127.0.0.1 only, on free ports; every loop is bounded by the deadline.
"""

import argparse
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import redis
import requests

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LIMIT, PERIOD = 40, 10
ALGOS = ["gcra", "token_bucket", "leaky_bucket", "fixed_window", "sliding_window", "sliding_log"]
KEYS_PER_ALGO = 3
POLICY_ALGOS = ["gcra", "fixed_window", "sliding_window"]
POLICY_USERS = 4


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def config(algo):
    return ("policies:\n  soak:\n    algorithm: %s\n    limit: %d\n    period: %ds\n"
            % (algo, LIMIT, PERIOD))


def bound(algo, seconds):
    periods = seconds / PERIOD
    if algo in ("gcra", "token_bucket", "leaky_bucket"):
        return LIMIT + LIMIT * periods
    if algo == "sliding_log":
        return LIMIT * (periods + 1)
    if algo == "policy":
        return LIMIT * (periods + 3)
    return LIMIT * (periods + 2)


class Counts:
    def __init__(self):
        self.lock = threading.Lock()
        self.admitted = {}
        self.decisions = 0
        self.errors = []

    def add(self, key, allowed):
        with self.lock:
            self.decisions += 1
            if allowed:
                self.admitted[key] = self.admitted.get(key, 0) + 1

    def error(self, what):
        with self.lock:
            if len(self.errors) < 20:
                self.errors.append(what)


def checked_keys(run):
    return [("%s:%s:%d" % (run, a, i), a) for a in ALGOS for i in range(KEYS_PER_ALGO)]


def resp_client(port, pw, run, deadline, counts, seed):
    rng = random.Random(seed)
    r = redis.Redis(host="127.0.0.1", port=port, password=pw, socket_timeout=10)
    keys = checked_keys(run)
    while time.monotonic() < deadline:
        p = r.pipeline(transaction=rng.random() < 0.2)  # some as MULTI ... EXEC
        batch = []
        for _ in range(rng.randint(1, 16)):
            if rng.random() < 0.25:
                user = "%d" % rng.randrange(POLICY_USERS)
                p.execute_command("SL.POLICY", "soak", user)
                batch.append(("policy:" + user, "policy"))
            else:
                key, algo = rng.choice(keys)
                p.execute_command("SL.TAKE", key, LIMIT, PERIOD, "ALGORITHM", algo)
                batch.append((key, algo))
        try:
            replies = p.execute()
        except (redis.ConnectionError, redis.TimeoutError) as e:
            counts.error("RESP: %r" % e)
            time.sleep(0.05)
            continue
        for (key, _), rep in zip(batch, replies):
            counts.add(key, rep[1] == 1)
    r.close()


def http_client(port, pw, run, deadline, counts, seed):
    rng = random.Random(seed)
    s = requests.Session()
    s.headers["Authorization"] = "Bearer " + pw
    keys = checked_keys(run)
    url = "http://127.0.0.1:%d/v1/check" % port
    while time.monotonic() < deadline:
        key, algo = rng.choice(keys)
        try:
            r = s.get(url, params={"key": key, "limit": LIMIT, "period": PERIOD,
                                   "algorithm": algo}, timeout=10)
        except requests.RequestException as e:
            counts.error("HTTP: %r" % e)
            time.sleep(0.05)
            continue
        if r.status_code not in (200, 429):
            counts.error("HTTP %d: %s" % (r.status_code, r.text[:200]))
            continue
        counts.add(key, r.status_code == 200)


def flood(port, pw, deadline, seed):
    """Short-lived keys, many: memory pressure, reclaim and eviction at the cap beside the
    checked keys, whose states outlive a flood key's 2 s (eviction takes the state that
    expires soonest of a sample, so it takes flood keys)."""
    rng = random.Random(seed)
    r = redis.Redis(host="127.0.0.1", port=port, password=pw, socket_timeout=10)
    n = 0
    while time.monotonic() < deadline:
        p = r.pipeline(transaction=False)
        for _ in range(200):
            p.execute_command("SL.TAKE", "flood:%d:%d" % (seed, n), 1, "2s")
            n += 1
        try:
            p.execute()
        except (redis.ConnectionError, redis.TimeoutError):
            time.sleep(0.05)
        time.sleep(rng.random() * 0.01)
    r.close()


def faults(proc, port, pw, cfg_path, deadline, log, seed):
    rng = random.Random(seed)
    r = redis.Redis(host="127.0.0.1", port=port, password=pw, socket_timeout=10)
    algo_i = 0
    while time.monotonic() < deadline:
        time.sleep(0.5 + rng.random())
        what = rng.choice(["reload", "save", "churn", "slow", "reload"])
        try:
            if what == "reload":
                algo_i = (algo_i + 1) % len(POLICY_ALGOS)
                tmp = cfg_path + ".tmp"
                with open(tmp, "w") as f:
                    f.write(config(POLICY_ALGOS[algo_i]))
                os.replace(tmp, cfg_path)
                os.kill(proc.pid, signal.SIGHUP)
            elif what == "save":
                r.execute_command("SAVE")
            elif what == "churn":
                socks = [socket.create_connection(("127.0.0.1", port), timeout=5)
                         for _ in range(30)]
                for s in socks:
                    s.close()
            else:  # a slow client: half a command, a byte at a time, then gone
                s = socket.create_connection(("127.0.0.1", port), timeout=5)
                for b in b"*3\r\n$4\r\nAUTH":
                    s.send(bytes([b]))
                    time.sleep(0.02)
                s.close()
            log.append(what)
        except (OSError, redis.RedisError) as e:
            log.append("%s failed: %r" % (what, e))
    r.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=int(os.environ.get("SOAK_SECONDS", 60)))
    ap.add_argument("--sluiced", default=os.environ.get("SLUICED",
                                                        os.path.join(ROOT, "build/bin/sluiced")))
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="sluice-soak-")
    cfg = os.path.join(work, "sluice.yaml")
    with open(cfg, "w") as f:
        f.write(config(POLICY_ALGOS[0]))
    port, http, pw = free_port(), free_port(), "soak-secret"
    snap = os.path.join(work, "state.snap")
    err = open(os.path.join(work, "sluiced.log"), "w")
    proc = subprocess.Popen([a.sluiced, "--port", str(port), "--http-port", str(http),
                             "--requirepass", pw, "--threads", "2", "--config", cfg,
                             "--snapshot", snap, "--snapshot-interval", "5",
                             "--max-memory", "512k"], stderr=err)
    r = redis.Redis(host="127.0.0.1", port=port, password=pw, socket_timeout=5)
    for _ in range(200):
        try:
            if r.ping():
                break
        except redis.RedisError:
            time.sleep(0.05)
    run = "soak%d" % os.getpid()
    start = time.monotonic()
    deadline = start + a.seconds
    counts, log = Counts(), []
    threads = [threading.Thread(target=resp_client, args=(port, pw, run, deadline, counts, i))
               for i in range(3)]
    threads += [threading.Thread(target=http_client, args=(http, pw, run, deadline, counts, 10 + i))
                for i in range(2)]
    threads += [threading.Thread(target=flood, args=(port, pw, deadline, 20 + i))
                for i in range(2)]
    threads.append(threading.Thread(target=faults, args=(proc, port, pw, cfg, deadline, log, 30)))
    for t in threads:
        t.start()
    for t in threads:
        t.join(a.seconds + 60)
    elapsed = time.monotonic() - start

    failures = []
    info = r.info()
    print("soak: %.0f s, %d decisions, %d faults (%s), keys %s, evicted %s" % (
        elapsed, counts.decisions, len(log),
        ", ".join("%s %d" % (w, log.count(w)) for w in sorted(set(log))),
        info.get("keys"), info.get("evicted_keys")))
    for key, algo in checked_keys(run) + [("policy:%d" % u, "policy")
                                          for u in range(POLICY_USERS)]:
        got, most = counts.admitted.get(key, 0), bound(algo, elapsed)
        line = "  %-40s %-14s admitted %4d, at most %6.1f" % (key, algo, got, most)
        print(line + ("" if got <= most else "   OVER"))
        if got > most:
            failures.append(line.strip())
    if counts.errors:
        failures.append("client errors: %s" % counts.errors[:5])
    if any("failed" in w for w in log):
        failures.append("faults that failed: %s" % [w for w in log if "failed" in w][:5])
    r.close()
    proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = "killed"
    err.close()
    if rc != 0:
        failures.append("sluiced exited %s" % rc)
    if not os.path.exists(snap):
        failures.append("no snapshot at shutdown")
    with open(os.path.join(work, "sluiced.log")) as f:
        text = f.read()
    for mark in ("AddressSanitizer", "runtime error:", "ThreadSanitizer"):
        if mark in text:
            failures.append("sanitizer report in the log (%s)" % mark)
    if failures:
        print("soak: FAILED (log: %s)" % os.path.join(work, "sluiced.log"))
        for f in failures:
            print("  " + f)
        return 1
    print("soak: OK: every key within its bound, sluiced answered to the end and stopped cleanly")
    return 0


if __name__ == "__main__":
    sys.exit(main())
