"""`cmake --install` into a temporary prefix, then used as a user would use it.

The build: $SLUICE_BUILD (default build/, what `make` leaves). One install into a
fresh prefix per run of this file (fixture `prefix`); every test looks at what landed
there: sluice.pc naming that prefix, a C program built with nothing but
`pkg-config --cflags --libs sluice` against the shared and the static library (and
docs/clients.md's example of sluice_client.h likewise), the shared library's dynamic
symbols against the functions sluice.h and sluice_client.h declare, the RESP client
(libsluice_client, `pkg-config sluice-client`) built into a program that asks the
installed sluiced, its symbols against sluice_resp.h, the
Redis module where docs/deployment.md says and loaded by a real redis-server from
there, and the systemd unit naming the installed sluiced (checked by
`systemd-analyze verify` where systemd is installed). Run: make test-install.
"""

import os
import re
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from harness import ROOT, ServerProcess, failed, pytest_runtest_makereport  # noqa: E402,F401

BUILD = os.path.join(ROOT, os.environ.get("SLUICE_BUILD", "build"))
CONSUMER = os.path.join(HERE, "consumer.c")
CC = os.environ.get("CC", "cc")

# What consumer.c prints: two takes of a limit of 2 allowed, the third refused, in
# the caller's state and in the store alike.
EXPECTED = ("take 0: allowed=1 remaining=1 store_allowed=1\n"
            "take 1: allowed=1 remaining=0 store_allowed=1\n"
            "take 2: allowed=0 remaining=0 store_allowed=0\n"
            "sluice 0.1.0\n")


def run(cmd, **kw):
    """Runs cmd and fails the test with its output unless it exits 0."""
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, **kw)
    assert p.returncode == 0, "%s exited %d:\n%s%s" % (cmd, p.returncode, p.stdout, p.stderr)
    return p.stdout


def install(prefix, destdir=None):
    env = dict(os.environ)
    env.pop("DESTDIR", None)
    if destdir:
        env["DESTDIR"] = destdir
    run(["cmake", "--install", BUILD, "--prefix", prefix], env=env)


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    if not os.path.exists(os.path.join(BUILD, "cmake_install.cmake")):
        pytest.fail("%s is not configured (run make, or set SLUICE_BUILD)" % BUILD)
    p = str(tmp_path_factory.mktemp("install") / "prefix")
    install(p)
    return p


def pkg_config(prefix_pc_dir, *args):
    env = dict(os.environ, PKG_CONFIG_PATH=prefix_pc_dir)
    env.pop("PKG_CONFIG_LIBDIR", None)
    return run(["pkg-config"] + list(args) + ["sluice"], env=env).split()


def test_pc_names_the_install_prefix(prefix):
    pc = os.path.join(prefix, "lib", "pkgconfig")
    assert os.path.isfile(os.path.join(pc, "sluice.pc"))
    env = dict(os.environ, PKG_CONFIG_PATH=pc)
    got = run(["pkg-config", "--variable=prefix", "sluice"], env=env).strip()
    assert got == prefix
    assert run(["pkg-config", "--modversion", "sluice"], env=env).strip() == "0.1.0"


def build_consumer(prefix, out, static):
    pc = os.path.join(prefix, "lib", "pkgconfig")
    flags = "--cflags --libs" + (" --static" if static else "")
    # The flags go through a shell, as a user's Makefile would pass them.
    cmd = '%s -Wall -Wextra -Werror %s "%s" -o "%s" $(pkg-config %s sluice)' % (
        CC, "-static" if static else "", CONSUMER, out, flags)
    env = dict(os.environ, PKG_CONFIG_PATH=pc)
    env.pop("PKG_CONFIG_LIBDIR", None)
    run(["/bin/sh", "-c", cmd], env=env, cwd=os.path.dirname(out))


