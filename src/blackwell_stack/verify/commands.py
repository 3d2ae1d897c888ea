"""CLI commands of the verify area: `smoke`, `bench`, `accuracy` and (acceptance_command.py) `acceptance`."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict

from blackwell_stack import output
from blackwell_stack.argtypes import non_negative_int, positive_float, positive_int
from blackwell_stack.data.profile import DEFAULT_PROFILE
from blackwell_stack.errors import ExitCode, StackError
from blackwell_stack.fileio import atomic_write_json, check_output_path
from blackwell_stack.sglang_python import check_sglang
from blackwell_stack.verify import acceptance_command, accuracy, api_key, client, degeneracy, gsm8k_data
from blackwell_stack.verify import baseline as baseline_mod
from blackwell_stack.verify import bench as bench_mod
from blackwell_stack.verify import smoke as smoke_mod
from blackwell_stack.verify.plot import require_matplotlib, write_plot


def _server_arguments(p: argparse.ArgumentParser, func: Callable[[argparse.Namespace], int], json_help: str) -> None:
    """What every command that asks a server takes: its URL, the model to name, its key, and --json."""
    p.add_argument("url", help="server base URL, e.g. http://127.0.0.1:30000 (the /v1 prefix is optional)")
    p.add_argument("--model", help="model name to ask for (default: the first one /v1/models lists)")
    api_key.add_options(p)
    p.add_argument("--json", action="store_true", help=json_help)
    p.set_defaults(func=func)


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
    _server_arguments(p, cmd_smoke, "print the report as JSON")
    p.add_argument("--max-tokens", type=positive_int, default=smoke_mod.DEFAULT_MAX_TOKENS, help="tokens per answer (default %(default)s)")
    p.add_argument("--timeout", type=positive_float, default=smoke_mod.DEFAULT_TIMEOUT_S,
                   help="seconds for each request, the model listing included (default %(default)s)")

    b = sub.add_parser(
        "bench",
        help="concurrency sweep with SGLang's bench_serving: throughput, TTFT, inter-token latency",
        description="Run SGLang's own client (`python -m sglang.bench_serving`, with --python) once per concurrency "
        "level, warmed up at that level, on random token prompts, and report output tok/s, per-request decode "
        "tok/s, TTFT and ITL percentiles and errors; output tokens are bench_serving's re-tokenized count. Every "
        "answer is judged after its level: garbage fails the run (exit 1). The shipped baseline (the seed's "
        "figures) is compared when the model is the default target's. --timeout bounds each level's run.",
    )
    _server_arguments(b, cmd_bench, "print the result as JSON instead of tables")
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

    gate = accuracy.GateConfig  # whose defaults are the options'
    p = sub.add_parser(
        "accuracy",
        help="few-shot GSM8K against a server, and fail below the profile's accuracy threshold",
        description="Ask a fixed, seeded sample of GSM8K's test questions, few-shot as SGLang's own benchmark does "
        f"({gate.shots} solved examples of train, then \"Question: ...\\nAnswer:\"), at temperature 0 through "
        "/v1/completions, and grade the last number of each answer against the number after `####`. Fails (exit "
        "1) when the accuracy is below the profile's threshold (verify/gsm8k.json: each says where it comes from: "
        "a published figure, the same server's bf16-KV run, or a floor meant to catch garbage) or when a "
        "question got no answer within --timeout or the whole run's --run-timeout. The data (openai/grade-school-"
        "math at a pinned commit, by sha256) is downloaded once into the user cache ($BLACKWELL_STACK_CACHE, "
        "else $XDG_CACHE_HOME/blackwell-stack), or read from --data DIR.",
    )
    _server_arguments(p, cmd_accuracy, "print the result as JSON instead of text")
    p.add_argument("--profile", default=DEFAULT_PROFILE,
                   help="the profile whose threshold applies (default %(default)s)")
    p.add_argument("--min-accuracy", type=_fraction, help="the threshold to use instead of the profile's (a "
                   "fraction between 0 and 1, e.g. the same server's bf16-KV score minus its noise)")
    p.add_argument("--questions", type=positive_int, default=gate.questions,
                   help="questions asked, a seeded sample of the 1319 of test (default %(default)s)")
    p.add_argument("--seed", type=non_negative_int, default=gate.seed, help="seed of the sample (default %(default)s)")
    p.add_argument("--shots", type=positive_int, default=gate.shots, help="solved examples before each "
                   "question (default %(default)s)")
    p.add_argument("--concurrency", type=positive_int, default=gate.concurrency,
                   help="requests at once (default %(default)s)")
    p.add_argument("--max-tokens", type=positive_int, default=gate.max_tokens,
                   help="tokens per answer (default %(default)s)")
    p.add_argument("--timeout", type=positive_float, default=gate.timeout_s,
                   help="seconds for each request (default %(default)s)")
    p.add_argument("--run-timeout", type=positive_float, default=gate.run_timeout_s,
                   help="seconds for the whole run; questions not asked by then count as wrong (default %(default)s)")
    p.add_argument("--data", metavar="DIR", help="a directory holding GSM8K's train.jsonl and test.jsonl (checked "
                   "by sha256) instead of the user cache")
    p.add_argument("--progress-every", type=positive_int, default=25,
                   help="a progress line on stderr after every N answers (default %(default)s)")
    p.add_argument("--out", help="write the result as JSON to this file")
    acceptance_command.register(sub)


# ---------------------------------------------------------------- smoke


def cmd_smoke(args: argparse.Namespace) -> int:
    endpoint = client.Endpoint.parse(args.url, api_key.from_args(args))
    model = args.model or client.first_model_id(endpoint, timeout=args.timeout)
    terminal = sys.stderr.isatty()

    def step(label: str, answer: smoke_mod.Answer | None) -> None:
        """What smoke shows while it waits: the request it is on (a terminal), or a line per answer."""
        if answer is None:
            if terminal:
                print(f"\rsmoke: asking {label} ...\x1b[K", end="", file=sys.stderr, flush=True)
            return
        result = "ok" if not answer.verdicts else "FAIL " + ", ".join(sorted({v.check for v in answer.verdicts}))
        start, clear = ("\r", "\x1b[K") if terminal else ("", "")
        print(f"{start}smoke: {label}: {result} ({answer.seconds:.1f} s){clear}", file=sys.stderr, flush=True)

    report = smoke_mod.run_smoke(endpoint, model, max_tokens=args.max_tokens, timeout=args.timeout, on_step=step)
    if args.json:
        output.dump_json(report.to_json())
    else:
        print_smoke(report)
    return int(ExitCode.OK if report.ok else ExitCode.CHECK_FAILED)


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
    base = None if (args.baseline or "none").lower() == "none" else baseline_mod.load(args.baseline)
    if args.out:
        check_output_path(args.out, "--out")
    if args.plot:
        check_output_path(args.plot, "--plot")
        require_matplotlib()
    check_sglang(args.python, None, "sglang.bench_serving")
    model = args.model or client.first_model_id(endpoint, timeout=min(args.timeout, client.LISTING_TIMEOUT_S))
    result, errors = _sweep(args.python, endpoint, model, config)
    # Nothing measured is lost to an error after it (a level that failed, a broken shipped baseline, a file that
    # cannot be written): the sweep's results are printed and written first, and the error comes after them.
    try:
        if not args.baseline:  # the shipped baseline, when the model is the default target's
            shipped = baseline_mod.load(baseline_mod.DEFAULT_BASELINE)
            base = shipped if shipped.matches_model(model) else None
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
    for path, write, label in ((args.out, atomic_write_json, "JSON"), (args.plot, write_plot, "plot")):
        try:
            if path:
                write(path, result)
                print(f"{label}: {path}", file=sys.stderr if args.json else sys.stdout)
        except StackError as exc:  # the other output is still written
            errors.append(exc)
    for error in errors:
        print(f"error: {error}", file=sys.stderr)  # with its hint
    if errors:
        return int(errors[0].code)
    # A failed request fails the run: figures of a server that answers 9 of 10 requests with HTTP 500 are not
    # its throughput. The table says how many failed at each level.
    if any(lv["errors"] for lv in result["levels"]):
        print(f"bench failed: {sum(lv['errors'] for lv in result['levels'])} request(s) got no answer "
              "(the errors above)", file=sys.stderr)
        return int(ExitCode.CHECK_FAILED)
    below = any(r["status"] == "below" for r in result.get("baseline", {}).get("comparison", []))
    failed = result["answers"]["broken"] or (args.fail_below_baseline and below)
    return int(ExitCode.CHECK_FAILED if failed else ExitCode.OK)


def _sweep(python: str, endpoint: client.Endpoint, model: str,
           config: bench_mod.BenchConfig) -> tuple[dict, list[StackError]]:
    """Every level in turn, a line on stderr as each starts and ends; the levels done, and a list holding the
    error that stopped the sweep (empty when none did)."""
    levels: list[dict] = []
    errors: list[StackError] = []
    for concurrency in config.concurrencies:
        label = f"c={concurrency}"
        print(f"bench: {label}: bench_serving, {config.requests_for(concurrency)} requests ...", file=sys.stderr,
              flush=True)
        try:
            level = bench_mod.run_level(python, endpoint, model, config, concurrency)
        except StackError as exc:
            errors.append(exc)
            break
        broken = f", {level['broken']} broken answer(s)" if level["broken"] else ""
        print(f"bench: {label}: {level['ok']}/{level['requests']} ok{broken}, {level['output_tok_s']:.1f} output "
              f"tok/s, {level['wall_s']:.1f} s", file=sys.stderr, flush=True)
        levels.append(level)
    # The answers judged over the whole sweep: broken ones (exit 1), and answers shorter than asked.
    findings: Counter[str] = Counter()
    for lv in levels:
        findings.update(lv["findings"])
    made = sum(lv["output_tokens"] for lv in levels)
    asked = sum(lv["output_tokens_asked"] for lv in levels)
    answers = {
        "judged": sum(lv["ok"] for lv in levels), "broken": sum(lv["broken"] for lv in levels),
        "findings": dict(findings), "output_tokens": made, "output_tokens_asked": asked,
        "short": bool(asked) and made < asked * bench_mod.SHORT_ANSWERS_WARNING, "ignore_eos": config.ignore_eos,
        "samples": [s for lv in levels for s in lv["broken_samples"]][:5],
    }
    result = {"url": endpoint.base_url, "model": model, "client": "sglang.bench_serving", "config": asdict(config),
              "answers": answers, "levels": levels}
    if errors:
        result["error"] = errors[0].message
    return result, errors


def _num(value, fmt: str = ".1f", scale: float = 1) -> str:
    return "-" if value is None else format(value * scale, fmt)


def print_bench(result: dict) -> None:
    cfg = result["config"]
    output.heading(f"bench: {result['model']} at {result['url']} ({cfg['api']}, {cfg['input_len']} tokens in, "
                   f"{cfg['output_len']} tokens out, {cfg['len_dist']} lengths; sglang.bench_serving)")
    latencies = (("ttft_s", "p50"), ("ttft_s", "p99"), ("itl_s", "p50"), ("itl_s", "p95"), ("itl_s", "p99"))
    rows = [[lv["concurrency"], f"{lv['ok']}/{lv['requests']}", lv["errors"], lv["broken"], _num(lv["output_tok_s"]),
             _num(lv["decode_tok_s"]["p50"]), *(_num(lv[metric].get(at), scale=1000) for metric, at in latencies)]
            for lv in result["levels"]]
    output.table(["conc", "ok", "err", "bad", "out tok/s", "decode tok/s p50", "TTFT p50 ms", "p99", "ITL p50 ms",
                  "p95", "p99"], rows)
    answers = result["answers"]
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


# ---------------------------------------------------------------- accuracy


def _fraction(text: str) -> float:
    value = positive_float(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"{text} is not below 1: give a fraction, e.g. 0.85")
    return value


def cmd_accuracy(args: argparse.Namespace) -> int:
    endpoint = client.Endpoint.parse(args.url, api_key.from_args(args))
    if args.min_accuracy is not None:
        threshold = gsm8k_data.Threshold(args.profile, args.min_accuracy, "command-line",
                                         "--min-accuracy on the command line")
    else:
        threshold = gsm8k_data.threshold(args.profile)
    if args.out:
        check_output_path(args.out, "--out")
    train = gsm8k_data.load("train", args.data)
    test = gsm8k_data.load("test", args.data)
    model = args.model or client.first_model_id(endpoint, timeout=min(args.timeout, client.LISTING_TIMEOUT_S))
    config = accuracy.GateConfig(questions=args.questions, seed=args.seed, shots=args.shots,
                                 concurrency=args.concurrency, max_tokens=args.max_tokens, timeout_s=args.timeout,
                                 run_timeout_s=args.run_timeout)
    print(f"accuracy: {min(args.questions, len(test))} GSM8K questions, {args.concurrency} at a time, "
          f"at most {args.run_timeout:g} s ...", file=sys.stderr, flush=True)

    def progress(done: int, correct: int, total: int) -> None:
        if done % args.progress_every == 0 or done == total:
            print(f"accuracy: {done}/{total} done, {correct} correct", file=sys.stderr, flush=True)

    result = accuracy.run_gate(endpoint, model, train, test, config, threshold, gsm8k_data.describe(),
                               on_answer=progress)
    report = result.to_json()
    if args.json:
        output.dump_json(report)
    else:
        print_accuracy(report)
    if args.out:  # after the result is shown: a file that cannot be written loses none of it
        atomic_write_json(args.out, report)
        print(f"JSON: {args.out}", file=sys.stderr)
    return int(ExitCode.OK if result.ok else ExitCode.CHECK_FAILED)


def print_accuracy(report: dict) -> None:
    output.heading(f"accuracy: GSM8K, {report['model']} at {report['url']}")
    threshold = report["threshold"]
    print(f"accuracy:  {report['accuracy']:.3f} ({report['correct']} of {report['questions']} correct; "
          f"{report['answered']} answered, {report['invalid']} without a number; {report['seconds']:.1f} s)")
    print(f"threshold: {threshold['min_accuracy']:g} for {threshold['profile']} ({threshold['kind']})")
    output.paragraph(f"source:    {threshold['source']}")
    for sample in report["wrong_samples"][:3]:
        got = sample["error"] or f"got {sample['got']}: {sample['excerpt']}"
        print(f"  wrong: test row {sample['index']}, expected {sample['expected']}, {got}")
    if report["ok"]:
        print("\naccuracy passed")
        return
    for reason in report["reasons"]:
        print(f"FAIL {reason}")
    print("\naccuracy failed")
