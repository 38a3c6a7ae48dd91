"""hiredis (Debian 12: 0.14, RESP2 only) drives the commands: hiredis_client.c, built here
against libhiredis-dev with pkg-config, checks every reply itself and exits non-zero on a
mismatch."""

import os
import shutil
import subprocess
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def hiredis_client(tmp_path_factory):
    cc = os.environ.get("CC", "cc")
    assert shutil.which(cc), "no C compiler (%s)" % cc
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "hiredis"], capture_output=True, text=True)
    assert flags.returncode == 0, "pkg-config cannot find hiredis (libhiredis-dev): %s" % flags.stderr
    out = str(tmp_path_factory.mktemp("hiredis") / "hiredis_client")
    build = subprocess.run([cc, "-std=c11", "-O1", "-g", "-Wall", "-Wextra", "-Werror",
                            os.path.join(HERE, "hiredis_client.c"), "-o", out] + flags.stdout.split(),
                           capture_output=True, text=True, timeout=60)
    assert build.returncode == 0, "building hiredis_client failed:\n%s" % build.stderr
    return out


def run(client, server, prefix):
    return subprocess.run([client, str(server.port), prefix], capture_output=True, text=True, timeout=30)


def test_hiredis_resp2(hiredis_client, server):
    res = run(hiredis_client, server, "hiredis:" + uuid.uuid4().hex)
    assert res.returncode == 0, "hiredis_client failed (%d):\n%s%s" % (res.returncode, res.stdout, res.stderr)
    assert "all checks passed" in res.stdout


def test_hiredis_client_catches_a_wrong_reply(hiredis_client, server):
    """The client really checks: run twice on the same keys, the second run sees drained
    keys where it expects fresh ones, and must fail."""
    prefix = "hiredis:" + uuid.uuid4().hex
    assert run(hiredis_client, server, prefix).returncode == 0
    res = run(hiredis_client, server, prefix)
    assert res.returncode == 1, res
    assert "expected" in res.stderr


def test_hiredis_many_clients_at_once(hiredis_client, server):
    procs = [subprocess.Popen([hiredis_client, str(server.port), "hiredis:%d:%s" % (i, uuid.uuid4().hex)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(8)]
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
