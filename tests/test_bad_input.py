"""Bad input, every subcommand: one table, each row a command, its exit code and a fragment of its message.

Every row runs the real CLI in a subprocess, with a wall-clock bound (a hang
fails the row instead of hanging the suite) and a bound on its address space
(an unbounded read fails the row with a MemoryError instead of filling the
machine); no row may print a traceback. The servers the rows talk to are
real servers on loopback, started here: the scripted faults of
verify_server.py (answers of "NaN happened", SGLang's matched_stop, a stream
cut short, a server that never answers) and fixed-answer HTTP servers of
index_server.py (an empty mirror of github.com).

Placeholders in a row ({fifo}, {nan_text}, ...) are filled in by `places`.
A fragment of None means: nothing at all on stderr (a command that must end
quietly). Add a row for each bad input found.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from support.index_server import serve_fixed
from support.verify_server import FaultServer

from blackwell_stack.errors import ExitCode

pytestmark = pytest.mark.proc  # runs the CLI or a tool as a process

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
BOUND_S = 120  # far above what any row needs (the slowest waits one 1 s timeout)
MEMORY_BOUND = 8 << 30  # address space: torch's libraries mapped by `doctor abi` fit; /dev/zero read whole does not

OK, CHECK, USAGE, NETWORK, TOOLCHAIN = (ExitCode.OK, ExitCode.CHECK_FAILED, ExitCode.USAGE, ExitCode.NETWORK,
                                        ExitCode.TOOLCHAIN)
PASS = "http://127.0.0.1:9"  # nothing listens there: rows that must fail before any request


@dataclass(frozen=True)
class Row:
    argv: tuple[str, ...]
    code: int
    fragment: str | None  # in stdout + stderr, whitespace normalised; None: stderr must be empty
    env: dict[str, str] = field(default_factory=dict)
    stdout_closed: bool = False
    stderr_closed: bool = False

    def __str__(self) -> str:
        return " ".join(self.argv)


def row(*argv: str, code: int, fragment: str | None, **kwargs) -> Row:
    return Row(tuple(argv), int(code), fragment, **kwargs)


ROWS = [
    # The reference deployment's failure text in the answer, not only in the finish reason.
    row("smoke", "{nan_text}", code=CHECK, fragment="nan-happened in the text"),
    row("smoke", "{nan_stop}", code=CHECK, fragment="nan-happened in the matched_stop"),
    # A file with no torch symbols is not a torch extension, and not OK.
    row("doctor", "abi", "--kernel", "{elf}", "--torch", "env", code=CHECK, fragment="it is not a torch extension"),
    # A URL that urllib cannot split.
    row("smoke", "http://[::1", code=USAGE, fragment="not a server URL: 'http://[::1'"),
    row("bench", "http://[::1", code=USAGE, fragment="Invalid IPv6 URL"),
    # Output the terminal's encoding cannot write: escaped or replaced, never a crash.
    row("pins", "show", code=OK, fragment="(long cells are cut", env={"PYTHONIOENCODING": "ascii"}),
    row("pins", "show", code=OK, fragment="(long cells are cut", env={"LC_ALL": "C", "PYTHONUTF8": "0"}),
    row("plan", code=OK, fragment="next:", env={"PYTHONIOENCODING": "ascii", "COLUMNS": "100"}),
    # A stdout (or stderr) closed before the command starts: it ends quietly, with its own code.
    row("plan", code=OK, fragment=None, stdout_closed=True),
    row("serve", "check", "--set", "kv-cache-dtype=fp8_e4m3", code=CHECK, fragment=None, stdout_closed=True),
    row("smoke", "http://[::1", code=USAGE, fragment=None, stderr_closed=True),
    # Files that are not regular files, or far larger than what they hold: refused at once, never read whole.
    row("smoke", PASS, "--api-key-file", "/dev/zero", code=USAGE, fragment="--api-key-file /dev/zero is a character device"),
    row("accuracy", PASS, "--min-accuracy", "1.5", code=USAGE, fragment="1.5 is not below 1: give a fraction"),
    row("acceptance", "--bound", "smoke", code=USAGE, fragment="bad --bound 'smoke' hint: write STEP=SECONDS"),
    row("acceptance", "--bound", "smoke=-1", code=USAGE, fragment="bad --bound 'smoke=-1'"),
    row("acceptance", "--bench-levels", "1,x", code=USAGE, fragment="bad --bench-levels '1,x'"),
    row("acceptance", "--report-dir", "{tmp}", code=USAGE, fragment="exists: a report is never written over another"),
    row("acceptance", "--kernel-wheel", "{fifo}", code=USAGE, fragment="is a FIFO (named pipe)"),
    row("acceptance", "--baseline", "{huge}", code=USAGE, fragment="is larger than 32.0 MiB"),
    row("plan", "--report", "{fifo}", code=USAGE, fragment="--report {fifo} is a FIFO (named pipe)"),
    row("plan", "--report", "{huge}", code=USAGE, fragment="--report {huge} is larger than 4.0 MiB"),
    row("plan", "--report", "{deep_json}", code=USAGE, fragment="is not valid JSON"),
    row("plan", "--report", "{empty}", code=USAGE, fragment="is not valid JSON"),
    row("plan", "--report", "{tmp}/none.json", code=USAGE, fragment="No such file or directory"),
    row("accuracy", PASS, "--data", "{fifo}", code=USAGE, fragment="hint: give --data a directory that holds train.jsonl"),
    row("smoke", PASS, "--api-key-file", "{fifo}", code=USAGE, fragment="is a FIFO (named pipe), not a regular file"),
    row("smoke", PASS, "--api-key-file", "{big}", code=USAGE, fragment="is larger than 64 KiB"),
    row("smoke", PASS, "--api-key-file", "{tmp}", code=USAGE, fragment="cannot read --api-key-file"),
    row("bench", PASS, "--api-key-file", "/dev/zero", code=USAGE, fragment="is a character device"),
    row("bench", PASS, "--baseline", "/dev/zero", code=USAGE, fragment="/dev/zero is a character device"),
    row("bench", PASS, "--baseline", "{fifo}", code=USAGE, fragment="is a FIFO (named pipe)"),
    row("bench", PASS, "--baseline", "{huge}", code=USAGE, fragment="is larger than 32.0 MiB"),
    row("inspect", "{fifo}", code=USAGE, fragment="is a FIFO (named pipe), not a regular file"),
    row("inspect", "/dev/zero", code=USAGE, fragment="/dev/zero is a character device"),
    row("doctor", "abi", "--kernel", "{fifo}", "--torch", "env", code=USAGE, fragment="is a FIFO (named pipe)"),
    row("wheel", "diff", "{fifo}", "{fifo}", code=USAGE, fragment="is a FIFO (named pipe)"),
    row("wheel", "diff", "--reference", "/dev/zero", code=USAGE, fragment="wheel /dev/zero is a character device"),
    row("pins", "vendor", "{fifo}", code=USAGE, fragment="is a FIFO (named pipe)"),
    row("serve", "check", "--profile", "{fifo}", code=USAGE, fragment="--profile {fifo} is a FIFO (named pipe)"),
    row("serve", "check", "--profile", "{tmp}", code=USAGE, fragment="is a directory"),
    row("serve", "check", "--module-config", "{fifo}", code=USAGE, fragment="--module-config {fifo} is a FIFO"),
    row("serve", "check", "--module-config", "{huge}", code=USAGE, fragment="is larger than"),
    row("serve", "check", "--module-config", "{deep_json}", code=USAGE, fragment="is not valid JSON"),
    row("serve", "check", "--flags-table", "/dev/zero", code=USAGE, fragment="/dev/zero is a character device"),
    row("serve", "pin-model", "--endpoint", "http://127.0.0.1:9", "--out", "{tmp}/m.json", code=NETWORK,
        fragment="hint: run it on a host that reaches the Hub, or pass --endpoint"),
    row("serve", "pin-model", "--endpoint", "{not_json}", "--out", "{tmp}/m.json", code=NETWORK,
        fragment="is not JSON hint: check --endpoint"),
    row("serve", "pin-model", "--out", "{fifo}", code=USAGE, fragment="--out {fifo} is a FIFO"),
    # A mirror of github.com serves every source, the json release download included.
    row("kernel", "sources", "fetch", "--dir", "{tmp}/sources", "--all", "--github", "{mirror}", code=NETWORK,
        fragment="{mirror}/nlohmann/json/releases/download/v3.11.3/json.tar.xz"),
    row("kernel", "test", "--wheel", "{fifo}", "--tests", "{tmp}", "--dry-run", "--gpu", "12.0", code=USAGE,
        fragment="--wheel {fifo} is not a file"),
    row("kernel", "test", "--wheel", "/dev/zero", "--tests", "{tmp}", "--dry-run", "--gpu", "12.0", code=USAGE,
        fragment="--wheel /dev/zero is not a file"),
    row("kernel", "patches", "check", "--src", "{fifo}", code=USAGE, fragment="--src {fifo} is not a directory"),
    # A server that never answers costs one --timeout, not eight.
    row("smoke", "{stall}", "--model", "m", "--timeout", "1", "--max-tokens", "4", code=CHECK,
        fragment="not asked: the server gave no answer to capital (no-stream) within --timeout 1 s"),
    # An interpreter without SGLang is refused before it is started.
    row("serve", "run", "--python", "{no_sglang}", code=TOOLCHAIN, fragment="has no sglang"),
    row("bench", PASS, "--model", "m", "--python", "{no_sglang}", code=TOOLCHAIN,
        fragment="has no sglang (`python -m sglang.bench_serving`"),
    row("serve", "run", "--python", "{tmp}/no-such-python", code=TOOLCHAIN, fragment="cannot run --python"),
    # Flags as SGLang's parser reads them.
    row("serve", "check", "--", "--d", "1", code=CHECK, fragment="--d is ambiguous in sglang 0.5.9"),
    row("serve", "check", "--set", "no-such-flag=1", code=CHECK, fragment="has no flag --no-such-flag"),
    # A connection dropped in the middle of an answer says so.
    row("smoke", "{drop}", code=CHECK, fragment="dropped: the server closed the connection before the answer ended"),
    # Global options after the command as well as before it.
    row("plan", "-v", "--json", code=OK, fragment='"plan_version": 1'),
    row("plan", "doctor", "--wide", code=OK, fragment="not checked here (`doctor` on the GPU host)"),
    row("pins", "show", "--wide", "-v", code=OK, fragment="stack stable (uv.lock)"),
    row("plan", "no-such-section", code=USAGE, fragment="the plan has no section 'no-such-section'"),
    row("plan", "--stack", "no-such-stack", code=USAGE, fragment="there is no stack 'no-such-stack'"),
    row("stack", "lock", "nightly", "--wheels", "{fifo}", "--no-audit", code=USAGE, fragment="--wheels {fifo}: not a directory"),
    row("stack", "lock", "nightly", "--wheels", "{fifo_wheels}", "--no-audit", code=USAGE,
        fragment="is a FIFO (named pipe), not a regular file hint: keep only the wheel files themselves in {fifo_wheels}"),
    # Found while writing this table.
    row("smoke", PASS, "--api-key-file", "{empty}", code=USAGE, fragment="is empty"),
    row("bench", PASS, "--concurrency", "1,x", code=USAGE, fragment="bad --concurrency '1,x'"),
    row("smoke", "http://127.0.0.1:99999", code=USAGE, fragment="bad port"),
    # What the standard library's readers raise besides OSError: refused where ours to check (URLs, host names),
    # and a clear error at the one boundary (cli/boundary.py) where the reader is the library's.
    row("kernel", "sources", "fetch", "--dir", "{tmp}/sources", "--github", "http://[::1",
        code=USAGE, fragment="--github: 'http://[::1' is not a URL (Invalid IPv6 URL)"),
    row("kernel", "sources", "fetch", "--dir", "{tmp}/sources", "--github", "not a url",
        code=USAGE, fragment="is not an http(s) URL"),
    row("smoke", "http://a..b:9", code=USAGE, fragment="the host name 'a..b' is not valid"),
    row("inspect", "{encrypted}", code=USAGE, fragment="cannot be read (RuntimeError: File"),
    row("inspect", "{compress99}", code=USAGE, fragment="(NotImplementedError: That compression method is not supported)"),
    row("wheel", "diff", "{encrypted}", "{compress99}", code=USAGE, fragment="cannot be read"),
    row("bench", PASS, "--baseline", "{deep_json}", code=USAGE, fragment="an input is nested too deeply to read"),
    row("serve", "check", "--profile", "{deep_json}", code=USAGE, fragment="an input is nested too deeply to read"),
    # Lengths a server sends are checked where they enter: a chunk size of -6 once looped forever.
    row("smoke", "{negative_chunk}", "--timeout", "5", code=CHECK, fragment="broken HTTP body"),
    row("smoke", "{unicode_length}", "--timeout", "5", code=CHECK, fragment="smoke failed"),
    # A user's own file that is not what it should be is a bad input (2), not the project's data (3).
    row("serve", "check", "--profile", "/etc/passwd", code=USAGE, fragment="/etc/passwd: not valid JSON"),
    # A baseline value NaN compared as "ok" with any figure; a concurrency "8" crashed after the sweep.
    row("bench", PASS, "--baseline", "{nan_baseline}", code=USAGE, fragment="field 'value': must be a finite number above 0, found nan"),
    row("bench", PASS, "--baseline", "{text_concurrency}", code=USAGE,
        fragment="field 'concurrency': must be a whole number of at least 1, found '8'"),
    # An empty string is not "the default": `inspect ""` inspected the working directory.
    row("inspect", "", code=USAGE, fragment="an empty value as argument 2"),
    row("bench", PASS, "--model", "", code=USAGE, fragment="an empty value for --model"),
    row("serve", "check", "--profile=", code=USAGE, fragment="an empty value for --profile"),
    # serve render prints a rule's error as `error:`, and then fails.
    row("serve", "render", "--set", "no-such-flag=1", code=CHECK, fragment="sglang 0.5.9 has no flag --no-such-flag"),
    # A program the CLI runs is read within a bound (proc.py): one that floods is stopped, never read whole.
    row("serve", "run", "--python", "{flood}", code=TOOLCHAIN, fragment="{flood} printed more than 64 MiB on its stdout"),
    row("stack", "doctor", "stable", "--python", "{flood}", code=USAGE, fragment="printed more than 64 MiB"),
    row("doctor", "abi", "--kernel", "{elf}", "--python", "{flood}", code=USAGE, fragment="printed more than 64 MiB"),
    # A venv's metadata files are outside bytes too: a FIFO is refused at once, a huge one is never read whole.
    row("stack", "doctor", "stable", "--python", "{fifo_venv}/bin/python", code=USAGE,
        fragment="evil-1.0.dist-info/METADATA is a FIFO (named pipe), not a regular file"),
    row("stack", "doctor", "stable", "--python", "{huge_venv}/bin/python", code=USAGE,
        fragment="evil-1.0.dist-info/METADATA is larger than 64.0 MiB"),
]


def _venv_with_metadata(path: Path, make) -> str:
    """A real venv (no pip) with one distribution whose METADATA `make` creates."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)
    site = next(path.glob("lib/python3*/site-packages"))
    (site / "evil-1.0.dist-info").mkdir()
    make(site / "evil-1.0.dist-info" / "METADATA")
    return str(path)


