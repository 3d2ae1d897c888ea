"""`blackwell-stack bench` side by side with SGLang's own `bench_serving`, against one local server.

Question: does `bench` measure the same throughput as SGLang's own client,
and what does each client cost in CPU per streamed token?

Method (README.md beside this file has the results):
- One server for both: `transformers serve --continuous-batching` on CPU,
  127.0.0.1 (lenient_serve.py: it ignores the two fields bench_serving always
  sends and transformers serve refuses). The model is tests/verify_server.py's
  `endless` model: sound text that never ends early, so every answer has
  exactly max_tokens tokens and both clients count the same tokens (bench
  from the server's usage, bench_serving from the length it asked for).
- Same load: completions API, streamed, temperature 0, the same output length,
  prompts of the same length in tokens as the server counts them, the same
  concurrency and request count, one warm-up request each. bench_serving's
  random-ids prompts are runs of consecutive token ids sent as text; the
  server tokenizes that text again into more tokens than bench_serving counts
  (about 100 for 64 with this tokenizer), so bench's prompt words are sized
  to what the server sees (server_tokens_of_random_ids).
- Runs are interleaved (A B, then B A next round) so that a change in machine
  load hits both clients alike; each figure is the median over rounds.
- Throughput: each client's own figure of output tokens per second.
- Client CPU: user + system time of the client process (getrusage of the
  waited child). Each client runs with N and 2N requests; the difference in
  CPU over the difference in tokens is the CPU per token of streaming,
  without start-up costs (imports, tokenizer loading).

bench_serving runs in its own virtualenv (PyPI's sglang wheel without its GPU
dependencies, and the light packages its benchmark imports); see README.md.

    PYTHONPATH=src python benchmarks/bench-compare/run.py --bench-serving-python /path/to/venv/bin/python \\
        [--concurrency 1,8,32] [--output-len 128] [--input-tokens 64] [--rounds 5] [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "src"))

import verify_server  # noqa: E402

from blackwell_stack.verify import bench  # noqa: E402

# Continuous batching's KV cache blocks and tokens per step: enough for every stream here. The defaults size
# the cache and the attention mask from the machine's free memory: about 10 GB for a model this small.
CB_BLOCKS = 1024
CB_BATCH_TOKENS = 512


def child_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_client(argv: list[str], log: Path, env: dict | None = None) -> tuple[float, float]:
    """Run one client to its end; (wall seconds, CPU seconds of its process)."""
    cpu0, t0 = child_cpu_seconds(), time.perf_counter()
    with open(log, "wb") as out:
        code = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, env=env, timeout=3600).returncode
    wall, cpu = time.perf_counter() - t0, child_cpu_seconds() - cpu0
    if code != 0:
        raise RuntimeError(f"{argv[:4]} exited {code}; see {log}:\n{log.read_text()[-3000:]}")
    return wall, cpu


def server_tokens_of_random_ids(tokenizer_json: Path, length: int) -> float:
    """Tokens the server sees for bench_serving's random-ids prompts of `length` ids, on average.

    bench_serving picks a random offset o and sends the text of ids o, o+1, ...
    (mod the vocabulary), decoded with its special tokens; the server encodes
    that text again. The mean is over every offset.
    """
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_json))
    vocab = tok.get_vocab_size()
    counts = []
    for offset in range(vocab):
        text = tok.decode([(offset + j) % vocab for j in range(length)], skip_special_tokens=False)
        counts.append(len(tok.encode(text).ids))
    return statistics.mean(counts)


def words_for_tokens(tokenizer_json: Path, target: float, concurrency: int) -> int:
    """bench's --input-len (words) whose prompts average `target` tokens with this tokenizer."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_json))
    target = round(target)
    best, best_gap = 1, None
    for words in range(1, target + 1):
        config = bench.BenchConfig(concurrencies=(concurrency,), requests_per_level=16, input_len=words)
        prompts = [p for p, _ in bench.plan_requests(config, concurrency)]
        mean = statistics.mean(len(tok.encode(p).ids) for p in prompts)
        gap = abs(mean - target)
        if best_gap is None or gap < best_gap:
            best, best_gap = words, gap
        if mean > target:
            break
    return best


