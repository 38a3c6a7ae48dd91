"""SIGHUP reloads (docs/configuration.md, "Errors and reloading"): a SIGHUP that comes while
the previous reload is being applied is run after it, on the file as it is then; a file
that is empty, or has no policies, is refused while policies are in force, unless
--allow-empty-reload."""

import os
import signal
import time

from respclient import as_map
from conftest import write


def generation(i):
    """A config whose one policy names the generation it comes from."""
    return "policies:\n  gen%d:\n    limit: %d\n    period: 1h\n" % (i, i + 1)


def policy_names(c):
    return [as_map(p)["name"].decode() for p in c.call("SL.POLICIES")]


def wait_for(pred, timeout=10, what="condition"):
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "timed out waiting for " + what
        time.sleep(0.05)


def wait_log(s, before, text):
    wait_for(lambda: text in s.stderr()[len(before):], what="%r in the log" % text)


def test_sighup_storm_ends_with_the_newest_file(make_server, tmp_path):
    cfg = tmp_path / "sluice.yaml"
    write(cfg, generation(0))
    s = make_server(args=["--config", str(cfg)])
    gen = 0
    with s.conn() as c:
        # Each round: SIGHUPs each after a new file, the last one a few
        # milliseconds after the one before, so that it comes while the reload
        # before it is still being applied (its old config is retired only
        # once every worker has moved on). The pauses only shape the storm:
        # whatever they turn out to be, the newest file must be the one in
        # force at the end of every round.
        rounds = [(0.001,), (0.002,), (0.003,), (0.005,), (0.007,), (0.002,) * 10,
                  (0,) * 30]
        for rnd, pauses in enumerate(rounds):
            for pause in pauses + (0,):
                gen += 1
                write(cfg, generation(gen))
                os.kill(s.proc.pid, signal.SIGHUP)
                time.sleep(pause)
            want = ["gen%d" % gen]
            wait_for(lambda: policy_names(c) == want,
                     what="round %d: the newest file (gen%d) in force" % (rnd, gen))
            assert as_map(c.call("SL.POLICY", "gen%d" % gen, "k"))["limit"] == gen + 1


def test_empty_file_on_reload_is_refused_and_the_policies_stay(make_server, tmp_path):
    cfg = tmp_path / "sluice.yaml"
    write(cfg, generation(1) + "  second:\n    limit: 2\n    period: 1h\n")
    s = make_server(args=["--config", str(cfg)])
    with s.conn() as c:
        assert as_map(c.call("SL.POLICY", "gen1", "u"))["remaining"] == 1
        for text, reason in (("", "is empty"), ("# being rewritten\n\n", "is empty"),
                             ("policies: {}\n", "has no policies"),
                             ("policies:\n", "has no policies")):
            write(cfg, text)
            before = s.stderr()
            os.kill(s.proc.pid, signal.SIGHUP)
            wait_log(s, before, "config refused")
            line = [l for l in s.stderr()[len(before):].splitlines() if "config refused" in l][0]
            assert "%s %s and would remove all 2 policies in force" % (cfg, reason) in line, line
            assert "--allow-empty-reload" in line, line
            assert policy_names(c) == ["gen1", "second"]
        # the old policies, and the states under them, stay: u has 1 of its 2 left
        d = as_map(c.call("SL.POLICY", "gen1", "u"))
        assert (d["allowed"], d["limit"], d["remaining"]) == (1, 2, 0), d
        # a file with policies is taken again afterwards
        write(cfg, generation(2))
        os.kill(s.proc.pid, signal.SIGHUP)
        wait_for(lambda: policy_names(c) == ["gen2"], what="the reload of gen2")


def test_allow_empty_reload_lets_an_empty_file_remove_every_policy(make_server, tmp_path):
    cfg = tmp_path / "sluice.yaml"
    write(cfg, generation(1))
    s = make_server(args=["--config", str(cfg), "--allow-empty-reload"])
    with s.conn() as c:
        assert policy_names(c) == ["gen1"]
        write(cfg, "")
        before = s.stderr()
        os.kill(s.proc.pid, signal.SIGHUP)
        wait_log(s, before, "reloaded %s: 0 policies" % cfg)
        assert policy_names(c) == []
        assert "refused" not in s.stderr()[len(before):]


def test_empty_file_at_start_is_fine_and_reloads_normally(make_server, tmp_path):
    cfg = tmp_path / "sluice.yaml"
    write(cfg, "")
    s = make_server(args=["--config", str(cfg)])
    assert "0 policies" in s.stderr()
    with s.conn() as c:
        assert policy_names(c) == []
        # no policies in force: an empty file removes none, and is taken
        before = s.stderr()
        os.kill(s.proc.pid, signal.SIGHUP)
        wait_log(s, before, "reloaded %s: 0 policies" % cfg)
        write(cfg, generation(3))
        os.kill(s.proc.pid, signal.SIGHUP)
        wait_for(lambda: policy_names(c) == ["gen3"], what="the reload of gen3")


def test_ready_after_a_pending_reload_means_the_newest_file_is_in_force(make_server,
                                                                         monkeypatch, tmp_path):
    """Under a service manager: a SIGHUP sent right after another one's RELOADING=1 comes
    while that reload is being applied. The READY=1 that follows it must mean that the file
    it asked for is in force: a manager (systemctl reload) takes it as the reload being
    over."""
    from test_notify import NotifySocket, launch
    n = NotifySocket()
    try:
        cfg = tmp_path / "sluice.yaml"
        write(cfg, generation(0))
        s = launch(make_server, monkeypatch, n.env, ["--config", str(cfg)])
        assert n.recv()[0] == {"READY": "1"}
        assert s.wait_ready()
        gen = 0
        with s.conn() as c:
            for _ in range(5):
                write(cfg, generation(gen + 1))
                os.kill(s.proc.pid, signal.SIGHUP)
                assert n.recv()[0].get("RELOADING") == "1"
                write(cfg, generation(gen + 2))
                os.kill(s.proc.pid, signal.SIGHUP)
                gen += 2
                # Until the READY=1 that follows the second RELOADING=1: a reload
                # that ran at once has its own READY=1 before it, and one still
                # being applied when this round began ends with both SIGHUPs'.
                reloading = 1
                while True:
                    fields = n.recv()[0]
                    if fields.get("RELOADING") == "1":
                        reloading += 1
                    elif fields == {"READY": "1"} and reloading == 2:
                        break
                    else:
                        assert fields == {"READY": "1"}, fields
                assert policy_names(c) == ["gen%d" % gen], "READY=1 before the reload ran"
        assert s.stop() == 0
        assert n.recv()[0] == {"STOPPING": "1"}
    finally:
        n.close()
