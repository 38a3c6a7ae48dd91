"""sluice over the Redis protocol, through redis-py (imported by the caller: these take
a redis.Redis, and this module imports nothing of redis).

    r = redis.Redis(port=7379)
    d = throttle(r, "user:42", burst=15, rate=30, period=60)   # CL.THROTTLE
    if not d.allowed: time.sleep(d.retry_after)

Decisions come back as Decision objects, in seconds (CL.THROTTLE's unit) or, for SL.*,
as the server's fields (milliseconds).
"""

from dataclasses import dataclass
from typing import Optional

from .headers import parse_throttle


class ReplyError(ValueError):
    """The server answered something that is not the command's reply."""


@dataclass(frozen=True)
class Decision:
    """CL.THROTTLE's answer: `retry_after` and `reset` in seconds (retry_after None when
    allowed, or when no wait will do: the quantity exceeds the burst)."""
    allowed: bool
    limit: int
    remaining: int
    retry_after: Optional[float]
    reset: float


def throttle(r, key, burst, rate, period, quantity=1):
    """CL.THROTTLE key burst rate period quantity: redis-cell's command (a limit of
    burst + 1, `rate` per `period` seconds). Returns a Decision; raises ReplyError on a
    reply that is not five integers (a server error is redis-py's ResponseError)."""
    reply = r.execute_command("CL.THROTTLE", key, int(burst), int(rate), int(period), int(quantity))
    t = parse_throttle(list(reply) if isinstance(reply, (list, tuple)) else reply)
    if t is None:
        raise ReplyError("not a CL.THROTTLE reply: %r" % (reply,))
    return Decision(t.allowed, t.limit, t.remaining,
                    None if t.retry_after_ms is None else t.retry_after_ms / 1000.0,
                    t.reset_ms / 1000.0)


def _fields(reply):
    """A decision's reply as a dict: a RESP3 map, or RESP2's flat name/value array."""
    if isinstance(reply, dict):
        items = reply.items()
    elif isinstance(reply, (list, tuple)) and len(reply) % 2 == 0:
        items = zip(reply[0::2], reply[1::2])
    else:
        raise ReplyError("not a decision: %r" % (reply,))
    out = {}
    for k, v in items:
        out[k.decode() if isinstance(k, bytes) else str(k)] = v
    if "allowed" not in out:
        raise ReplyError("a decision without 'allowed': %r" % (reply,))
    out["allowed"] = bool(out["allowed"])
    return out


def _options(burst=None, cost=None, algorithm=None):
    args = []
    if burst is not None:
        args += ["BURST", int(burst)]
    if cost is not None:
        args += ["COST", int(cost)]
    if algorithm is not None:
        args += ["ALGORITHM", algorithm]
    return args


def take(r, key, limit, period, burst=None, cost=None, algorithm=None):
    """SL.TAKE: takes from an ad-hoc limit; a dict of the decision's fields (`allowed` a
    bool, durations in milliseconds). `period`: seconds or a duration ("500ms", "1m")."""
    return _fields(r.execute_command("SL.TAKE", key, int(limit), period,
                                     *_options(burst, cost, algorithm)))


def peek(r, key, limit, period, burst=None, cost=None, algorithm=None):
    """SL.PEEK: what take() would answer, consuming nothing."""
    return _fields(r.execute_command("SL.PEEK", key, int(limit), period,
                                     *_options(burst, cost, algorithm)))


def policy(r, name, key, cost=None, tokens=None, tier=None):
    """SL.POLICY: takes from a named policy of the server's config."""
    args = []
    if cost is not None:
        args += ["COST", int(cost)]
    if tokens is not None:
        args += ["TOKENS", int(tokens)]
    if tier is not None:
        args += ["TIER", tier]
    return _fields(r.execute_command("SL.POLICY", name, key, *args))


def reset(r, *keys):
    """SL.RESET: forgets the keys; the number that were held."""
    return int(r.execute_command("SL.RESET", *keys))


def acquire(r, key, max_in_flight, ttl_ms):
    """SL.ACQUIRE: a concurrency lease id (str), or None when max_in_flight are held."""
    reply = r.execute_command("SL.ACQUIRE", key, int(max_in_flight), int(ttl_ms))
    return reply.decode() if isinstance(reply, bytes) else reply


def release(r, key, lease_id):
    """SL.RELEASE: True when the lease was held, False when unknown or expired."""
    return int(r.execute_command("SL.RELEASE", key, lease_id)) == 1
