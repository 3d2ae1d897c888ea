"""The Serving verification section of `blackwell-stack plan`: smoke, the accuracy gate and bench for the default
target."""

from __future__ import annotations

from blackwell_stack.data.plan import GPU_HOST, PlanItem, PlanSection, not_checked_here
from blackwell_stack.data.profile import load_profile
from blackwell_stack.data.stack import Stack
from blackwell_stack.errors import StackError
from blackwell_stack.verify import accuracy, baseline, gsm8k_data

# What each kind of threshold is (gsm8k.json says its source in full).
THRESHOLD_WORDS = {
    "floor": "a floor meant to catch garbage (no published figure is known for this model on this card)",
    "published": "a published figure for this model on this card",
    "bf16-kv-run": "the same server's score with a bf16 KV cache",
}


def _accuracy_item() -> PlanItem:
    """The accuracy gate of the default profile: its threshold, and where that comes from."""
    try:
        threshold = gsm8k_data.threshold(load_profile().path.stem)
    except StackError as exc:  # a profile the serve section reports in full, or one without a threshold
        return PlanItem("accuracy gate", "unknown", None, verified=False, note=exc.message)
    return PlanItem(
        "accuracy gate",
        f"few-shot GSM8K, {accuracy.GateConfig.questions} questions (seed {accuracy.GateConfig.seed}) at "
        f"temperature 0; fails below {threshold.min_accuracy:g}, {THRESHOLD_WORDS[threshold.kind]}",
        "src/blackwell_stack/verify/gsm8k.json",
        note=None if threshold.kind == "bf16-kv-run" else "a floor or a published figure misses a loss of a few "
        "points: set the threshold from the same server's bf16-KV run (docs/accuracy-gate.md#the-threshold)",
        checked_by=not_checked_here("the grader is tested on the CPU; a score needs the GPU host"), needs=GPU_HOST,
    )


def plan_section(stacks: list[Stack]) -> PlanSection:
    """One section whatever the stacks: smoke and bench of the default target."""
    try:  # the target of the serving profile, read by its validated loader
        profile = load_profile()
        service, source = profile.data["service"], f"modules/profiles/{profile.path.name}"
        host = "127.0.0.1" if service["host"] in ("0.0.0.0", "::") else service["host"]
        model, url = str(profile.data["model"]["id"]), f"http://{host}:{int(service['port'])}"
        items = [PlanItem("endpoint", url, source), PlanItem("model", model, source)]
    except (StackError, TypeError, ValueError) as exc:  # a profile the serve section reports in full
        model, url = "MODEL", "http://HOST:PORT"
        items = [PlanItem("endpoint", "unknown", None, verified=False,
                          note=f"the serving profile cannot be read: {getattr(exc, 'message', exc)}")]
    base = baseline.load(baseline.DEFAULT_BASELINE)
    items += [
        PlanItem(
            "smoke",
            "4 prompts (2 chat, 2 completion) x stream/no-stream at temperature 0; fails on the reference "
            "deployment's failure text (NaN happened, runs of !) in text, finish reason or matched_stop, null/empty content, "
            "finish reason not stop/length, character runs, looping phrases, low diversity, U+FFFD, HTTP errors; and on "
            "answers without Paris or the digits of the count, or the same for different prompts",
            "src/blackwell_stack/verify/smoke.py",
            checked_by="tests: real server, broken and sound models",
        ),
        _accuracy_item(),
    ]
    for exp in base.expectations:
        where = f"c={exp.concurrency}" if exp.concurrency else f"c>={exp.min_concurrency}"
        value = (f"{exp.metric} {exp.relation.replace('_', ' ')} {exp.value:g} at {where} "
                 f"(tolerance {base.tolerance:.0%})")
        items.append(PlanItem(f"baseline: {exp.name}", value, f"src/blackwell_stack/verify/baselines/{base.path.name} "
                              "(docs/reference-deployment.md#results)", needs=GPU_HOST,
                              checked_by=not_checked_here("reported figures; needs the GPU host")))
    return PlanSection(key="verify", title="Serving verification", items=items, commands=[
        f"blackwell-stack smoke {url} --model {model}",
        f"blackwell-stack accuracy {url} --model {model} --out accuracy.json",
        f"blackwell-stack bench {url} --model {model} --ignore-eos --concurrency 1,8,32,64,128 "
        f"--input-len 256 --output-len 256 --out bench.json --plot bench.png",
    ])