def tokenizer_for_old_transformers(model: Path, dest: Path) -> Path:
    """The model's tokenizer for bench_serving's transformers 4.x, which does not know the class name 5.x writes."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(model / "tokenizer.json", dest / "tokenizer.json")
    config = json.loads((model / "tokenizer_config.json").read_text())
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    (dest / "tokenizer_config.json").write_text(json.dumps(config))
    return dest


def start_server(work: Path) -> tuple[subprocess.Popen, str]:
    port = verify_server.free_port()
    log = open(work / "server.log", "wb")
    # One compute thread: the server keeps to one core, the clients and the rest of the machine have the other.
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, str(HERE / "lenient_serve.py"), "--host", "127.0.0.1", "--port", str(port),
                             "--device", "cpu", "--continuous-batching", "--cb-num-blocks", str(CB_BLOCKS),
                             "--cb-max-batch-tokens", str(CB_BATCH_TOKENS)],
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited: {(work / 'server.log').read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2):
                return proc, url
        except OSError:
            time.sleep(0.5)
    verify_server.end_process(proc)
    raise RuntimeError("the server did not become ready")


def ours(url: str, model: Path, c: int, n: int, words: int, out_len: int, work: Path, tag: str) -> dict:
    result = work / f"ours-{tag}.json"
    argv = [sys.executable, "-m", "blackwell_stack", "bench", url, "--model", str(model), "--concurrency", str(c),
            "--requests", str(n), "--input-len", str(words), "--output-len", str(out_len), "--warmup", "1",
            "--out", str(result), "--json"]
    wall, cpu = run_client(argv, work / f"ours-{tag}.log", env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    data = json.loads(result.read_text())
    level = data["levels"][0]
    return {
        "client": "blackwell-stack bench", "concurrency": c, "requests": n, "wall_s": wall, "cpu_s": cpu,
        "ok": level["ok"], "output_tokens": level["output_tokens"], "output_tok_s": level["output_tok_s"],
        "level_cpu_s": level["client_cpu_share"] * level["wall_s"],
        "prompt_tokens_mean": statistics.mean(r["prompt_tokens"] for r in level["per_request"] if r["ok"]),
        "broken_answers": data["answers"]["broken"], "early_stops": data["answers"]["early_stops"],
    }


def bench_serving(python: str, url: str, model: Path, tokenizer: Path, c: int, n: int, in_len: int, out_len: int,
                  work: Path, tag: str) -> dict:
    result = work / f"bench-serving-{tag}.jsonl"
    argv = [python, "-m", "sglang.bench_serving", "--backend", "sglang-oai", "--base-url", url, "--model", str(model),
            "--tokenizer", str(tokenizer), "--dataset-name", "random-ids", "--random-input-len", str(in_len),
            "--random-output-len", str(out_len), "--random-range-ratio", "1.0", "--num-prompts", str(n),
            "--max-concurrency", str(c), "--request-rate", "inf", "--warmup-requests", "1", "--disable-tqdm",
            "--seed", "1", "--output-file", str(result)]
    wall, cpu = run_client(argv, work / f"bench-serving-{tag}.log")
    data = json.loads(result.read_text().splitlines()[-1])
    return {
        "client": "sglang.bench_serving", "concurrency": c, "requests": n, "wall_s": wall, "cpu_s": cpu,
        "ok": data["completed"], "output_tokens": data["total_output_tokens"],
        "output_tok_s": data["output_throughput"], "prompt_tokens_mean": data["total_input_tokens"] / data["completed"],
    }


def summarize(runs: list[dict], concurrencies: list[int]) -> list[dict]:
    rows = []
    for c in concurrencies:
        row: dict = {"concurrency": c}
        for client in ("blackwell-stack bench", "sglang.bench_serving"):
            mine = [r for r in runs if r["client"] == client and r["concurrency"] == c]
            short = {r["round"]: r for r in mine if r["size"] == "N"}
            long = {r["round"]: r for r in mine if r["size"] == "2N"}
            per_token = [(long[k]["cpu_s"] - short[k]["cpu_s"]) / (long[k]["output_tokens"] - short[k]["output_tokens"])
                         for k in short if k in long and long[k]["output_tokens"] > short[k]["output_tokens"]]
            row[client] = {
                "output_tok_s_median": statistics.median(r["output_tok_s"] for r in mine),
                "output_tok_s_all": [round(r["output_tok_s"], 1) for r in mine],
                "cpu_us_per_token_median": statistics.median(per_token) * 1e6 if per_token else None,
                "cpu_us_per_token_all": [round(x * 1e6, 1) for x in per_token],
                "prompt_tokens_mean (the client's own count)": statistics.mean(r["prompt_tokens_mean"] for r in mine),
            }
        pairs = [(a, b) for a in runs for b in runs
                 if a["client"] == "blackwell-stack bench" and b["client"] == "sglang.bench_serving"
                 and a["concurrency"] == b["concurrency"] == c and a["round"] == b["round"] and a["size"] == b["size"]]
        ratios = [a["output_tok_s"] / b["output_tok_s"] for a, b in pairs]
        row["throughput_ratio_bench_over_bench_serving"] = {
            "median": statistics.median(ratios), "all": [round(x, 3) for x in ratios]}
        rows.append(row)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench-serving-python", required=True, help="python of the venv with sglang's bench_serving")
    parser.add_argument("--concurrency", default="1,8,32")
    parser.add_argument("--output-len", type=int, default=128)
    parser.add_argument("--input-tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=HERE / "results.json")
    args = parser.parse_args()
    concurrencies = [int(x) for x in args.concurrency.split(",")]
    work = Path(tempfile.mkdtemp(prefix="bench-compare-"))
    models = verify_server.make_models(work / "models")
    model = models["endless"]
    tokenizer = tokenizer_for_old_transformers(model, work / "tokenizer-4x")
    server_prompt_tokens = server_tokens_of_random_ids(model / "tokenizer.json", args.input_tokens)
    server, url = start_server(work)
    runs: list[dict] = []
    try:
        for rnd in range(args.rounds):
            for c in concurrencies:
                n = max(16, 2 * c)
                words = words_for_tokens(model / "tokenizer.json", server_prompt_tokens, c)
                order = ["ours", "bs"] if rnd % 2 == 0 else ["bs", "ours"]
                for size, count in (("N", n), ("2N", 2 * n)):
                    for who in order:
                        tag = f"r{rnd}-c{c}-{size}"
                        if who == "ours":
                            r = ours(url, model, c, count, words, args.output_len, work, tag)
                        else:
                            r = bench_serving(args.bench_serving_python, url, model, tokenizer, c, count,
                                              args.input_tokens, args.output_len, work, tag)
                        r.update(round=rnd, size=size)
                        runs.append(r)
                        print(f"round {rnd} c={c} {size}: {r['client']}: {r['output_tok_s']:.1f} tok/s, "
                              f"{r['output_tokens']} tokens, CPU {r['cpu_s']:.2f} s", flush=True)
    finally:
        verify_server.end_process(server)
    client_version = subprocess.run([args.bench_serving_python, "-c", "import sglang; print(sglang.__version__)"],
                                    capture_output=True, text=True).stdout.strip()
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": {"python": platform.python_version(), "processor": platform.machine(), "cpus": os.cpu_count(),
                    "load_average_at_end": os.getloadavg()},
        "server": f"transformers serve --continuous-batching --cb-num-blocks {CB_BLOCKS} --cb-max-batch-tokens "
                  f"{CB_BATCH_TOKENS} --device cpu, one thread "
                  "(benchmarks/bench-compare/lenient_serve.py), "
                  "tests/verify_server.py `endless` model",
        "bench_serving": f"sglang {client_version} (PyPI wheel) sglang.bench_serving --backend sglang-oai "
                         "--dataset-name random-ids --random-range-ratio 1.0 --request-rate inf",
        "settings": {"concurrency": concurrencies, "output_len": args.output_len, "input_tokens": args.input_tokens,
                     "server_side_prompt_tokens_of_bench_serving": round(server_prompt_tokens, 1),
                     "rounds": args.rounds, "requests": "N = max(16, 2 x concurrency), and 2N",
                     "server_threads": 1},
        "summary": summarize(runs, concurrencies),
        "runs": runs,
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result["summary"], indent=2))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    random.seed(0)
    raise SystemExit(main())