def _sparse(path: Path) -> None:
    with open(path, "wb") as fh:  # its size says 6 GiB; no block of it is written
        fh.truncate(6 << 30)


def _zip_with_headers_changed(path: Path, local_offset: int, central_offset: int, value: bytes) -> str:
    """A wheel whose members' local and central headers say `value` at those offsets (a flag, a method)."""
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("pkg/__init__.py", "x = 1\n")
        zf.writestr("pkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\n")
        zf.writestr("pkg-1.0.dist-info/RECORD", "")
    data = bytearray(path.read_bytes())
    for signature, offset in ((b"PK\x03\x04", local_offset), (b"PK\x01\x02", central_offset)):
        at = data.find(signature)
        while at >= 0:
            data[at + offset : at + offset + len(value)] = value
            at = data.find(signature, at + 4)
    path.write_bytes(bytes(data))
    return str(path)


@pytest.fixture(scope="module")
def places(tmp_path_factory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("bad-input")
    fifo = tmp / "fifo"
    os.mkfifo(fifo)
    (tmp / "big").write_bytes(b"k" * (65 << 10))
    with open(tmp / "huge", "wb") as fh:  # sparse: its size says 40 MiB
        fh.truncate(40 << 20)
    (tmp / "empty").write_bytes(b"")
    no_sglang = tmp / "python-without-site"
    no_sglang.write_text(f"#!/bin/sh\nexec {sys.executable} -S \"$@\"\n")  # no site-packages: no sglang
    no_sglang.chmod(0o755)
    flood = tmp / "python-that-floods"
    flood.write_text("#!/bin/sh\nexec yes\n")  # prints forever
    flood.chmod(0o755)
    fifo_venv = _venv_with_metadata(tmp / "fifo-venv", os.mkfifo)
    huge_venv = _venv_with_metadata(tmp / "huge-venv", _sparse)
    servers = {name: FaultServer(name) for name in ("nan-text", "nan-stop", "drop", "stall", "negative-chunk",
                                                    "unicode-length")}
    (tmp / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    fifo_wheels = tmp / "fifo-wheels"  # a FIFO named like a kept wheel: read, it would wait forever
    fifo_wheels.mkdir()
    os.mkfifo(fifo_wheels / "torch-2.12.0.dev20260307+cu130-cp312-cp312-manylinux_2_28_x86_64.whl")
    # General purpose flag bit 0 (encrypted), and compression method 99 (none zipfile knows).
    encrypted = _zip_with_headers_changed(tmp / "enc-1.0-py3-none-any.whl", 6, 8, b"\x01")
    compress99 = _zip_with_headers_changed(tmp / "comp-1.0-py3-none-any.whl", 8, 10, b"\x63\x00")
    from blackwell_stack.verify import baseline

    shipped = json.loads(baseline.DEFAULT_BASELINE.read_text())
    nan_baseline, text_concurrency = tmp / "nan-baseline.json", tmp / "text-concurrency.json"
    first = {k: v for k, v in shipped["expectations"][0].items() if k not in ("concurrency", "min_concurrency")}
    nan_baseline.write_text(json.dumps({**shipped, "expectations": [{**first, "concurrency": 1, "value": float("nan")}]}))
    text_concurrency.write_text(json.dumps({**shipped, "expectations": [{**first, "concurrency": "8"}]}))
    fixed = {
        "not_json": serve_fixed(b"<html>not json</html>", content_type="text/html"),
        "mirror": serve_fixed(b"not here", status=404, content_type="text/plain"),
    }
    yield {
        "tmp": str(tmp), "fifo": str(fifo), "fifo_wheels": str(fifo_wheels), "big": str(tmp / "big"), "huge": str(tmp / "huge"),
        "empty": str(tmp / "empty"), "elf": os.path.realpath(sys.executable), "no_sglang": str(no_sglang),
        "flood": str(flood), "fifo_venv": fifo_venv, "huge_venv": huge_venv,
        "deep_json": str(tmp / "deep.json"), "encrypted": encrypted, "compress99": compress99,
        "nan_baseline": str(nan_baseline), "text_concurrency": str(text_concurrency),
        **{name.replace("-", "_"): server.url for name, server in servers.items()},
        **{name: server.url for name, server in fixed.items()},
    }
    for server in servers.values():
        server.stop()
    for server in fixed.values():
        server.shutdown()


def _bounded() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BOUND, MEMORY_BOUND))


