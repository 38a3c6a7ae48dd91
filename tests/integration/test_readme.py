"""The README's one-minute tour, run as written: every `$ command` of its shell blocks runs in
one bash session against a real sluiced (its ports 7379 and 7380 replaced by free ones), and
what it prints must be what the README shows. In the README's output, a line `...` stands for any
lines, text after two spaces and `#` is a comment, and a 24-hex-digit lease id stands for any.
redis-cli prints as it does in a terminal (--no-raw) where the README runs it at a prompt."""

import os
import re
import subprocess

from conftest import ROOT, free_port

HEX_ID = re.compile(r"\b[0-9a-f]{24}\b")


def tour_blocks():
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    section = text.split("## A one-minute tour", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)```", section, re.S)


def steps(block):
    """[(command, [expected lines])] of one block."""
    out = []
    for line in block.splitlines():
        if line.startswith("$ "):
            out.append((re.sub(r"\s{2,}#.*$", "", line[2:]), []))
        elif out and line.strip():
            out[-1][1].append(re.sub(r"\s{2,}#.*$", "", line).rstrip())
    return out


def pattern(expected):
    parts = []
    for line in expected:
        if line == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(HEX_ID.sub("[0-9a-f]{24}", re.escape(line)).replace(r"\[0\-9a\-f\]\{24\}",
                                                                            "[0-9a-f]{24}") + "\n")
    return "".join(parts)


def test_the_readme_tour_runs_as_written(make_server):
    http = free_port()
    s = make_server(args=["--http-port", str(http)])
    blocks = tour_blocks()
    assert len(blocks) >= 2, "the tour's shell blocks"
    for block in blocks:
        script, marks = [], []
        for i, (cmd, _) in enumerate(steps(block)):
            cmd = cmd.replace("7379", str(s.port)).replace("7380", str(http))
            cmd = re.sub(r"^redis-cli ", "redis-cli --no-raw ", cmd)
            script.append("echo '@@%d@@'" % i)
            script.append(cmd)
        run = subprocess.run(["bash", "-c", "\n".join(script)], capture_output=True, text=True,
                             timeout=60)
        assert run.returncode == 0, run.stderr
        outputs = re.split(r"@@\d+@@\n", run.stdout.replace("\r", ""))[1:]
        for (cmd, expected), got in zip(steps(block), outputs):
            got = "\n".join(l.rstrip() for l in got.splitlines()) + ("\n" if got.strip() else "")
            want = pattern(expected)
            assert re.fullmatch(want, got), "README: $ %s\nshows:\n%s\nprints:\n%s" % (
                cmd, "\n".join(expected), got)
