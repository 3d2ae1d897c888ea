"""smoke and bench against a real OpenAI-compatible server: `transformers serve` on 127.0.0.1
with tiny models made by the test (tests/support/verify_server.py), nothing downloaded."""

from __future__ import annotations

import json
import zipfile

import pytest

for _module in ("torch", "transformers", "tokenizers", "fastapi", "uvicorn", "openai"):
    pytest.importorskip(_module, reason="the verify server tests need the test extra (torch, transformers[serving], tokenizers)")

from support import verify_server  # noqa: E402  (tests/ is on sys.path under pytest)

from blackwell_stack import fileio  # noqa: E402
from blackwell_stack.cli import main  # noqa: E402
from blackwell_stack.errors import ExitCode  # noqa: E402
from blackwell_stack.verify import baseline, commands  # noqa: E402

pytestmark = pytest.mark.slow

GARBAGE_CHECKS = {"failure-text", "replacement-char", "control-char", "char-run", "repeated-unit", "low-diversity"}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("verify-models")
    models = verify_server.make_models(root)
    server = verify_server.Server(verify_server.free_port(), root / "server.log")
    try:
        server.wait_ready()
        yield server.url, {name: str(path) for name, path in models.items()}
    finally:
        server.stop()


def _smoke(capsys, url, model, *extra):
    code = main(["smoke", url, "--model", model, "--max-tokens", "48", *extra])
    return code, capsys.readouterr().out


def _json_smoke(capsys, url, model):
    code, out = _smoke(capsys, url, model, "--json")
    return code, json.loads(out)


def test_bang_model_fails_on_runs_of_exclamation_marks(served, capsys):
    url, models = served
    code, report = _json_smoke(capsys, url, models["bang"])
    assert code == 1 and report["ok"] is False
    assert len(report["answers"]) == 8  # 4 prompts x stream/no-stream
    for answer in report["answers"]:
        checks = {v["check"] for v in answer["verdicts"]}
        # The seed's own symptom, from its failure text, and the general detectors.
        assert checks == {"failure-text", "char-run", "low-diversity"}, answer
        assert "exclamation-run" in next(v for v in answer["verdicts"] if v["check"] == "failure-text")["detail"]
        run = next(v for v in answer["verdicts"] if v["check"] == "char-run")
        assert run["prompt"] == answer["prompt"] and run["mode"] == answer["mode"]
        assert "!!!!!!!!" in run["excerpt"]
        assert answer["finish_reason"] == "length"


def test_silent_model_fails_on_empty_content(served, capsys):
    url, models = served
    code, report = _json_smoke(capsys, url, models["silent"])
    assert code == 1
    for answer in report["answers"]:
        assert [v["check"] for v in answer["verdicts"]] == ["empty-content"], answer
        assert answer["finish_reason"] == "stop"


def test_random_model_fails_with_garbage_verdicts_and_readable_evidence(served, capsys):
    url, models = served
    code, out = _smoke(capsys, url, models["random"])
    assert code == 1
    assert "smoke failed" in out and "FAIL capital (no-stream)" in out and "text: " in out
    code, report = _json_smoke(capsys, url, models["random"])
    for answer in report["answers"]:
        checks = {v["check"] for v in answer["verdicts"]}
        assert checks and checks <= GARBAGE_CHECKS, answer


def test_a_model_that_ignores_the_question_fails(served, capsys):
    """The fluent model writes sound text, but the chat template ends every prompt alike: both chat prompts get the
    same answer, which holds neither Paris nor the digits of the count."""
    url, models = served
    code, report = _json_smoke(capsys, url, models["fluent"])
    assert code == 1
    for answer in report["answers"]:
        checks = {v["check"] for v in answer["verdicts"]}
        assert checks == ({"wrong-answer", "same-answer"} if answer["api"] == "chat" else set()), answer


def test_a_model_that_reads_the_question_passes(served, capsys):
    """The attentive model (the GPU run's sound model) answers each chat prompt by what it asks, so smoke passes it
    through a real server: its content checks ask no more than a model that reads the prompt gives."""
    url, models = served
    code, report = _json_smoke(capsys, url, models["attentive"])
    assert code == 0 and report["ok"] is True, report
    texts = {(a["prompt"], a["mode"]): a["text"] for a in report["answers"]}
    assert texts[("capital", "stream")] == texts[("capital", "no-stream")] == "The capital of France is Paris."
    assert texts[("count", "stream")].startswith("1, 2, 3, 4, 5, 6,")


