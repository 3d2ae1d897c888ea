"""`blackwell-stack bench` beside SGLang's own client, one level at a time, on one server.

    python benchmarks/sglang-gpu/bench_pair.py URL MODEL_DIR OUT_DIR [--levels 1,8,32,128]
        [--input-len WORDS] [--output-len TOKENS] [--requests-per-stream N]

For each concurrency level: `blackwell-stack bench` (warmed up at that level), then
`python -m sglang.bench_serving --backend sglang-oai` on the same prompts' length in tokens (the
mean prompt_tokens the server reported to bench), the same output length, ignore_eos on both,
the same number of requests, warmed up with as many requests as the level's concurrency. SGLang's
radix cache is emptied before each client's run, and bench_serving's dataset is shuffled with the
level's own seed, so that neither client is served from prefills made for the other. Each
client runs as its own process; its CPU time (user + system, from the kernel's rusage of the
child) is what the client spent. Writes OUT_DIR/pair.json (both clients' figures per level) and
each client's own output files.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def _cpu_s(pid: int) -> float | None:
    """The process's own CPU time so far (user + system, /proc/PID/stat fields 14 and 15)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_measured(argv: list[str], log: Path, timeout: float, start_marker: str | None = None,
                 end_marker: str | None = None) -> dict:
    """Run argv as a child, its output to log; its wall time, its whole CPU time, and the CPU time it spent between
    the lines that mark its measured window (after its warm-up, until its result)."""
    started = time.monotonic()
    marks: dict[str, float | None] = {}
    with open(log, "w") as out:
        child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert child.stdout is not None
        for line in child.stdout:
            out.write(line)
            if start_marker and start_marker in line and "start" not in marks:
                marks["start"] = _cpu_s(child.pid)
            if end_marker and end_marker in line and "end" not in marks:
                marks["end"] = _cpu_s(child.pid)
            if time.monotonic() - started > timeout:
                child.kill()
        marks["exit"] = _cpu_s(child.pid)  # still readable: the child is not reaped yet
        code = child.wait()
    wall = time.monotonic() - started
    window = (marks["end"] - marks["start"]) if marks.get("start") is not None and marks.get("end") is not None \
        else None
    return {"exit_code": code, "process_wall_s": round(wall, 3),
            "process_cpu_s": round(marks["exit"], 3) if marks.get("exit") is not None else None,
            "window_cpu_s": round(window, 3) if window is not None else None}


def flush_cache(url: str) -> str:
    """Empty SGLang's radix cache (its /flush_cache endpoint), so that no client's prompts are served from
    another's prefills: bench_serving shuffles its dataset with the same seed at every level, so without this
    each level's first requests were the level before's, already cached (the fourth session)."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url + "/flush_cache", method="POST"), timeout=60) as r:
            return f"{r.status}"
    except OSError as exc:
        return f"failed: {exc}"


def sharegpt_file(path: Path, count: int, words: int) -> None:
    """Prompts in ShareGPT's shape for bench_serving's `random` dataset (it repeats and cuts their tokens to the
    asked length), made of bench's own prompt words; no download."""
    sys.path.insert(0, str(ROOT / "src"))
    from blackwell_stack.verify.bench import make_prompt

    rng = random.Random(7)
    rows = [{"conversations": [{"from": "human", "value": make_prompt(rng, words)},
                               {"from": "gpt", "value": make_prompt(rng, 64)}]} for _ in range(count)]
    path.write_text(json.dumps(rows))


def ours(url: str, model: str, out: Path, c: int, n: int, words: int, output_len: int, ignore_eos: bool) -> dict:
    result_file = out / f"bench-c{c}.json"
    argv = [sys.executable, "-m", "blackwell_stack", "bench", url, "--model", model, "--concurrency", str(c),
            "--requests", str(n), "--input-len", str(words), "--output-len", str(output_len),
            *(["--ignore-eos"] if ignore_eos else []), "--warmup", "1", "--timeout", "300", "--json", "--out", str(result_file)]
    measured = run_measured(argv, out / f"bench-c{c}.log", timeout=900)
    data = json.loads(result_file.read_text()) if result_file.is_file() else {}
    level = (data.get("levels") or [{}])[0]
    if level.get("client_cpu_share") is not None and level.get("wall_s"):
        measured["window_cpu_s"] = round(level["client_cpu_share"] * level["wall_s"], 3)  # the level's own clock
    prompt_tokens = [r["prompt_tokens"] for r in level.get("per_request", []) if r.get("prompt_tokens")]
    return {**measured, "output_tok_s": level.get("output_tok_s"), "output_tokens": level.get("output_tokens"),
            "requests": level.get("requests"), "errors": level.get("errors"), "wall_s": level.get("wall_s"),
            "client_cpu_share": level.get("client_cpu_share"), "ttft_p50_s": (level.get("ttft_s") or {}).get("p50"),
            "itl_p50_s": (level.get("itl_s") or {}).get("p50"),
            "mean_prompt_tokens": round(sum(prompt_tokens) / len(prompt_tokens)) if prompt_tokens else None}