def needed(path):
    """The shared libraries an ELF file names (DT_NEEDED)."""
    out = run(["readelf", "-d", path])
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def test_shared_library_through_pkg_config(prefix, tmp_path):
    exe = str(tmp_path / "consumer")
    build_consumer(prefix, exe, static=False)
    assert "libsluice.so.0" in needed(exe)
    # The dynamic loader finds the installed copy (and only it: not the build tree's).
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(prefix, "lib"))
    ldd = run(["ldd", exe], env=env)
    line = [l for l in ldd.splitlines() if "libsluice.so.0" in l][0]
    assert os.path.join(prefix, "lib", "libsluice.so.0") in line, ldd
    assert run([exe], env=env) == EXPECTED


def test_static_library_through_pkg_config(prefix, tmp_path):
    exe = str(tmp_path / "consumer-static")
    build_consumer(prefix, exe, static=True)
    assert needed(exe) == []  # nothing left to load: libsluice.a is inside
    env = dict(os.environ)
    env.pop("LD_LIBRARY_PATH", None)
    assert run([exe], env=env) == EXPECTED


def header_functions(header):
    """The functions a header declares, read from what the compiler sees of it
    (comments and macros gone): every name followed by '(' outside braces, so
    that struct members and enumerators do not count, and a declaration counts
    whether or not it carries SL_API."""
    text = run([CC, "-E", "-P", "-x", "c", header])
    names, depth = set(), 0
    for m in re.finditer(r"[{}]|\b(sl_\w+)\s*\(", text):
        if m.group(0) == "{":
            depth += 1
        elif m.group(0) == "}":
            depth -= 1
        elif depth == 0:
            names.add(m.group(1))
    return names


def exported_symbols(lib):
    """Every symbol a shared library defines in its dynamic symbol table."""
    out = run(["nm", "-D", "--defined-only", lib])
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


# The public headers: libsluice's API (sluice.h) and the client's half (sluice_client.h).
HEADERS = ("sluice.h", "sluice_client.h")


@pytest.mark.parametrize("where", ["installed", "build tree"])
def test_shared_library_exports_exactly_the_header(prefix, where):
    """libsluice.so's ABI is its public headers: each function sluice.h and
    sluice_client.h declare is exported, and nothing else is (no internal
    function, no data)."""
    if where == "installed":
        include = os.path.join(prefix, "include")
        lib = os.path.join(prefix, "lib", "libsluice.so")
    else:
        include = os.path.join(ROOT, "include")
        lib = os.path.join(BUILD, "lib", "libsluice.so")
    declared, exported = set(), exported_symbols(lib)
    for h in HEADERS:
        names = header_functions(os.path.join(include, h))
        assert len(names) > 20, h  # the parse found the API, not an empty set
        declared |= names
    assert declared - exported == set(), "declared in the headers but not exported"
    assert exported - declared == set(), "exported but not declared in the headers"


def docs_c_example():
    """The C program of docs/clients.md's section "### C", and the lines it says it prints."""
    with open(os.path.join(ROOT, "docs", "clients.md")) as f:
        text = f.read()
    section = text.split("\n### C\n", 1)
    assert len(section) == 2, "docs/clients.md has no section '### C'"
    m = re.search(r"```c\n(.*?)```", section[1], re.S)
    assert m, "docs/clients.md's C section has no C program"
    prints = re.search(r"It prints (.*?): the", section[1], re.S)
    assert prints, "docs/clients.md does not say what the C program prints"
    return m.group(1), re.findall(r"`([^`]*)`", prints.group(1))


