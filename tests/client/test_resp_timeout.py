"""The async RESP client's reply timeout (sl_rc_async_set_timeout) against a real sluiced.

A sluiced stopped with SIGSTOP after the connection is made accepts bytes and answers
nothing, as a server cut off by a network that drops packets would. The driver prints,
with each async answer, the loop's clock (uv_now, ms) when its call was queued and when
its callback came; the only bound asserted on those is the guarantee itself: the timeout
error never comes before the oldest call has waited the limit on that clock. "a timers"
counts the timers active on the driver's loop (its own left out), which shows that an
idle context holds none.
"""

import time

from conftest import Stopped, Tap

SL_RC_ERR_IO, SL_RC_ERR_ARGS, SL_RC_ERR_CLOSED = 1, 4, 6


def no_reply(port, cmd, ms, connected=True):
    return "127.0.0.1:%d: no reply to %s within %d ms%s" % (
        port, cmd, ms, "" if connected else " (the connection not yet made)")


def test_a_silent_server_times_out(make_sluiced, make_driver):
    """Every pending call gets the timeout error, not before the oldest has waited the
    limit; later calls fail at once; once resumed, the server serves a new context."""
    srv = make_sluiced()
    drv = make_driver(srv.port)
    assert drv.call("a connect")["err"] == 0
    assert drv.call("a timeout 300")["err"] == 0
    assert drv.call("a take warm 5 60000 0 1 gcra")["d"]["allowed"] is True
    assert drv.call("a timers") == {"timers": 0, "polls": 1}
    n = 20
    with Stopped(srv):
        drv.send("a pipeline %d take held 100 60000 0 1 gcra" % n, "a throttle held2 5 5 60 1",
                 "a timers")
        assert drv.answer() == {"queued": n}
        assert drv.answer() == {"timers": 1, "polls": 1}  # one timer for all 21 calls
        got = [drv.answer() for _ in range(n + 1)]
        ids = [a["id"] for a in got]
        assert ids == list(range(ids[0], ids[0] + n + 1))  # each once, in order
        for a in got:
            assert a["err"] == SL_RC_ERR_IO, a
            assert a["errstr"] == no_reply(srv.port, "SL.TAKE", 300), a
            # The oldest call had waited the limit on the loop's clock, at least.
            assert a["answered_ms"] - got[0]["queued_ms"] >= 300, (got[0], a)
        assert got[-1]["op"] == "throttle"
        # The context is over: a call fails at once, with the same error.
        a = drv.call("a take k 1 1000 0 1 gcra")
        assert a["queued"] is False and a["err"] == SL_RC_ERR_IO, a
        assert a["errstr"] == no_reply(srv.port, "SL.TAKE", 300), a
        assert drv.call("a timeout 300")["err"] == SL_RC_ERR_IO
        assert drv.call("a timers") == {"timers": 0, "polls": 0}
    # Resumed: a new context (with the same limit) is served.
    assert drv.call("a connect")["err"] == 0
    assert drv.call("a timeout 300")["err"] == 0
    a = drv.call("a take after 1 60000 0 1 gcra")
    assert a["err"] == 0 and a["d"]["allowed"] is True, a
    assert drv.close() == []


def test_a_healthy_server_with_a_timeout(make_sluiced, make_driver):
    """Calls answered in time never meet the limit, however long the context lives, and
    the timer is stopped whenever nothing is pending."""
    srv = make_sluiced()
    drv = make_driver(srv.port)
    assert drv.call("a connect")["err"] == 0
    assert drv.call("a take warm 5 60000 0 1 gcra")["err"] == 0
    assert drv.call("a timers") == {"timers": 0, "polls": 1}  # connected, no limit set
    assert drv.call("a timeout 200")["err"] == 0
    # One call at a time, over several times the limit: each deadline is its own call's.
    for i in range(8):
        a = drv.call("a take one 100 60000 0 1 gcra")
        assert a["err"] == 0 and a["d"]["remaining"] == 99 - i, a
        assert drv.call("a timers") == {"timers": 0, "polls": 1}
        drv.send("sleep 60")
    # A long pipeline, and a limit it has room for.
    assert drv.call("a timeout 60000")["err"] == 0
    n = 2000
    assert drv.call("a pipeline %d take many 1500 3600000 0 1 gcra" % n) == {"queued": n}
    got = [drv.answer() for _ in range(n)]
    assert [a["err"] for a in got] == [0] * n
    assert [a["d"]["allowed"] for a in got] == [True] * 1500 + [False] * 500
    assert drv.call("a timers") == {"timers": 0, "polls": 1}
    # Ending stdin frees the context; the driver's loop then has nothing left and
    # returns (the driver checks uv_loop_close, and exits 0).
    assert drv.close() == []