def theirs(url: str, model: str, out: Path, c: int, n: int, input_tokens: int, output_len: int, dataset: Path,
           ignore_eos: bool) -> dict:
    result_file = out / f"bench_serving-c{c}.jsonl"
    argv = [sys.executable, "-m", "sglang.bench_serving", "--backend", "sglang-oai", "--base-url", url,
            "--model", model, "--tokenizer", model, "--dataset-name", "random", "--dataset-path", str(dataset),
            "--random-input-len", str(input_tokens), "--random-output-len", str(output_len),
            "--random-range-ratio", "1.0", "--num-prompts", str(n), "--max-concurrency", str(c),
            "--warmup-requests", str(c), "--seed", str(c), "--output-file", str(result_file), "--disable-tqdm",
            *([] if ignore_eos else ["--disable-ignore-eos"])]
    measured = run_measured(argv, out / f"bench_serving-c{c}.log", timeout=900,
                            start_marker="Starting main benchmark run", end_marker="Serving Benchmark Result")
    lines = result_file.read_text().splitlines() if result_file.is_file() else []
    data = json.loads(lines[-1]) if lines else {}
    return {**measured, "output_tok_s": data.get("output_throughput"), "output_tokens": data.get("total_output_tokens"),
            "requests": data.get("completed"), "wall_s": data.get("duration"),
            "ttft_p50_s": (data.get("median_ttft_ms") or 0) / 1000 or None,
            "itl_p50_s": (data.get("median_itl_ms") or 0) / 1000 or None}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("model")
    p.add_argument("out", type=Path)
    p.add_argument("--levels", default="1,8,32,128")
    p.add_argument("--input-len", type=int, default=512, help="bench's prompt length in words")
    p.add_argument("--output-len", type=int, default=256)
    p.add_argument("--requests-per-stream", type=int, default=8, help="requests per level: this x concurrency (>= 16)")
    p.add_argument("--no-ignore-eos", action="store_true", help="for servers that refuse ignore_eos (transformers serve)")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    dataset = args.out / "prompts-sharegpt.json"
    sharegpt_file(dataset, 2048, args.input_len)
    url = args.url.rstrip("/")
    results = []
    for c in (int(x) for x in args.levels.split(",")):
        n = max(16, args.requests_per_stream * c)
        flushed = [flush_cache(url)]
        mine = ours(url + "/v1", args.model, args.out, c, n, args.input_len, args.output_len, not args.no_ignore_eos)
        tokens = mine["mean_prompt_tokens"] or args.input_len
        flushed.append(flush_cache(url))
        other = theirs(url, args.model, args.out, c, n, tokens, args.output_len, dataset, not args.no_ignore_eos)
        row = {"concurrency": c, "requests": n, "prompt_tokens": tokens, "cache_flushed": flushed, "bench": mine,
               "bench_serving": other}
        if mine["output_tok_s"] and other["output_tok_s"]:
            row["throughput_ratio"] = round(mine["output_tok_s"] / other["output_tok_s"], 3)
        for side in ("bench", "bench_serving"):
            s = row[side]
            if s.get("output_tokens") and s.get("window_cpu_s") is not None:
                s["client_cpu_ms_per_1k_tokens"] = round(1e6 * s["window_cpu_s"] / s["output_tokens"], 2)
        results.append(row)
        (args.out / "pair.json").write_text(json.dumps({"url": url, "model": args.model, "levels": results}, indent=2))
        print(json.dumps({k: row.get(k) for k in ("concurrency", "throughput_ratio")}
                         | {"bench": mine["output_tok_s"], "bench_serving": other["output_tok_s"]}), flush=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
