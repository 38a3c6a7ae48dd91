"""The command cases shared with the Redis module (tests/testdata/command_cases.py),
against sluiced, in RESP2 and RESP3."""

import os
import sys
import uuid

import pytest

from respclient import Error

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "testdata"))
import command_cases  # noqa: E402


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def client(request, server):
    c = server.conn()
    c.call("HELLO", str(request.param))
    yield c
    c.close()


def _error(reply):
    return reply.message if isinstance(reply, Error) else None


def _call(c):
    def call(*args):
        c.send_command(*args)
        return c.read_reply()
    return call


@pytest.mark.parametrize("name,steps", command_cases.CASES, ids=[n for n, _ in command_cases.CASES])
def test_shared_case(client, name, steps):
    command_cases.run_case(_call(client), _error, name, steps, uuid.uuid4().hex[:8])
