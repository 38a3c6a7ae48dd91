"""sluice_client: a client's half of rate limiting, for Python (standard library only).

- backoff:  exponential backoff with full or decorrelated jitter, never before Retry-After
- budget:   a retry budget (retries at most a share of first attempts, plus a floor)
- headers:  parse RateLimit-Policy / RateLimit / X-RateLimit-* / Retry-After, CL.THROTTLE
- limiter:  a client-side GCRA per advertised policy, kept in step with the server
- http:     urllib's urlopen and a requests adapter that use the three above
- resp:     CL.THROTTLE and a few SL.* commands through redis-py
"""

from .backoff import Backoff
from .budget import RetryBudget
from .headers import parse, parse_throttle
from .limiter import Limiter

__all__ = ["Backoff", "RetryBudget", "Limiter", "parse", "parse_throttle"]
