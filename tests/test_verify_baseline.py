"""Percentiles, baselines (the shipped default and bad files), and the plan section."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from blackwell_stack.errors import DataError
from blackwell_stack.verify import baseline, bench, client, plan


def test_default_baseline_holds_the_seeds_figures():
    base = baseline.load(baseline.DEFAULT_BASELINE)
    by_metric = {e.metric: e for e in base.expectations}
    assert by_metric["decode_tok_s.p50"].value == 172 and by_metric["decode_tok_s.p50"].concurrency == 1
    assert by_metric["output_tok_s"].value == 2100 and by_metric["output_tok_s"].relation == "at_least"
    assert base.matches_model("Qwen/Qwen3.5-397B-A17B-NVFP4")
    assert base.matches_model("nvidia/Qwen3.5-397B-A17B-NVFP4")
    assert base.matches_model("/models/qwen3.5-397b-a17b-nvfp4/")
    assert not base.matches_model("Qwen/Qwen3-0.6B")


def _level(c, tok_s, decode_p50):
    return {"concurrency": c, "output_tok_s": tok_s, "decode_tok_s": {"p50": decode_p50}}


def test_compare_statuses():
    base = baseline.load(baseline.DEFAULT_BASELINE)
    rows = baseline.compare(base, [_level(1, 170, 171.0), _level(32, 1500, 60.0), _level(64, 2300, 40.0)])
    single, high = rows
    assert single["status"] == "ok" and single["measured"] == 171.0
    assert high["status"] == "ok" and high["at_concurrency"] == 64 and high["measured"] == 2300
    rows = baseline.compare(base, [_level(1, 70, 72.0), _level(128, 900, 10.0)])
    assert [r["status"] for r in rows] == ["below", "below"]
    rows = baseline.compare(base, [_level(8, 900, 100.0)])
    assert [r["status"] for r in rows] == ["not measured", "not measured"]


@pytest.mark.parametrize(
    "data,field",
    [
        ({"target": "t", "model": "m", "source": "s"}, "expectations"),
        ({"target": "t", "model": "m", "source": "s", "tolerance": 2, "expectations": []}, "tolerance"),
        (
            {"target": "t", "model": "m", "source": "s", "expectations": [{"name": "x", "metric": "output_tok_s", "value": 1, "relation": "near", "concurrency": 1}]},
            "relation",
        ),
        (
            {"target": "t", "model": "m", "source": "s", "expectations": [{"name": "x", "metric": "output_tok_s", "value": -1, "relation": "about", "concurrency": 1}]},
            "value",
        ),
    ],
)
def test_bad_baseline_names_the_field(tmp_path, data, field):
    path = tmp_path / "b.json"
    path.write_text(json.dumps(data))
    with pytest.raises(DataError) as err:
        baseline.load(path)
    assert err.value.field == field and str(path) in str(err.value)


def test_missing_baseline_file(tmp_path):
    with pytest.raises(DataError) as err:
        baseline.load(tmp_path / "none.json")
    assert "--baseline none" in err.value.hint


def test_plan_section_names_the_default_target():
    section = plan.plan_section([])
    assert section.key == "verify"
    smoke, gate, bench = section.commands
    assert smoke.startswith("blackwell-stack smoke http://127.0.0.1:30000 --model ")
    assert gate.startswith("blackwell-stack accuracy http://127.0.0.1:30000 --model ")
    assert "bench http://127.0.0.1:30000" in bench and "--concurrency 1,8,32,64,128" in bench
    model = next(i.value for i in section.items if i.name == "model")
    assert model.endswith("Qwen3.5-397B-A17B-NVFP4")


@pytest.mark.proc
def test_smoke_module_parses(nix, repo):
    import subprocess

    result = subprocess.run(
        [nix.binary, "--parse", str(repo / "modules" / "sglang-smoke.nix")], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_a_bench_serving_result_gives_the_figures_the_baseline_names():
    """bench_serving's result line (its field names in sglang 0.5.9's bench_serving.py) read into a level: the seed's
    baseline compares decode_tok_s.p50 (one token per median TPOT) and output_tok_s (re-tokenized tokens)."""
    config = bench.BenchConfig(concurrencies=(1, 32), requests_per_level=2)
    data = {"completed": 2, "duration": 2.0, "total_output_tokens": 512, "total_output_tokens_retokenized": 500,
            "median_tpot_ms": 5.0, "median_ttft_ms": 40.0, "p99_ttft_ms": 90.0, "mean_ttft_ms": 50.0,
            "generated_texts": ["A sound answer about the weather today.", "!" * 40], "errors": ["", ""]}
    levels = [bench.level_result(data, 1, config), bench.level_result(data | {"duration": 0.2}, 32, config)]
    assert levels[0]["decode_tok_s"]["p50"] == 200.0 and levels[0]["ttft_s"]["p50"] == 0.04
    assert levels[0]["broken"] == 1 and levels[0]["findings"] == {"failure-text": 1, "char-run": 1, "low-diversity": 1}
    rows = {r["name"]: r for r in baseline.compare(baseline.load(baseline.DEFAULT_BASELINE), levels)}
    assert rows["single-request decode"]["status"] == "above"  # 200 against about 172
    assert rows["high-concurrency throughput"]["measured"] == 2500.0 and rows["high-concurrency throughput"]["status"] == "ok"


def test_bench_serving_is_asked_for_the_lengths_and_warm_up_bench_promises():
    config = bench.BenchConfig(input_len=100, output_len=10, len_dist="uniform", range_ratio=0.5, warmup=2)
    argv = bench.bench_serving_argv("python", client.Endpoint.parse("http://h:1/v1"), "m", config, 8, Path("o"))
    option = dict(zip(argv[3::2], argv[4::2]))  # after `python -m sglang.bench_serving`, options and values
    assert option["--base-url"] == "http://h:1" and option["--dataset-name"] == "random-ids"
    # bench_serving draws each length from [len * ratio, len]: 50..150 prompt tokens, 5..15 output tokens.
    assert option["--random-input-len"] == "150" and option["--random-output-len"] == "15"
    assert float(option["--random-range-ratio"]) == pytest.approx(1 / 3)
    assert option["--warmup-requests"] == "16" and option["--num-prompts"] == "32" and option["--max-concurrency"] == "8"
    assert argv[-1] == "--disable-ignore-eos"