@pytest.mark.parametrize("static", [False, True])
def test_client_example_of_the_docs(prefix, tmp_path, static):
    """docs/clients.md's C example, built against the installed sluice_client.h with
    nothing but pkg-config's flags, prints what the docs say it prints."""
    assert os.path.isfile(os.path.join(prefix, "include", "sluice_client.h"))
    program, lines = docs_c_example()
    src = tmp_path / "client_example.c"
    src.write_text(program)
    exe = str(tmp_path / "client_example")
    pc = os.path.join(prefix, "lib", "pkgconfig")
    cmd = '%s -Wall -Wextra -Werror %s "%s" -o "%s" $(pkg-config --cflags --libs %s sluice)' % (
        CC, "-static" if static else "", src, exe, "--static" if static else "")
    env = dict(os.environ, PKG_CONFIG_PATH=pc)
    env.pop("PKG_CONFIG_LIBDIR", None)
    run(["/bin/sh", "-c", cmd], env=env)
    env["LD_LIBRARY_PATH"] = os.path.join(prefix, "lib")
    assert run([exe], env=env) == "".join(line + "\n" for line in lines)


RESP_CONSUMER = os.path.join(HERE, "resp_consumer.c")

# What resp_consumer.c prints against a fresh sluiced.
RESP_EXPECTED = ("take 0: allowed=1 remaining=1\n"
                 "take 1: allowed=1 remaining=0\n"
                 "take 2: allowed=0 remaining=0\n"
                 "async: allowed=1 remaining=1\n")


class InstalledSluiced(ServerProcess):
    """The installed sluiced, RESP on a free port."""

    name = "sluiced"

    def __init__(self, prefix):
        super().__init__()
        self.binary = os.path.join(prefix, "bin", "sluiced")

    def argv(self):
        return [self.binary, "--port", str(self.port), "--http-port", "0", "--bind", "127.0.0.1"]

    def spawn(self):
        return subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def ping(self):
        import socket
        with socket.create_connection(("127.0.0.1", self.port), timeout=1) as c:
            c.sendall(b"PING\r\n")
            return c.recv(16).startswith(b"+PONG")


def test_resp_client_through_pkg_config(prefix, tmp_path):
    """libsluice_client from the install: built with `pkg-config --cflags --libs
    sluice-client libuv` alone, linked against the shared library, and run against the
    installed sluiced."""
    pc = os.path.join(prefix, "lib", "pkgconfig")
    env = dict(os.environ, PKG_CONFIG_PATH=pc)
    env.pop("PKG_CONFIG_LIBDIR", None)
    assert run(["pkg-config", "--modversion", "sluice-client"], env=env).strip() == "0.1.0"
    exe = str(tmp_path / "resp_consumer")
    run(["/bin/sh", "-c", '%s -Wall -Wextra -Werror "%s" -o "%s" $(pkg-config --cflags --libs '
         'sluice-client libuv)' % (CC, RESP_CONSUMER, exe)], env=env)
    assert "libsluice_client.so.0" in needed(exe)
    srv = InstalledSluiced(prefix).start()
    try:
        run_env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(prefix, "lib"))
        ldd = run(["ldd", exe], env=run_env)
        line = [l for l in ldd.splitlines() if "libsluice_client.so.0" in l][0]
        assert os.path.join(prefix, "lib", "libsluice_client.so.0") in line, ldd
        assert run([exe, str(srv.port)], env=run_env) == RESP_EXPECTED
    finally:
        status, killed = srv.terminate()
    assert not killed and status == 0


@pytest.mark.parametrize("where", ["installed", "build tree"])
def test_client_library_exports_exactly_its_header(prefix, where):
    """libsluice_client.so's ABI is sluice_resp.h: the functions it declares (beyond
    sluice.h's, which it includes), and nothing else."""
    if where == "installed":
        inc = os.path.join(prefix, "include")
        lib = os.path.join(prefix, "lib", "libsluice_client.so")
    else:
        inc = os.path.join(ROOT, "include")
        lib = os.path.join(BUILD, "lib", "libsluice_client.so")
    declared = (header_functions(os.path.join(inc, "sluice_resp.h"))
                - header_functions(os.path.join(inc, "sluice.h")))
    exported = exported_symbols(lib)
    assert len(declared) > 20
    assert declared - exported == set(), "declared in sluice_resp.h but not exported"
    assert exported - declared == set(), "exported but not declared in sluice_resp.h"