def run_row(r: Row, places: dict[str, str]) -> tuple[subprocess.CompletedProcess, str]:
    argv = [a.format(**places) for a in r.argv]
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", ""), **r.env}
    if "PYTHONIOENCODING" not in r.env and "LC_ALL" in r.env:
        env.pop("PYTHONIOENCODING", None)
    # The child closes the descriptors a row wants closed, then becomes the CLI (as `blackwell-stack plan >&-`).
    script = "import os, sys\n"
    if r.stdout_closed:
        script += "os.close(1)\n"
    if r.stderr_closed:
        script += "os.close(2)\n"
    script += f"os.execv(sys.executable, [sys.executable, '-m', 'blackwell_stack', *{argv!r}])\n"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                            timeout=BOUND_S, preexec_fn=_bounded)
    return result, " ".join((result.stdout + "\n" + result.stderr).split())


@pytest.mark.parametrize("r", ROWS, ids=str)
def test_bad_input_is_a_clear_error(r: Row, places):
    result, text = run_row(r, places)
    assert "Traceback" not in result.stderr and "MemoryError" not in text, result.stderr[-3000:]
    assert result.returncode == r.code, (result.returncode, text[-3000:])
    if r.fragment is None:
        assert result.stderr == "", result.stderr[-3000:]
    else:
        assert " ".join(r.fragment.format(**places).split()) in text, text[-3000:]


