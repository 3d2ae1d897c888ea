"""The accuracy gate (`accuracy`, verify/accuracy.py) on GSM8K: graded, bounded, its data checked by hash.

The data is the pinned copy of openai/grade-school-math in shared/datasets/gsm8k
beside the checkout (or $BLACKWELL_STACK_GSM8K_DATA); without it the
tests that need it are skipped, saying where they looked. The servers are
verify_server.FaultServer: `gsm8k` answers every question with its reference
solution, `wrong-answer` answers fluently and wrongly, `stall` never answers.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import shutil
import signal
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from support import REPO
from support import cli as cli_process
from support.verify_server import FaultServer

from blackwell_stack.data import profile, registry
from blackwell_stack.data.plan import GPU_HOST
from blackwell_stack.errors import ExitCode, HashMismatch, StackError
from blackwell_stack.verify import accuracy, gsm8k_data
from blackwell_stack.verify import plan as verify_plan

DATA = Path(os.environ.get("BLACKWELL_STACK_GSM8K_DATA") or REPO.parent / "shared" / "datasets" / "gsm8k")
BOUND_S = 120  # a hang fails the test here; every run below needs a few seconds


def data_dir() -> Path:
    if not all((DATA / name).is_file() for name in ("train.jsonl", "test.jsonl")):
        pytest.skip(f"no GSM8K copy at {DATA} (set BLACKWELL_STACK_GSM8K_DATA to a directory holding the pinned "
                    "train.jsonl and test.jsonl)")
    return DATA


# ---------------------------------------------------------------- the grader and the data (no process)


@pytest.mark.parametrize("text,value", [
    (" Natalia sold 48/2 = 24 clips in May.\n#### 72", 72),
    (" The total is 1,234 dollars.", 1234),
    (" 3 + 4 = 7. The answer is 7.\n\n", 7),
    (" I cannot tell.", None),
])
def test_the_answer_is_the_last_number_without_commas(text, value):
    assert accuracy.answer_value(text) == value


def test_the_prompt_is_sglangs_few_shot_format():
    train = [gsm8k_data.Example("Q1?", "A1 #### 1"), gsm8k_data.Example("Q2?", "A2 #### 2")]
    assert accuracy.prompt(train, 1, "Q3?") == "Question: Q1?\nAnswer: A1 #### 1\n\nQuestion: Q3?\nAnswer:"


def test_the_sample_is_fixed_by_its_seed():
    assert accuracy.pick(1319, 5, 0) == accuracy.pick(1319, 5, 0) == sorted(accuracy.pick(1319, 5, 0))
    assert accuracy.pick(1319, 5, 0) != accuracy.pick(1319, 5, 1)
    assert accuracy.pick(3, 10, 0) == [0, 1, 2]


def test_every_profile_has_a_threshold_that_says_where_it_comes_from():
    for name in profile.available_profiles():
        threshold = gsm8k_data.threshold(name)
        assert 0 < threshold.min_accuracy < 1 and threshold.kind and threshold.source
    with pytest.raises(StackError, match="no accuracy threshold"):
        gsm8k_data.threshold("no-such-profile")


def test_plan_lists_the_gate_with_its_threshold_as_waiting_for_the_gpu_host():
    section = verify_plan.plan_section([])
    item = next(i for i in section.items if i.name == "accuracy gate")
    assert item.needs == GPU_HOST and "fails below 0.5, a floor meant to catch garbage" in item.value
    assert any(c.startswith("blackwell-stack accuracy http://") for c in section.commands)


def test_the_pins_match_the_shipped_copy_and_a_changed_file_is_refused(tmp_path):
    data = data_dir()
    assert len(gsm8k_data.load("test", data)) == 1319
    assert registry.path("gsm8k").is_file()
    shutil.copy(data / "train.jsonl", tmp_path / "train.jsonl")
    changed = (data / "test.jsonl").read_bytes().replace(b"#### 18", b"#### 19", 1)
    (tmp_path / "test.jsonl").write_bytes(changed)
    with pytest.raises(HashMismatch, match="the pin says"):
        gsm8k_data.load("test", tmp_path)
    (tmp_path / "test.jsonl").unlink()
    with pytest.raises(StackError, match="is missing"):
        gsm8k_data.load("test", tmp_path)


def test_the_first_run_downloads_into_the_cache_and_later_runs_read_it(tmp_path, monkeypatch):
    """Served from loopback in place of GitHub (the pins' URLs changed, their hashes kept): downloaded once,
    read from the cache with the server gone, and a damaged copy downloaded again."""
    data = data_dir()
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(data))
    handler.log_message = lambda *a: None  # type: ignore[attr-defined]
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    pins = copy.deepcopy(gsm8k_data.pins())
    for pin in pins["dataset"]["files"].values():
        pin["url"] = f"http://127.0.0.1:{httpd.server_address[1]}/{pin['file']}"
    monkeypatch.setattr(gsm8k_data, "pins", lambda: pins)
    monkeypatch.setenv("BLACKWELL_STACK_CACHE", str(tmp_path))
    cached = tmp_path / "gsm8k" / pins["dataset"]["commit"][:12] / "test.jsonl"
    try:
        assert len(gsm8k_data.load("test")) == 1319 and cached.read_bytes() == (data / "test.jsonl").read_bytes()
        cached.write_bytes(cached.read_bytes().replace(b"#### 18", b"#### 19", 1))
        assert len(gsm8k_data.load("test")) == 1319 and cached.read_bytes() == (data / "test.jsonl").read_bytes()
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert len(gsm8k_data.load("test")) == 1319  # no server now: the cache


# ---------------------------------------------------------------- the command against servers


def run(*args: str, env: dict[str, str] | None = None):
    return cli_process.run("accuracy", *args, env=env, timeout=BOUND_S)


@pytest.fixture(scope="module")
def gsm8k_server():
    with FaultServer("gsm8k", data=data_dir()) as server:
        yield server.url


@pytest.mark.proc
def test_a_server_that_answers_correctly_passes_from_the_cache(gsm8k_server, tmp_path):
    """The data comes from the user cache where a first run put it (copied there here: no network)."""
    cached = tmp_path / "cache" / "gsm8k" / gsm8k_data.pins()["dataset"]["commit"][:12]
    cached.mkdir(parents=True)
    for name in ("train.jsonl", "test.jsonl"):
        shutil.copy(data_dir() / name, cached / name)
    env = {**os.environ, "BLACKWELL_STACK_CACHE": str(tmp_path / "cache")}
    result = run(gsm8k_server, "--questions", "40", "--concurrency", "4", "--progress-every", "10", "--json",
                 "--out", str(tmp_path / "out.json"), env=env)
    assert result.returncode == ExitCode.OK, result.stderr[-2000:]
    report = json.loads(result.stdout)
    assert (report["ok"], report["accuracy"], report["questions"], report["answered"]) == (True, 1.0, 40, 40)
    assert report["threshold"]["profile"] == profile.DEFAULT_PROFILE and report["threshold"]["source"]
    assert report["dataset"]["commit"].startswith("3101c7d5")
    assert [line for line in result.stderr.splitlines() if "done" in line] == [
        f"accuracy: {n}/40 done, {n} correct" for n in (10, 20, 30, 40)]
    assert json.loads((tmp_path / "out.json").read_text()) == report


@pytest.mark.proc
def test_a_server_that_answers_wrongly_fails():
    with FaultServer("wrong-answer") as server:
        result = run(server.url, "--data", str(data_dir()), "--questions", "20", "--concurrency", "4")
    assert result.returncode == ExitCode.CHECK_FAILED, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    assert "FAIL accuracy 0.000 is below the threshold 0.5 (floor)" in result.stdout
    assert "accuracy failed" in result.stdout


@pytest.mark.proc
def test_a_server_that_stalls_stops_at_the_time_bounds():
    """Each request has --timeout, and once `concurrency` in a row got nothing the rest are not asked; the whole
    run has --run-timeout, which bounds the requests in flight too."""
    with FaultServer("stall") as server:
        by_requests = run(server.url, "--data", str(data_dir()), "--questions", "50", "--concurrency", "4",
                          "--timeout", "1", "--json")
        by_run = run(server.url, "--data", str(data_dir()), "--questions", "50", "--concurrency", "4",
                     "--run-timeout", "1", "--json")
    for result, why in ((by_requests, "4 requests in a row got no answer within --timeout 1 s"),
                        (by_run, "the run reached its time bound (--run-timeout)")):
        assert result.returncode == ExitCode.CHECK_FAILED, result.stderr[-2000:]
        report = json.loads(result.stdout)
        assert report["answered"] == 0 and report["accuracy"] == 0
        assert report["reasons"][-1].startswith("incomplete: 50 of 50 questions got no answer (first: timeout")
        # At most the requests in flight when the bound was reached were asked: 4, and 3 more started meanwhile.
        not_asked = [s for s in report["wrong_samples"] if s["error"].startswith("not asked")]
        assert report["questions"] - 7 <= report["not_asked"], report
        assert all(why in s["error"] for s in not_asked)


@pytest.mark.proc
def test_a_signal_ends_the_run_at_once_not_after_the_requests_in_flight():
    """Every request to `stall` waits its --timeout (600 s here); SIGTERM ends the command well before."""
    with FaultServer("stall") as server:
        child = cli_process.start("accuracy", server.url, "--data", str(data_dir()), "--questions", "8",
                                  "--concurrency", "4", "--timeout", "600")
        assert child.stderr is not None
        assert child.stderr.readline().startswith("accuracy: 8 GSM8K questions")  # asking now
        child.send_signal(signal.SIGTERM)
        _out, err = child.communicate(timeout=BOUND_S)
    assert child.returncode == 128 + signal.SIGTERM, err
    assert "terminated (SIGTERM)" in err and "Traceback" not in err