def test_unreachable_server_is_one_error_that_says_what_to_do(capsys):
    port = verify_server.free_port()  # nothing listens there
    code = main(["smoke", f"http://127.0.0.1:{port}", "--model", "m"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.count("cannot connect") == 1 and "hint: check that the server is up" in err


def test_unknown_model_is_an_http_verdict(served, capsys):
    url, _ = served
    code, report = _json_smoke(capsys, url, "/nonexistent/model")
    assert code == 1
    assert {v["check"] for v in report["verdicts"]} == {"http"}


def test_api_key_file_is_sent_and_bad_files_are_refused(served, capsys, tmp_path):
    url, models = served
    key = tmp_path / "api-key"
    key.write_text("secret\n")
    code = main(["smoke", url, "--model", models["bang"], "--max-tokens", "48", "--api-key-file", str(key), "--json"])
    assert code == 1 and json.loads(capsys.readouterr().out)["verdicts"][0]["check"] == "failure-text"
    key.write_text("")
    assert main(["smoke", url, "--api-key-file", str(key)]) == 2
    assert main(["bench", url, "--api-key-file", str(tmp_path / "missing")]) == 2
    assert "hint:" in capsys.readouterr().err


@pytest.fixture(scope="module")
def bench_serving(pypi_file, tmp_path_factory):
    """The real sglang 0.5.9 wheel unpacked into a directory for PYTHONPATH: `python -m sglang.bench_serving` runs
    with this interpreter and the test extra's torch and transformers (no sglang dependency is installed)."""
    for module in ("pybase64", "aiohttp", "requests", "IPython", "datasets"):
        pytest.importorskip(module, reason="bench_serving needs the test-server extra (pybase64, aiohttp, ...)")
    site = tmp_path_factory.mktemp("sglang")
    with zipfile.ZipFile(pypi_file("sglang", "0.5.9", "sglang-0.5.9-py3-none-any.whl")) as zf:
        zf.extractall(site)
    return str(site)


def _bench(monkeypatch, capsys, bench_serving, *argv):
    monkeypatch.setenv("PYTHONPATH", bench_serving)
    code = main(["bench", *argv])
    return code, capsys.readouterr()


@pytest.mark.network
def test_bench_runs_bench_serving_at_every_level_and_keeps_its_results(served, bench_serving, monkeypatch, capsys,
                                                                       tmp_path):
    """Two levels of the real bench_serving; the shipped baseline, broken, fails only after the results are printed
    and written (it applies to the default target's model only, so it is read after the sweep)."""
    url, models = served
    broken = tmp_path / "baseline.json"
    broken.write_text('{"target": "t"}')
    monkeypatch.setattr(baseline, "DEFAULT_BASELINE", broken)
    out, png = tmp_path / "bench.json", tmp_path / "bench.png"
    # Chat: the template ends every prompt alike, so each answer is the fluent sequence, shorter than asked.
    length = verify_server.fluent_length() + 20
    code, printed = _bench(monkeypatch, capsys, bench_serving, url, "--model", models["fluent"], "--api", "chat",
                           "--concurrency", "1,2", "--requests", "2", "--input-len", "16", "--output-len", str(length),
                           "--len-dist", "uniform", "--out", str(out), "--plot", str(png))
    assert code == ExitCode.USAGE, printed.err
    result = json.loads(out.read_text())
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert result["client"] == "sglang.bench_serving" and "baseline.json" in result["baseline_error"]
    assert [lv["concurrency"] for lv in result["levels"]] == [1, 2]
    for level in result["levels"]:
        assert level["ok"] == level["requests"] == 2 and level["errors"] == level["broken"] == 0
        assert 0 < level["output_tokens"] < level["output_tokens_asked"]
        assert level["ttft_s"]["p50"] > 0 and level["decode_tok_s"]["p50"] > 0
    assert result["answers"]["judged"] == 4 and result["answers"]["short"] is True
    assert "TTFT p50 ms" in printed.out and "the answers were shorter than asked" in printed.out
    # A line as each level starts and ends; the baseline's error after them.
    steps = [line for line in printed.err.splitlines() if line.startswith("bench: c=")]
    assert len(steps) == 4 and steps[1].startswith("bench: c=1: 2/2 ok")
    assert printed.err.index("error: ") > printed.err.index("bench: c=2: 2/2 ok")


@pytest.mark.network
def test_bench_fails_on_runs_of_exclamation_marks(served, bench_serving, monkeypatch, capsys):
    url, models = served
    code, printed = _bench(monkeypatch, capsys, bench_serving, url, "--model", models["bang"], "--concurrency", "2",
                           "--requests", "2", "--input-len", "8", "--output-len", "32", "--ignore-eos", "--json")
    assert code == ExitCode.CHECK_FAILED
    answers = json.loads(printed.out)["answers"]
    assert answers["judged"] == answers["broken"] == 2
    assert answers["findings"]["char-run"] == answers["findings"]["failure-text"] == 2
    assert "!!!!" in answers["samples"][0]


@pytest.mark.network
def test_a_level_past_its_timeout_is_ended_and_the_sweep_kept(served, bench_serving, monkeypatch, capsys, tmp_path):
    """bench_serving waits hours for an answer: bench ends its process group at --timeout, and says so."""
    url, models = served

    def full_disk(path, data):  # the disk fills meanwhile: the results still reach stdout, then both errors
        raise fileio.write_error(fileio.Path(path), OSError(28, "No space left on device"))

    monkeypatch.setattr(commands, "atomic_write_json", full_disk)
    code, printed = _bench(monkeypatch, capsys, bench_serving, url, "--model", models["fluent"], "--concurrency", "1",
                           "--requests", "1", "--timeout", "1", "--json", "--out", str(tmp_path / "bench.json"))
    assert code == ExitCode.CHECK_FAILED
    assert "bench_serving at c=1 did not finish within --timeout 1 s" in printed.err and "hint: " in printed.err
    assert "No space left on device" in printed.err
    result = json.loads(printed.out)
    assert result["levels"] == [] and "did not finish" in result["error"]

