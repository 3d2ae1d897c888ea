"""CLI commands of the verify area: `smoke`, `bench`, (accuracy_command.py) `accuracy` and (acceptance_command.py)
`acceptance`."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import asdict
from typing import TextIO

from blackwell_stack import output
from blackwell_stack.argtypes import non_negative_int, positive_float, positive_int
from blackwell_stack.errors import ExitCode, StackError
from blackwell_stack.fileio import atomic_write_json, check_output_path
from blackwell_stack.sglang_python import check_sglang
from blackwell_stack.verify import acceptance_command, accuracy_command, api_key, client, degeneracy
from blackwell_stack.verify import baseline as baseline_mod
from blackwell_stack.verify import bench as bench_mod
from blackwell_stack.verify import smoke as smoke_mod
from blackwell_stack.verify.plot import require_matplotlib, write_plot


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "smoke",
        help="ask fixed prompts at temperature 0 and fail on garbage output",
        description="Ask fixed chat and completion prompts at temperature 0, streamed and not, and fail (exit 1) on "
        "the reference deployment's own failure text (\"NaN happened\", runs of '!': verify/failure-text.json) in an "
        "answer's text, finish reason or matched_stop, empty/null content, a finish reason other than stop/length, "
        "degenerate text (long character runs, looping phrases, low character diversity, U+FFFD), a connection "
        "dropped mid-answer, HTTP/protocol errors, and on answers that miss what any working model writes at "
        "temperature 0 (Paris, the digits of a count) or that another prompt got too. --timeout bounds every "
        "request, the model listing included; after a request that gets no answer in time, the rest are not asked.",
    )
    p.add_argument("url", help="server base URL, e.g. http://127.0.0.1:30000 (the /v1 prefix is optional)")
    p.add_argument("--model", help="model name to ask for (default: the first one /v1/models lists)")
    p.add_argument("--max-tokens", type=positive_int, default=smoke_mod.DEFAULT_MAX_TOKENS, help="tokens per answer (default %(default)s)")
    p.add_argument("--timeout", type=positive_float, default=smoke_mod.DEFAULT_TIMEOUT_S,
                   help="seconds for each request, the model listing included (default %(default)s)")
    api_key.add_options(p)
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=cmd_smoke)

    b = sub.add_parser(
        "bench",
        help="concurrency sweep with SGLang's bench_serving: throughput, TTFT, inter-token latency",
        description="Run SGLang's own client (`python -m sglang.bench_serving`, with --python) once per concurrency "
        "level, warmed up at that level, on random token prompts, and report output tok/s, per-request decode "
        "tok/s, TTFT and ITL percentiles and errors; output tokens are bench_serving's re-tokenized count. Every "
        "answer is judged after its level: garbage fails the run (exit 1). The shipped baseline (the seed's "
        "figures) is compared when the model is the default target's. --timeout bounds each level's run.",
    )
    b.add_argument("url", help="server base URL, e.g. http://127.0.0.1:30000")
    b.add_argument("--model", help="model name (default: the first one /v1/models lists)")
    b.add_argument("--concurrency", default=",".join(map(str, bench_mod.DEFAULT_CONCURRENCY)), help="comma-separated levels (default %(default)s)")
    b.add_argument("--requests", type=positive_int, help="requests per level (default: 4 x concurrency, at least 8)")
    b.add_argument("--input-len", type=positive_int, default=256, help="prompt tokens (default %(default)s)")
    b.add_argument("--output-len", type=positive_int, default=256, help="max_tokens per request (default %(default)s)")
    b.add_argument("--len-dist", choices=("fixed", "uniform"), default="fixed", help="fixed lengths, or uniform in len x [1-r, 1+r]")
    b.add_argument("--range-ratio", type=float, default=0.5, help="r of --len-dist uniform (default %(default)s)")
    b.add_argument("--api", choices=("completion", "chat"), default="completion", help="endpoint to load (default %(default)s)")
    b.add_argument("--ignore-eos", action="store_true", help="send ignore_eos (SGLang/vLLM) so every request makes --output-len tokens")
    b.add_argument("--seed", type=int, default=0, help="seed of the prompts and sampled lengths")
    b.add_argument("--timeout", type=positive_float, default=bench_mod.BenchConfig.timeout_s,
                   help="seconds for each level's bench_serving run, start-up and warm-up included (default %(default)s)")
    b.add_argument("--warmup", type=non_negative_int, default=1,
                   help="unmeasured rounds before each level, each as many requests at once as the level's concurrency "
                   "(default %(default)s; 0: none)")
    b.add_argument("--tokenizer", help="the tokenizer bench_serving makes prompts with and counts tokens with: a model "
                   "directory or Hugging Face name (default: the model name)")
    b.add_argument("--python", default=sys.executable,
                   help="the Python that has sglang: the serving venv's bin/python (default: this one)")
    b.add_argument("--baseline", help="baseline JSON to compare with, or 'none' (default: the shipped baseline when "
                   "the model is the default target's)")
    b.add_argument("--fail-below-baseline", action="store_true", help="exit 1 when a figure is below its baseline")
    b.add_argument("--out", help="write the full result as JSON to this file")
    b.add_argument("--plot", help="write a PNG of throughput and latency against concurrency to this file")
    api_key.add_options(b)
    b.add_argument("--json", action="store_true", help="print the result as JSON instead of tables")
    b.set_defaults(func=cmd_bench)
    accuracy_command.register(sub)
    acceptance_command.register(sub)


# ---------------------------------------------------------------- smoke


def cmd_smoke(args: argparse.Namespace) -> int:
    endpoint = client.Endpoint.parse(args.url, api_key.from_args(args))
    model = args.model or client.first_model_id(endpoint, timeout=args.timeout)
    report = smoke_mod.run_smoke(endpoint, model, max_tokens=args.max_tokens, timeout=args.timeout,
                                 on_step=_smoke_step(sys.stderr))
    if args.json:
        output.dump_json(report.to_json())
    else:
        print_smoke(report)
    return int(ExitCode.OK if report.ok else ExitCode.CHECK_FAILED)


def _smoke_step(err: TextIO):
    """What smoke shows while it waits: the request it is on (a terminal), or a line per answer."""
    terminal = err.isatty()

    def step(label: str, answer: smoke_mod.Answer | None) -> None:
        if answer is None:
            if terminal:
                print(f"\rsmoke: asking {label} ...\x1b[K", end="", file=err, flush=True)
            return
        result = "ok" if not answer.verdicts else "FAIL " + ", ".join(sorted({v.check for v in answer.verdicts}))
        start, clear = ("\r", "\x1b[K") if terminal else ("", "")
        print(f"{start}smoke: {label}: {result} ({answer.seconds:.1f} s){clear}", file=err, flush=True)

    return step


def print_smoke(report: smoke_mod.SmokeReport) -> None:
    output.heading(f"smoke: {report.model} at {report.url}")
    rows = [[a.prompt, a.api, a.mode, "ok" if not a.verdicts else "FAIL", a.finish_reason, a.completion_tokens,
             "-" if a.text is None else degeneracy.excerpt(a.text, width=40)] for a in report.answers]
    output.table(["prompt", "api", "mode", "result", "finish", "tokens", "text"], rows)
    if report.ok:
        print(f"\nsmoke passed: {len(report.answers)} answers, no garbage found, the expected content in each")
        return
    output.heading("verdicts")
    not_asked = [v for v in report.verdicts if v.check == "not-asked"]
    for v in report.verdicts:
        if v.check != "not-asked":
            print(f"FAIL {v.prompt} ({v.mode}) {v.check}: {v.detail}\n     text: {v.excerpt}")
    if not_asked:
        print(f"FAIL {len(not_asked)} answer(s) {not_asked[0].detail}")
    print(f"\nsmoke failed: {len(report.verdicts)} verdict(s) on {sum(1 for a in report.answers if a.verdicts)} of "
          f"{len(report.answers)} answers")


# ---------------------------------------------------------------- bench


def cmd_bench(args: argparse.Namespace) -> int:
    levels = bench_mod.parse_levels(args.concurrency, "--concurrency")
    if not 0 <= args.range_ratio < 1:
        raise StackError("--range-ratio must be in [0, 1)", "for example --range-ratio 0.5")
    config = bench_mod.BenchConfig(
        concurrencies=levels, requests_per_level=args.requests, input_len=args.input_len,
        output_len=args.output_len, len_dist=args.len_dist, range_ratio=args.range_ratio, api=args.api,
        ignore_eos=args.ignore_eos, seed=args.seed, timeout_s=args.timeout, warmup=args.warmup,
        tokenizer=args.tokenizer,
    )
    endpoint = client.Endpoint.parse(args.url, api_key.from_args(args))
    # Everything that could fail after the sweep is checked before it: the baseline, the output paths, matplotlib.
    given = None if (args.baseline or "none").lower() == "none" else baseline_mod.load(args.baseline)
    if args.out:
        check_output_path(args.out, "--out")
    if args.plot:
        check_output_path(args.plot, "--plot")
        require_matplotlib()
    check_sglang(args.python, None, "sglang.bench_serving")
    model = args.model or client.first_model_id(endpoint, timeout=min(args.timeout, client.LISTING_TIMEOUT_S))
    result, failure = _sweep(args.python, endpoint, model, config)
    # Nothing measured is lost to an error after it (a level that failed, a broken shipped baseline, a file that
    # cannot be written): the sweep's results are printed and written first, and the error comes after them.
    errors = [failure] if failure else []
    try:
        base = given
        if not args.baseline:  # the shipped baseline, when the model is the default target's
            base = baseline_mod.load(baseline_mod.DEFAULT_BASELINE)
            base = base if base.matches_model(model) else None
        if base is not None:
            result["baseline"] = {"file": str(base.path), "target": base.target, "source": base.source,
                                  "tolerance": base.tolerance,
                                  "comparison": baseline_mod.compare(base, result["levels"])}
    except StackError as exc:
        errors.append(exc)
        result["baseline_error"] = exc.message
    if args.json:
        output.dump_json(result)
    else:
        print_bench(result)
    written = _write_outputs(result, args)
    for error in errors:
        print(f"error: {error}", file=sys.stderr)  # with its hint
    if errors:
        return int(errors[0].code)
    if written is not None:
        return written
    # A failed request fails the run: figures of a server that answers 9 of 10 requests with HTTP 500 are not
    # its throughput. The table says how many failed at each level.
    if any(lv["errors"] for lv in result["levels"]):
        print(f"bench failed: {sum(lv['errors'] for lv in result['levels'])} request(s) got no answer "
              "(the errors above)", file=sys.stderr)
        return int(ExitCode.CHECK_FAILED)
    below = any(r["status"] == "below" for r in result.get("baseline", {}).get("comparison", []))
    failed = result["answers"]["broken"] or (args.fail_below_baseline and below)
    return int(ExitCode.CHECK_FAILED if failed else ExitCode.OK)


def _write_outputs(result: dict, args: argparse.Namespace) -> int | None:
    """Write --out and --plot; on failure say so on stderr and return the exit code (None when all went well)."""
    failed = None
    for path, write, label in ((args.out, atomic_write_json, "JSON"), (args.plot, write_plot, "plot")):
        if not path:
            continue
        try:
            write(path, result)
        except StackError as exc:
            print(f"error: {exc}", file=sys.stderr)
            failed = int(exc.code)
            continue
        print(f"{label}: {path}", file=sys.stderr if args.json else sys.stdout)
    return failed


def _sweep(python: str, endpoint: client.Endpoint, model: str,
           config: bench_mod.BenchConfig) -> tuple[dict, StackError | None]:
    """Every level in turn, a line on stderr as each starts and ends; the levels done, and the error that stopped
    the sweep (None when none did)."""
    levels: list[dict] = []
    failure = None
    for concurrency in config.concurrencies:
        label = f"c={concurrency}"
        print(f"bench: {label}: bench_serving, {config.requests_for(concurrency)} requests ...", file=sys.stderr,
              flush=True)
        try:
            level = bench_mod.run_level(python, endpoint, model, config, concurrency)
        except StackError as exc:
            failure = exc
            break
        broken = f", {level['broken']} broken answer(s)" if level["broken"] else ""
        print(f"bench: {label}: {level['ok']}/{level['requests']} ok{broken}, {level['output_tok_s']:.1f} output "
              f"tok/s, {level['wall_s']:.1f} s", file=sys.stderr, flush=True)
        levels.append(level)
    result = {"url": endpoint.base_url, "model": model, "client": "sglang.bench_serving", "config": asdict(config),
              "answers": _answers_summary(levels, config), "levels": levels}
    if failure is not None:
        result["error"] = failure.message
    return result, failure


def _answers_summary(levels: list[dict], config: bench_mod.BenchConfig) -> dict:
    """Answers judged over the whole sweep: broken ones (exit 1), and answers shorter than asked."""
    findings: Counter[str] = Counter()
    for lv in levels:
        findings.update(lv["findings"])
    made = sum(lv["output_tokens"] for lv in levels)
    asked = sum(lv["output_tokens_asked"] for lv in levels)
    return {
        "judged": sum(lv["ok"] for lv in levels),
        "broken": sum(lv["broken"] for lv in levels),
        "findings": dict(findings),
        "output_tokens": made,
        "output_tokens_asked": asked,
        "short": bool(asked) and made < asked * bench_mod.SHORT_ANSWERS_WARNING,
        "ignore_eos": config.ignore_eos,
        "samples": [s for lv in levels for s in lv["broken_samples"]][:5],
    }


def _print_answers(answers: dict) -> None:
    print(f"answers: {answers['judged']} judged; output tokens: {answers['output_tokens']} re-tokenized of "
          f"{answers['output_tokens_asked']} asked")
    if answers["short"]:
        note = (" although ignore_eos was sent: the server ignored it" if answers["ignore_eos"]
                else "; pass --ignore-eos for answers of full length")
        print("warning: the answers were shorter than asked: decode tok/s counts the asked length, and the "
              f"figures are for shorter answers{note}")
    if answers["broken"]:
        found = ", ".join(f"{name} {n}" for name, n in sorted(answers["findings"].items()))
        print(f"FAIL: {answers['broken']} broken answer(s) ({found}); the figures are not those of a working "
              f"server (`blackwell-stack smoke` shows the garbage)")
        for sample in answers["samples"]:
            print(f"  {sample}")


def _num(value, fmt: str = ".1f", scale: float = 1) -> str:
    return "-" if value is None else format(value * scale, fmt)


# The latency columns of the table, in milliseconds.
LATENCIES = (("ttft_s", "p50"), ("ttft_s", "p99"), ("itl_s", "p50"), ("itl_s", "p95"), ("itl_s", "p99"))


def print_bench(result: dict) -> None:
    cfg = result["config"]
    output.heading(f"bench: {result['model']} at {result['url']} ({cfg['api']}, {cfg['input_len']} tokens in, "
                   f"{cfg['output_len']} tokens out, {cfg['len_dist']} lengths; sglang.bench_serving)")
    rows = [[lv["concurrency"], f"{lv['ok']}/{lv['requests']}", lv["errors"], lv["broken"], _num(lv["output_tok_s"]),
             _num(lv["decode_tok_s"]["p50"]), *(_num(lv[metric].get(at), scale=1000) for metric, at in LATENCIES)]
            for lv in result["levels"]]
    output.table(["conc", "ok", "err", "bad", "out tok/s", "decode tok/s p50", "TTFT p50 ms", "p99", "ITL p50 ms",
                  "p95", "p99"], rows)
    _print_answers(result["answers"])
    for lv in result["levels"]:
        for sample in lv["error_samples"]:
            print(f"error at c={lv['concurrency']}: {sample}")
    base = result.get("baseline")
    if base:
        output.heading(f"baseline: {base['target']} ({base['file']})")
        output.table(
            ["expectation", "metric", "where", "baseline", "measured", "ratio", "status"],
            [[r["name"], r["metric"], r["where"], f"{r['relation']} {r['baseline']:g}", _num(r["measured"]),
              _num(r["ratio"], ".2f"), r["status"]] for r in base["comparison"]],
        )
        print(f"source: {base['source']}")
