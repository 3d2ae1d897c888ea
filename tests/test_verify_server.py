"""smoke and bench against a real OpenAI-compatible server: `transformers serve` on 127.0.0.1
with tiny models made by the test (tests/support/verify_server.py), nothing downloaded."""

from __future__ import annotations

import asyncio
import json

import pytest

for _module in ("torch", "transformers", "tokenizers", "fastapi", "uvicorn", "openai"):
    pytest.importorskip(_module, reason="the verify server tests need the test extra (torch, transformers[serving], tokenizers)")

from support import verify_server  # noqa: E402  (tests/ is on sys.path under pytest)

from blackwell_stack.cli import main  # noqa: E402
from blackwell_stack.verify import bench  # noqa: E402
from blackwell_stack.verify.openai_client import Endpoint, request_json  # noqa: E402

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


def test_bench_runs_every_level_and_counts_the_servers_tokens(served, capsys, tmp_path):
    url, models = served
    out, png = tmp_path / "bench.json", tmp_path / "bench.png"
    argv = ["bench", url, "--model", models["fluent"], "--concurrency", "1,2,4", "--requests", "4"]
    argv += ["--input-len", "16", "--output-len", "12", "--len-dist", "uniform", "--out", str(out), "--plot", str(png)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "token counts: server usage" in printed and "TTFT p50 ms" in printed
    result = json.loads(out.read_text())
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [lv["concurrency"] for lv in result["levels"]] == [1, 2, 4]
    assert result["token_source_is_server_usage"] is True
    assert result["answers"]["judged"] == 12 and result["answers"]["broken"] == 0
    assert "baseline" not in result  # not the default target's model

    # Replay every request without streaming: the server's usage for the same
    # prompt and max_tokens (greedy, so deterministic) must equal bench's count.
    endpoint = Endpoint.parse(url)
    config = bench.BenchConfig(
        concurrencies=(1, 2, 4), requests_per_level=4, input_len=16, output_len=12, len_dist="uniform"
    )
    for level in result["levels"]:
        assert level["requests"] == level["ok"] == 4 and level["errors"] == 0
        assert level["output_tokens"] == sum(r["completion_tokens"] for r in level["per_request"])
        assert level["ttft_s"]["count"] == 4 and level["itl_s"]["p99"] is not None
        planned = bench.plan_requests(config, level["concurrency"])
        for record in level["per_request"]:
            prompt, max_tokens = planned[record["index"]]
            assert record["max_tokens"] == max_tokens and record["token_source"] == "server usage"
            answer = asyncio.run(
                request_json(endpoint, "POST", "/completions",
                             {"model": models["fluent"], "prompt": prompt, "max_tokens": max_tokens, "temperature": 0},
                             timeout=120)
            )
            assert record["completion_tokens"] == answer["usage"]["completion_tokens"]
            assert record["prompt_tokens"] == answer["usage"]["prompt_tokens"]


def test_bench_duration_mode_and_chat_api(served, capsys, tmp_path):
    url, models = served
    out = tmp_path / "bench.json"
    argv = ["bench", url, "--model", models["fluent"], "--concurrency", "1,2", "--duration", "1", "--api", "chat"]
    argv += ["--input-len", "8", "--output-len", "8", "--warmup", "0", "--json", "--out", str(out)]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert result == json.loads(out.read_text())
    for level in result["levels"]:
        assert level["ok"] >= 1 and level["errors"] == 0 and level["output_tokens"] > 0


def test_bench_compares_with_an_explicit_baseline(served, capsys, tmp_path):
    url, models = served
    base = tmp_path / "baseline.json"
    base.write_text(json.dumps({
        "target": "tiny", "model": "random", "source": "test", "tolerance": 0.1,
        "expectations": [{"name": "impossible", "metric": "output_tok_s", "min_concurrency": 1, "value": 1e12, "relation": "at_least"}],
    }))
    argv = ["bench", url, "--model", models["fluent"], "--concurrency", "1", "--requests", "1", "--input-len", "4"]
    argv += ["--output-len", "4", "--baseline", str(base), "--fail-below-baseline"]
    assert main(argv) == 1
    printed = capsys.readouterr().out
    assert "impossible" in printed and "below" in printed


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


def test_bench_fails_on_runs_of_exclamation_marks(served, capsys):
    url, models = served
    argv = ["bench", url, "--model", models["bang"], "--concurrency", "1,2", "--requests", "2", "--input-len", "8"]
    argv += ["--output-len", "32", "--json"]
    assert main(argv) == 1
    answers = json.loads(capsys.readouterr().out)["answers"]
    assert answers["judged"] == answers["broken"] == 4
    assert answers["findings"]["char-run"] == answers["findings"]["failure-text"] == 4
    assert "!!!!" in answers["samples"][0]


def test_bench_reports_answers_that_stop_early(served, capsys):
    url, models = served
    # The chat template ends every prompt the same way, so each answer is the fluent
    # sequence from its start: fluent_length() tokens, then the end of text (which
    # transformers serve counts in usage.completion_tokens).
    length = verify_server.fluent_length() + 1
    argv = ["bench", url, "--model", models["fluent"], "--api", "chat", "--concurrency", "1", "--requests", "2"]
    argv += ["--input-len", "4", "--output-len", str(length + 20), "--warmup", "0"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert f"2 answer(s) ended before max_tokens (median {length} of {length + 20} tokens)" in printed
    assert "--ignore-eos" in printed


def test_bench_answers_of_the_endless_model_run_to_max_tokens(served, capsys):
    url, models = served
    argv = ["bench", url, "--model", models["endless"], "--concurrency", "2", "--requests", "4", "--input-len", "8"]
    argv += ["--output-len", "24", "--json"]
    assert main(argv) == 0
    answers = json.loads(capsys.readouterr().out)["answers"]
    assert answers["broken"] == answers["early_stops"] == 0
    assert answers["finish_reasons"] == {"length": 4}