def test_every_subcommand_has_a_row():
    """Each command of `blackwell-stack --help` has at least one row here (the table grows with each command)."""
    from blackwell_stack.cli import build_parser, commands

    names = {path.split(" ")[0] for path in commands(build_parser())}
    covered = {r.argv[0] for r in ROWS}
    assert names <= covered, sorted(names - covered)


def test_a_fifo_as_a_data_root_file_is_refused_without_blocking(tmp_path):
    """A project data file replaced by a FIFO (BLACKWELL_STACK_ROOT) is refused at once, like a user's file."""
    from conftest import copy_data_root

    root = copy_data_root(tmp_path / "root")
    rules = root / "modules/rules.json"
    rules.unlink()
    os.mkfifo(rules)
    result = subprocess.run([sys.executable, "-m", "blackwell_stack", "serve", "check"], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": SRC, "BLACKWELL_STACK_ROOT": str(root)}, timeout=BOUND_S)
    assert result.returncode == USAGE and "Traceback" not in result.stderr, result.stderr
    assert "rules.json is a FIFO (named pipe), not a regular file" in " ".join(result.stderr.split())


def test_the_failure_text_is_data_with_its_source():
    """Each pattern of verify/failure-text.json names where it was seen; the file is in the data registry."""
    from blackwell_stack.data import registry
    from blackwell_stack.verify import degeneracy

    assert registry.entry("failure-text").path() == Path(degeneracy.__file__).with_name("failure-text.json")
    patterns = degeneracy.failure_texts()
    assert {p.name for p in patterns} >= {"nan-happened", "exclamation-run"}
    assert all(p.source and p.what for p in patterns)
    assert "schedule_batch.py" in next(p.source for p in patterns if p.name == "nan-happened")
    found = degeneracy.failure_text("The capital of", "stop", "NaN happened")
    assert [f.check for f in found] == ["failure-text"] and "matched_stop" in found[0].detail
    assert degeneracy.failure_text("Paris is the capital of France!", "stop") == []