def test_the_deadline_moves_to_the_next_call(make_sluiced, make_driver):
    """The timer armed for call A fires after A was answered, with B pending: it is armed
    again for B's own deadline, and B, answered in time, is not failed.

    A's answer is held back by a relay (while sluiced is stopped, so that B's is not
    given) until B is queued; sluiced resumes after A's deadline and before B's."""
    limit = 3000
    srv = make_sluiced()
    tap = Tap(srv.port)
    drv = make_driver(tap.port)
    assert drv.call("a connect")["err"] == 0
    assert drv.call("a timeout %d" % limit)["err"] == 0
    assert drv.call("a take warm 5 60000 0 1 gcra")["err"] == 0
    before = tap.answered_len(0)
    tap.hold()
    t0 = time.monotonic()
    drv.send("a take A 5 60000 0 1 gcra")
    while tap.answered_len(0) == before:  # sluiced has answered A, into the relay
        assert time.monotonic() - t0 < 10, "sluiced did not answer A"
        time.sleep(0.005)
    with Stopped(srv):
        time.sleep(max(0.0, t0 + limit * 2 / 3000 - time.monotonic()))
        drv.send("a take B 5 60000 0 1 gcra", "a timers")
        assert drv.answer() == {"timers": 1, "polls": 1}  # B is queued
        tap.release()
        a = drv.answer()
        assert a["op"] == "take" and a["err"] == 0, a
        time.sleep(max(0.0, t0 + limit * 4 / 3000 - time.monotonic()))
    b = drv.answer()
    assert b["err"] == 0 and b["d"]["allowed"] is True, b
    # B was pending past A's deadline (the timer's first), and was answered all the same.
    assert b["answered_ms"] - a["queued_ms"] >= limit, (a, b)
    assert b["queued_ms"] > a["queued_ms"], (a, b)
    assert drv.close() == []
    tap.close()


def test_the_limit_can_change_while_calls_are_pending(make_sluiced, make_driver):
    srv = make_sluiced()
    drv = make_driver(srv.port)
    assert drv.call("a connect")["err"] == 0
    assert drv.call("a take warm 5 60000 0 1 gcra")["err"] == 0
    with Stopped(srv):
        # No limit: calls pending, and no timer on the loop.
        assert drv.call("a pipeline 5 take p 100 60000 0 1 gcra") == {"queued": 5}
        assert drv.call("a timers") == {"timers": 0, "polls": 1}
        # The largest limit: armed, far away (no overflow).
        assert drv.call("a timeout 2147483647")["err"] == 0
        assert drv.call("a timers") == {"timers": 1, "polls": 1}
        # A negative one is refused, and changes nothing.
        a = drv.call("a timeout -1")
        assert a["err"] == SL_RC_ERR_ARGS, a
        assert a["errstr"] == "the reply timeout must be 0 (none) or more ms, not -1", a
        assert drv.call("a timers") == {"timers": 1, "polls": 1}
        # Off again: the timer is stopped.
        assert drv.call("a timeout 0")["err"] == 0
        assert drv.call("a timers") == {"timers": 0, "polls": 1}
        # A short one applies at once to the calls already pending.
        drv.send("a timeout 100")
        assert drv.answer()["err"] == 0
        got = [drv.answer() for _ in range(5)]
        for a in got:
            assert a["err"] == SL_RC_ERR_IO and a["errstr"] == no_reply(srv.port, "SL.TAKE",
                                                                         100), a
        assert got[-1]["answered_ms"] - got[0]["queued_ms"] >= 100, got
    assert drv.close() == []


def test_a_silent_auth(make_sluiced, make_driver):
    """The AUTH queued first has the same limit: a server silent from the start."""
    srv = make_sluiced(password="pw")
    drv = make_driver(srv.port)
    with Stopped(srv):
        assert drv.call("a connect pw")["err"] == 0
        assert drv.call("a timeout 200")["err"] == 0
        a = drv.call("a take k 1 1000 0 1 gcra")
        assert a["err"] == SL_RC_ERR_IO, a
        # The kernel completes the connection of a stopped process (it sits in the
        # listen queue): the oldest call, AUTH, is the one that went unanswered.
        assert a["errstr"] in (no_reply(srv.port, "AUTH", 200),
                               no_reply(srv.port, "AUTH", 200, connected=False)), a
    # Resumed, sluiced may still read and carry out the commands of the connection
    # given up (the take on k among them): a new key shows the new context served.
    assert drv.call("a connect pw")["err"] == 0
    assert drv.call("a timeout 200")["err"] == 0
    assert drv.call("a take k2 1 1000 0 1 gcra")["d"]["allowed"] is True
    assert drv.close() == []


def test_freed_from_a_callback_with_the_timer_armed(make_sluiced, make_driver):
    """A callback frees the context while the timer is armed for the calls behind it:
    those are answered SL_RC_ERR_CLOSED, and ASan sees no leak and no use after free
    (the driver exits 0 with no report)."""
    srv = make_sluiced()
    drv = make_driver(srv.port)
    assert drv.call("a connect")["err"] == 0
    assert drv.call("a timeout 60000")["err"] == 0
    drv.send("a freeincb", "a pipeline 30 take f 100 60000 0 1 gcra")
    assert drv.answer() == {"queued": 30}
    first = drv.answer()
    assert first["err"] == 0 and first["d"]["allowed"] is True, first
    assert drv.answer() == {"freed": True}
    rest = [drv.answer() for _ in range(29)]
    assert [a["err"] for a in rest] == [SL_RC_ERR_CLOSED] * 29
    assert [a["id"] for a in rest] == list(range(first["id"] + 1, first["id"] + 30))

    # The same from the timeout's own callback: the first call answered with the
    # timeout frees the context, the others are answered SL_RC_ERR_CLOSED.
    assert drv.call("a connect")["err"] == 0
    assert drv.call("a timeout 150")["err"] == 0
    assert drv.call("a take warm 5 60000 0 1 gcra")["err"] == 0
    with Stopped(srv):
        drv.send("a freeincb", "a pipeline 10 take g 100 60000 0 1 gcra")
        assert drv.answer() == {"queued": 10}
        first = drv.answer()
        assert first["err"] == SL_RC_ERR_IO, first
        assert first["errstr"] == no_reply(srv.port, "SL.TAKE", 150), first
        assert drv.answer() == {"freed": True}
        rest = [drv.answer() for _ in range(9)]
        assert [a["err"] for a in rest] == [SL_RC_ERR_CLOSED] * 9
    assert drv.close() == []
