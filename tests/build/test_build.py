"""The build's own guarantees: what build/lib and build/bin hold, and the layer check.

The release build ($SLUICE_BUILD, default build/, what `make` leaves) puts only the
products in build/lib and build/bin (DESIGN.md's build outputs): the internal static
libraries and the benchmarks live elsewhere in the tree. scripts/check-layers.sh, run
on small source trees made here, refuses each kind of include it is there to refuse
and says which file includes what and why, and passes a tree whose arrows point down.
Run: make test-build.
"""

import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from harness import ROOT  # noqa: E402

BUILD = os.path.join(ROOT, os.environ.get("SLUICE_BUILD", "build"))
CHECK = os.path.join(ROOT, "scripts", "check-layers.sh")


def listing(d):
    """The files under d, relative to it (symbolic links included, directories not)."""
    out = set()
    for dirpath, _, files in os.walk(d):
        for f in files:
            out.add(os.path.relpath(os.path.join(dirpath, f), d))
    return out


@pytest.fixture(scope="module")
def build():
    if not os.path.isfile(os.path.join(BUILD, "CMakeCache.txt")):
        pytest.fail("%s is not configured (run make, or set SLUICE_BUILD)" % BUILD)
    return BUILD


def test_lib_holds_only_the_products(build):
    got = listing(os.path.join(build, "lib"))
    so = {f for f in got if f.startswith(("libsluice.so", "libsluice_client.so"))}
    assert {"libsluice.so", "libsluice.so.0", "libsluice_client.so",
            "libsluice_client.so.0"} <= so, got
    assert got - so == {"libsluice.a", "libsluice_client.a", "sluice-redis.so",
                        "pkgconfig/sluice.pc", "pkgconfig/sluice-client.pc"}, got


def test_bin_holds_only_the_programs(build):
    assert listing(os.path.join(build, "bin")) == {"sluiced", "sluice"}


def test_internal_libraries_and_benchmarks_are_built_elsewhere(build):
    top = os.listdir(build)
    for lib in ("sluice_proto", "sluice_policy", "sluice_cmd", "sluice_backend"):
        assert "lib%s.a" % lib in top, top
    assert {"bench_algo", "bench_store"} <= listing(os.path.join(build, "bench"))


def tree(root, files):
    """Writes files ({path: text}) under root; a header named in an include must exist
    for the check to know where it lands."""
    for path, text in files.items():
        p = os.path.join(root, path)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(text)


def check(root):
    p = subprocess.run([CHECK, str(root)], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout + p.stderr


HEADERS = {
    "src/common/alloc.h": "", "src/algo/algo.h": "", "src/store/store_layout.h": "",
    "src/store/store_debug.h": "", "src/policy/config.h": "", "src/backend/backend.h": "",
    "src/proto/resp.h": "", "src/cmd/cmd.h": "", "src/server/server.h": "",
    "src/cli/cli.h": "", "src/redis_module/module.h": "",
}


def test_a_tree_whose_includes_point_down_passes(tmp_path):
    tree(tmp_path, dict(HEADERS, **{
        "src/algo/gcra.c": '#include "algo/algo.h"\n#include "common/alloc.h"\n#include "sluice.h"\n',
        "src/store/store.c": '#include "store/store_layout.h"\n#include "algo/algo.h"\n',
        "src/backend/memory.c": '#include "policy/config.h"\n#include "backend/backend.h"\n',
        "src/cmd/cmd.c": '#include "proto/resp.h"\n#include "backend/backend.h"\n',
        "src/server/main.c": '#include "cmd/cmd.h"\n#include <stdio.h>\n',
        "src/redis_module/module.c": '#include "cmd/cmd.h"\n#include "module.h"\n',
        "tests/unit/test_store.c": '#include "store/store_debug.h"\n#include "cmd/cmd.h"\n',
        "bench/bench_store.c": '#include "store/store_debug.h"\n',
    }))
    rc, out = check(tmp_path)
    assert rc == 0, out
    assert "every include points down the layers" in out


@pytest.mark.parametrize("path,text,why", [
    ("src/algo/gcra.c", '#include "store/store_layout.h"\n', "src/store/'s headers"),
    ("src/proto/resp.c", '#include "cmd/cmd.h"\n',
     "proto (protocols) may not include cmd (commands, a higher layer)"),
    ("src/common/error.c", '#include "../server/server.h"\n',
     "common (common) may not include server (server, a higher layer)"),
    ("src/store/store.c", '  #  include "policy/config.h"\n',
     "store (store) may not include policy (policies, a higher layer)"),
    ("src/cli/main.c", '#include "redis_module/module.h"\n',
     "cli and redis_module are siblings (faces)"),
    ("src/server/main.c", '#include "store/store_debug.h"\n', "src/store/'s headers"),
    ("tests/unit/test_store.c", '#include "store/store_layout.h"\n', "src/store/'s headers"),
    ("src/newdir/x.c", '#include "common/alloc.h"\n', "src/newdir/ is in no layer"),
])
def test_an_include_up_the_layers_is_refused(tmp_path, path, text, why):
    tree(tmp_path, dict(HEADERS, **{path: "\n" + text}))
    rc, out = check(tmp_path)
    assert rc == 1, out
    inc = text.split('"')[1]
    assert '%s:2: #include "%s" refused: ' % (path, inc) in out, out
    assert why in out, out
    assert "1 include(s) refused" in out, out
