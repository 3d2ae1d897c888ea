"""`bench`: a concurrency sweep run by SGLang's own client, `python -m sglang.bench_serving`.

Each level is one bench_serving run with the serving venv's interpreter: random token ids as prompts (`random-ids`:
nothing downloaded), a fixed request count, the level's concurrency, warmed up first at that concurrency (a first
batch of a new size, or a kernel compiled just in time, lands there, not in the figures: benchmarks/sglang-gpu/).
bench_serving waits up to six hours for a request (`AIOHTTP_TIMEOUT` in sglang/bench_serving.py), so each run is
bounded here, its whole process group ended when the bound passes.

What this adds: the sweep, the figures the seed's baseline names (baseline.py), and the garbage check of every
answer, read from the run's `--output-details` file after the level: a throughput figure means nothing if the
answers were garbage (the seed deployment streamed runs of `!` at full speed). bench_serving counts an answer as its
full requested length unless the server streams usage, which it is not asked for (bench_serving 0.5.9 fails on a
stream event without choices), so tokens are its re-tokenized count.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from blackwell_stack import inputfiles, proc
from blackwell_stack.argtypes import positive_int
from blackwell_stack.errors import CheckFailed, StackError
from blackwell_stack.verify import degeneracy
from blackwell_stack.verify.client import Endpoint

DEFAULT_CONCURRENCY = (1, 8, 32, 64, 128)
# Lines of bench_serving's output kept to show when a run fails.
LOG_TAIL_LINES = 30
# An answer that has fewer re-tokenized tokens than this share of what was asked makes a warning.
SHORT_ANSWERS_WARNING = 0.9
# Smoke's checks of an answer's text but `repeated-unit`: greedy decoding past the end of text (`--ignore-eos`) loops
# on a phrase even on a healthy model, and bench prompts are random tokens. bench_serving keeps no finish reason.
ANSWER_DETECTORS = tuple(d for d in degeneracy.TEXT_DETECTORS if d is not degeneracy.repeated_unit)


@dataclass
class BenchConfig:
    concurrencies: tuple[int, ...] = DEFAULT_CONCURRENCY
    requests_per_level: int | None = None  # default: 4 x concurrency, at least 8
    input_len: int = 256  # prompt tokens
    output_len: int = 256  # max_tokens
    len_dist: str = "fixed"  # or "uniform": each length drawn from [len*(1-r), len*(1+r)]
    range_ratio: float = 0.5
    api: str = "completion"  # or "chat"
    ignore_eos: bool = False  # SGLang/vLLM extension: always produce output_len tokens
    seed: int = 0
    timeout_s: float = 1800.0  # each level's bench_serving run, start-up and warm-up included
    warmup: int = 1  # warm-up rounds before each level, each `concurrency` requests at once
    tokenizer: str | None = None  # default: the model id (a directory, or a Hugging Face name)

    def requests_for(self, concurrency: int) -> int:
        return self.requests_per_level or max(8, 4 * concurrency)


def parse_levels(text: str, option: str) -> tuple[int, ...]:
    try:
        levels = tuple(positive_int(x) for x in text.split(",") if x.strip())
    except argparse.ArgumentTypeError:
        levels = ()
    if not levels:
        raise StackError(f"bad {option} {text!r}", "give comma-separated positive integers, e.g. 1,8,32,64,128")
    return levels


def _lengths(mean: int, config: BenchConfig) -> tuple[int, float]:
    """bench_serving's --random-*-len and --random-range-ratio for `mean`: it draws from [len*ratio, len]."""
    if config.len_dist == "fixed":
        return mean, 1.0
    r = config.range_ratio
    return int(mean * (1 + r)), (1 - r) / (1 + r)


def bench_serving_argv(python: str, endpoint: Endpoint, model: str, config: BenchConfig, concurrency: int,
                       output_file: Path) -> list[str]:
    input_len, ratio = _lengths(config.input_len, config)
    output_len, _ = _lengths(config.output_len, config)
    return [
        python, "-m", "sglang.bench_serving",
        "--backend", "sglang-oai-chat" if config.api == "chat" else "sglang-oai",
        "--base-url", endpoint.root, "--model", model, "--tokenizer", config.tokenizer or model,
        "--dataset-name", "random-ids", "--random-input-len", str(input_len), "--random-output-len", str(output_len),
        "--random-range-ratio", str(ratio), "--num-prompts", str(config.requests_for(concurrency)),
        "--max-concurrency", str(concurrency), "--warmup-requests", str(config.warmup * concurrency),
        # A seed of the level's own, and SGLang's radix cache emptied after the warm-up: bench_serving draws the
        # same prompts from the same seed, and a level would be served from the prefills of the level before
        # (benchmarks/sglang-gpu/README.md). The warm-up's prompt is the level's first; other servers ignore it.
        "--seed", str(config.seed + concurrency), "--flush-cache",
        "--output-file", str(output_file), "--output-details", "--disable-tqdm",
        *([] if config.ignore_eos else ["--disable-ignore-eos"]),
    ]


