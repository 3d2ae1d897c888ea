"""The Serving verification section of `blackwell-stack plan`: smoke and bench for the default target."""

from __future__ import annotations

import json

from blackwell_stack.errors import StackError
from blackwell_stack.paths import data_path
from blackwell_stack.plan_model import PlanItem, PlanSection
from blackwell_stack.verify import baseline

PROFILE = ("modules", "profiles", "qwen3.5-397b-a17b-nvfp4-sm120.json")
FALLBACK_MODEL = "nvidia/Qwen3.5-397B-A17B-NVFP4"
FALLBACK_PORT = 30000


def _target() -> tuple[str, str, int, str]:
    """(model id, host, port, where they came from), from the serving profile when it is there."""
    try:
        path = data_path(*PROFILE)
        profile = json.loads(path.read_text())
        service = profile.get("service", {})
        host = service.get("host", "127.0.0.1")
        if host in ("0.0.0.0", "::"):
            host = "127.0.0.1"
        return profile["model"]["id"], host, int(service.get("port", FALLBACK_PORT)), "/".join(PROFILE)
    except (StackError, OSError, ValueError, KeyError, TypeError):
        return FALLBACK_MODEL, "127.0.0.1", FALLBACK_PORT, f"built-in default ({'/'.join(PROFILE)} not readable)"


def plan_section() -> PlanSection:
    model, host, port, source = _target()
    url = f"http://{host}:{port}"
    base = baseline.load(baseline.DEFAULT_BASELINE)
    items = [
        PlanItem("endpoint", url, source),
        PlanItem("model", model, source),
        PlanItem(
            "smoke",
            "4 prompts (2 chat, 2 completion) x stream/no-stream at temperature 0; fails on null/empty content, "
            "finish reason not stop/length, character runs, looping phrases, low diversity, U+FFFD, HTTP errors",
            "src/blackwell_stack/verify/smoke.py",
        ),
    ]
    for exp in base.expectations:
        where = f"c={exp.concurrency}" if exp.concurrency else f"c>={exp.min_concurrency}"
        items.append(
            PlanItem(
                f"baseline: {exp.name}",
                f"{exp.metric} {exp.relation.replace('_', ' ')} {exp.value:g} at {where} (tolerance {base.tolerance:.0%})",
                f"src/blackwell_stack/verify/baselines/{base.path.name} (seeds' figures, FACTS section 1)",
            )
        )
    return PlanSection(
        key="verify",
        title="Serving verification",
        items=items,
        commands=[
            f"blackwell-stack smoke {url} --model {model}",
            f"blackwell-stack bench {url} --model {model} --ignore-eos --concurrency 1,8,32,64,128 "
            f"--input-len 256 --output-len 256 --out bench.json --plot bench.png",
        ],
    )
