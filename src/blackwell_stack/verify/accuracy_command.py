"""`accuracy`: the accuracy gate (accuracy.py) on the command line, with a progress line and a verdict."""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from blackwell_stack import output
from blackwell_stack.argtypes import non_negative_int, positive_float, positive_int
from blackwell_stack.data.profile import DEFAULT_PROFILE
from blackwell_stack.errors import ExitCode, StackError
from blackwell_stack.fileio import atomic_write_json, check_output_path
from blackwell_stack.verify import accuracy, api_key, client, gsm8k_data

DEFAULT_PROGRESS_EVERY = 25


def register(sub: argparse._SubParsersAction) -> None:
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
    p.add_argument("url", help="server base URL, e.g. http://127.0.0.1:30000 (the /v1 prefix is optional)")
    p.add_argument("--model", help="model name to ask for (default: the first one /v1/models lists)")
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
    p.add_argument("--progress-every", type=positive_int, default=DEFAULT_PROGRESS_EVERY,
                   help="a progress line on stderr after every N answers (default %(default)s)")
    p.add_argument("--out", help="write the result as JSON to this file")
    api_key.add_options(p)
    p.add_argument("--json", action="store_true", help="print the result as JSON instead of text")
    p.set_defaults(func=cmd_accuracy)


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
    result = accuracy.run_gate(endpoint, model, train, test, config, threshold, gsm8k_data.describe(),
                               on_answer=_progress(sys.stderr, args.progress_every))
    report = result.to_json()
    if args.json:
        output.dump_json(report)
    else:
        print_result(report)
    if args.out:
        try:
            atomic_write_json(args.out, report)
        except StackError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return int(exc.code)
        print(f"JSON: {args.out}", file=sys.stderr)
    return int(ExitCode.OK if result.ok else ExitCode.CHECK_FAILED)


def _progress(err: TextIO, every: int):
    correct = 0

    def step(graded: accuracy.Graded, done: int, total: int) -> None:
        nonlocal correct
        correct += graded.correct
        if done % every == 0 or done == total:
            print(f"accuracy: {done}/{total} done, {correct} correct", file=err, flush=True)

    return step


def print_result(report: dict) -> None:
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