def run_level(python: str, endpoint: Endpoint, model: str, config: BenchConfig, concurrency: int) -> dict:
    """One level: bench_serving run within config.timeout_s, its result read back and its answers judged."""
    env = dict(os.environ)
    if endpoint.api_key:
        env["OPENAI_API_KEY"] = endpoint.api_key  # bench_serving's get_auth_headers()
    with tempfile.TemporaryDirectory(prefix="bench-") as work:
        output_file = Path(work) / "result.jsonl"
        argv = bench_serving_argv(python, endpoint, model, config, concurrency, output_file)
        tail: collections.deque[str] = collections.deque(maxlen=LOG_TAIL_LINES)
        code, _ = proc.run_group(argv, config.timeout_s, tail.append, env=env)
        where = f"bench_serving at c={concurrency}"
        shown = "\n".join(f"  | {line}" for line in tail)
        if code is None:
            raise CheckFailed(f"{where} did not finish within --timeout {config.timeout_s:g} s; its last lines:\n{shown}",
                              "check that the server answers (`blackwell-stack smoke`), or raise --timeout")
        if code != 0 or not output_file.is_file():
            raise CheckFailed(f"{where} failed (exit code {code}); its last lines:\n{shown}",
                              "check the URL, --model, --tokenizer and --python (drop --ignore-eos for servers "
                              "that reject it)")
        # Its one line holds every answer: bounded by what the level's answers can need.
        limit = (1 << 20) + config.requests_for(concurrency) * (config.output_len * 2 + 64) * 64
        text = inputfiles.read_text(output_file, limit=limit, what="bench_serving's result", errors="replace")
    try:
        data = json.loads(text.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise CheckFailed(f"{where} wrote no result", "run it by hand with -v to see why") from None
    return level_result(data, concurrency, config)


def _summary(data: dict, **fields: str) -> dict:
    """{name: data[key] in seconds} for each field given as name=key (in ms), None where bench_serving gave none."""
    return {name: data[key] * 1e-3 if type(data.get(key)) in (int, float) else None for name, key in fields.items()}


def level_result(data: dict, concurrency: int, config: BenchConfig) -> dict:
    """A level's figures from bench_serving's result (times in seconds), and its answers judged."""
    requests = config.requests_for(concurrency)
    errors = data.get("errors") or []
    ok = int(data.get("completed") or 0)
    wall = float(data.get("duration") or 0) or 1e-9
    tokens = int(data.get("total_output_tokens_retokenized") or 0)
    tpot = data.get("median_tpot_ms")
    judged = []
    for index, (text, error) in enumerate(zip(data.get("generated_texts") or [], errors)):
        if not error:
            text = text if isinstance(text, str) else None
            judged.append((index, degeneracy.failure_text(text) + degeneracy.inspect_text(text, ANSWER_DETECTORS)))
    return {
        "concurrency": concurrency, "requests": requests, "ok": ok, "errors": requests - ok, "wall_s": wall,
        "output_tokens": tokens, "output_tokens_asked": int(data.get("total_output_tokens") or 0),
        "output_tok_s": tokens / wall, "requests_per_s": ok / wall,
        "ttft_s": _summary(data, mean="mean_ttft_ms", p50="median_ttft_ms", p99="p99_ttft_ms"),
        "itl_s": _summary(data, mean="mean_itl_ms", p50="median_itl_ms", p95="p95_itl_ms", p99="p99_itl_ms"),
        "e2e_s": _summary(data, mean="mean_e2e_latency_ms", p50="median_e2e_latency_ms",
                          p90="p90_e2e_latency_ms", p99="p99_e2e_latency_ms"),
        # One token per TPOT, as bench_serving counts them (the asked length: see the module's docstring).
        "decode_tok_s": {"p50": 1000 / tpot if isinstance(tpot, (int, float)) and tpot > 0 else None},
        "error_samples": sorted({str(e).strip().splitlines()[-1][:300] for e in errors if e})[:5],
        "broken": sum(1 for _, f in judged if f),
        "findings": dict(collections.Counter(f.check for _, found in judged for f in found)),
        "broken_samples": [f"request {i}: {f[0].check}: {f[0].detail}: {f[0].excerpt}" for i, f in judged if f][:5],
    }