def test_build_tree_pc(tmp_path):
    """build/lib/pkgconfig/sluice.pc compiles against the build tree, not installed."""
    pc = os.path.join(BUILD, "lib", "pkgconfig")
    env = dict(os.environ, PKG_CONFIG_PATH=pc)
    env.pop("PKG_CONFIG_LIBDIR", None)
    exe = str(tmp_path / "consumer-build-tree")
    run(["/bin/sh", "-c", '%s -static "%s" -o "%s" $(pkg-config --static --cflags --libs sluice)'
         % (CC, CONSUMER, exe)], env=env)
    assert run([exe]) == EXPECTED


def test_destdir_stages_without_changing_the_paths(tmp_path):
    stage = str(tmp_path / "stage")
    install("/opt/sluice", destdir=stage)
    for pc in ("sluice.pc", "sluice-client.pc"):
        with open(os.path.join(stage, "opt/sluice/lib/pkgconfig", pc)) as f:
            assert "prefix=/opt/sluice\n" in f.read()
    with open(os.path.join(stage, "opt/sluice/lib/systemd/system/sluiced.service")) as f:
        assert "\nExecStart=/opt/sluice/bin/sluiced " in f.read()
    assert os.path.isfile(os.path.join(stage, "opt/sluice/lib/redis/modules/sluice-redis.so"))


def documented_module_path():
    """The module's path under the prefix, as docs/deployment.md gives it."""
    with open(os.path.join(ROOT, "docs", "deployment.md")) as f:
        text = f.read()
    m = re.search(r"PREFIX/(\S*sluice-redis\.so)", text)
    assert m, "docs/deployment.md names no PREFIX/.../sluice-redis.so"
    return m.group(1)


class InstalledRedis(ServerProcess):
    """A real redis-server loading the module from the install prefix."""

    name = "redis-server"

    def __init__(self, module, workdir):
        super().__init__()
        self.module = module
        self.workdir = workdir
        self.log = os.path.join(workdir, "redis.log")

    def argv(self):
        return ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                "--dir", self.workdir, "--save", "", "--appendonly", "no",
                "--logfile", self.log, "--loadmodule", self.module]

    def spawn(self):
        return subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def ping(self):
        import redis
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=2).ping()

    def output(self):
        try:
            with open(self.log) as f:
                return f.read()
        except OSError:
            return ""


def test_module_installed_where_the_docs_say(prefix, tmp_path):
    if not shutil.which("redis-server"):
        pytest.skip("redis-server is not installed")
    module = os.path.join(prefix, documented_module_path())
    assert os.path.isfile(module)
    import redis
    srv = InstalledRedis(module, str(tmp_path)).start()
    try:
        r = redis.Redis(host="127.0.0.1", port=srv.port, socket_timeout=5)
        assert r.execute_command("CL.THROTTLE", "install:k", 1, 1, 60) == [0, 2, 1, -1, 60]
        r.close()
    finally:
        status, killed = srv.terminate()
    assert not killed and status == 0, srv.output()


def test_sluiced_installed(prefix):
    out = run([os.path.join(prefix, "bin", "sluiced"), "--version"])
    assert out.strip() == "sluiced 0.1.0"


def test_systemd_unit_names_the_installed_sluiced(prefix):
    unit = os.path.join(prefix, "lib", "systemd", "system", "sluiced.service")
    with open(unit) as f:
        text = f.read()
    assert re.search(r"^ExecStart=%s " % re.escape(os.path.join(prefix, "bin", "sluiced")),
                     text, re.M), text
    assert re.search(r"^Type=notify$", text, re.M)
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze is not installed")
    # verify also checks that ExecStart's program exists and is executable.
    p = subprocess.run(["systemd-analyze", "verify", unit], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0 and "sluiced.service" not in p.stderr, p.stderr
