"""`bench`: a concurrency sweep of streamed requests against an OpenAI-compatible server.

At each level, `concurrency` workers send requests back to back until the
level's request count (or duration) is used up. Before a level's clock
starts, it is warmed up at its own concurrency (`warmup_requests` rounds of
`concurrency` requests at once, the level's prompt length, a few tokens
out): a server's first batch of a new size (a first batched prefill, a
kernel compiled just in time) lands there, not in the figures. One warm-up
request before the sweep left a 1.2 s stall inside the measured time of the
first batched level on SGLang (benchmarks/sglang-gpu/). Every request streams (SSE)
with `stream_options.include_usage`, so the token counts are the server's
own. Per level: aggregate output tok/s (all output tokens over the level's
wall time), per-request decode tok/s, time to first token (TTFT) and the gap
between stream events that carried text (ITL), each as p50/p90/p99, and
errors. The client's own CPU time is recorded per level, so a result that
the client itself limited is visible. After each level, outside its
measured time, every answer is judged (answers.py): garbage and abnormal
finish reasons make the answers broken, and bench fails on them.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import resource
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from blackwell_stack.errors import CheckFailed, StackError
from blackwell_stack.verify import answers, events
from blackwell_stack.verify.openai_client import (
    Endpoint,
    HTTPStatusError,
    ProtocolError,
    describe_error,
    stream_events,
)
from blackwell_stack.verify.stats import summary
from blackwell_stack.verify.tokens import SOURCE_EVENTS, SOURCE_USAGE, TokenizerCounter

DEFAULT_CONCURRENCY = (1, 8, 32, 64, 128)
# Above this share of one core the client may be what limits the numbers.
CLIENT_BUSY_WARNING = 0.8

# Prompt words: plain English, so that any tokenizer makes about one token of each.
_WORDS = (
    "the of and to in is was for on that with as by at from his her an which are this be or had not but "
    "were have their one all there can been has more when who will other time two into some could them "
    "than first water been called its now find long down day did get come made may part over new sound "
    "take only little work know place year live back give most very after thing our just name good "
    "sentence man think say great where help through much before line right too mean old any same tell "
    "boy follow came want show also around form three small set put end does another well large must big "
    "even such because turn here why ask went men read need land different home us move try kind hand "
    "picture again change off play spell air away animal house point page letter mother answer found study"
).split()


@dataclass
class BenchConfig:
    concurrencies: tuple[int, ...] = DEFAULT_CONCURRENCY
    requests_per_level: int | None = None  # default: 4 x concurrency, at least 8
    duration_s: float | None = None  # instead of a request count
    input_len: int = 256  # prompt length in words (about one token each)
    output_len: int = 256  # max_tokens
    len_dist: str = "fixed"  # or "uniform": each length drawn from [len*(1-r), len*(1+r)]
    range_ratio: float = 0.5
    api: str = "completion"  # or "chat"
    ignore_eos: bool = False  # SGLang/vLLM extension: always produce output_len tokens
    seed: int = 0
    timeout_s: float = 600.0
    warmup_requests: int = 1  # warm-up rounds before each level, each `concurrency` requests at once

    def requests_for(self, concurrency: int) -> int:
        return self.requests_per_level or max(8, 4 * concurrency)

    def planned_for(self, concurrency: int) -> int:
        """How many prompts a level makes before its clock starts (plan_requests)."""
        return max(64, concurrency * 8) if self.duration_s else self.requests_for(concurrency)


@dataclass
class RequestResult:
    ok: bool
    index: int | None = None  # position in plan_requests(): replays the same prompt
    max_tokens: int | None = None
    error: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    token_source: str | None = None
    ttft_s: float | None = None
    e2e_s: float | None = None
    decode_tok_s: float | None = None
    text_events: int = 0
    finish_reason: str | None = None
    matched_stop: str | None = None  # SGLang's stop string ("NaN happened" when a step produced NaN)
    findings: list[str] = field(default_factory=list)  # checks that failed on the answer (answers.py)
    early_stop: bool = False  # fewer tokens than max_tokens
    itls_s: list[float] = field(default_factory=list)
    text: str | None = None  # the answer, kept until it is judged (not in the JSON)


@dataclass
class LevelResult:
    concurrency: int
    requests: int
    ok: int
    errors: int
    wall_s: float
    output_tokens: int
    output_tok_s: float
    requests_per_s: float
    ttft_s: dict
    itl_s: dict
    e2e_s: dict
    decode_tok_s: dict
    client_cpu_share: float
    error_samples: list[str]
    token_sources: list[str]
    broken: int  # answers with findings
    early_stops: int  # answers shorter than their max_tokens
    finish_reasons: dict[str, int]
    findings: dict[str, int]  # check -> answers it failed on
    broken_samples: list[str]
    per_request: list[dict]


def make_prompt(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(max(1, words)))


def _length(rng: random.Random, mean: int, config: BenchConfig) -> int:
    if config.len_dist == "fixed":
        return mean
    low = max(1, int(mean * (1 - config.range_ratio)))
    high = max(low, int(mean * (1 + config.range_ratio)))
    return rng.randint(low, high)


def plan_requests(config: BenchConfig, concurrency: int) -> list[tuple[str, int]]:
    """The (prompt, max_tokens) of each request of a level, the same for the same seed.

    In duration mode the list is cycled through.
    """
    rng = random.Random(f"{config.seed}-{concurrency}")
    count = config.planned_for(concurrency)
    return [
        (make_prompt(rng, _length(rng, config.input_len, config)), _length(rng, config.output_len, config))
        for _ in range(count)
    ]


def request_body(config: BenchConfig, model: str, prompt: str, max_tokens: int) -> dict:
    body: dict = {
        "model": model,
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if config.api == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    if config.ignore_eos:
        body["ignore_eos"] = True
    return body


async def run_request(
    endpoint: Endpoint, config: BenchConfig, body: dict, counter: TokenizerCounter | None
) -> RequestResult:
    """One streamed request, timed from the send to each event that carries text."""
    path = "/chat/completions" if config.api == "chat" else "/completions"
    chat = config.api == "chat"
    result = RequestResult(ok=False)
    started = time.perf_counter()
    stamps: list[float] = []
    pieces: list[str] = []
    usage = None

    def on_events(stamp: float, batch: list[dict]) -> None:
        # Runs inside the socket read callback: keep it lean (benchmarks/bench-client/).
        nonlocal usage
        carried = False
        for event in batch:
            choices, event_usage = events.stream_event(event, chat)
            if event_usage:
                usage = event_usage
            for choice in choices:
                text = choice.content or choice.reasoning
                if text:
                    pieces.append(text)
                    carried = True
                    result.text_events += 1
                if choice.finish_reason is not None:
                    result.finish_reason = choice.finish_reason
                if choice.matched_stop is not None:
                    result.matched_stop = choice.matched_stop
        if carried:
            stamps.append(stamp)

    try:
        await stream_events(endpoint, path, body, on_events, timeout=config.timeout_s)
    except (HTTPStatusError, ProtocolError, OSError) as exc:  # an event of the wrong shape too (verify/events.py)
        result.error = describe_error(exc)
        return result
    ended = time.perf_counter()
    result.ok = True
    result.e2e_s = ended - started
    result.text = "".join(pieces)  # strings: verify/events.py refuses any other text
    tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
    if isinstance(tokens, int):
        result.completion_tokens = tokens
        prompt_tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        result.prompt_tokens = prompt_tokens if isinstance(prompt_tokens, int) else None
        result.token_source = SOURCE_USAGE
    elif counter is not None:
        result.completion_tokens = counter.count(result.text)
        result.token_source = counter.source
    else:
        result.completion_tokens = result.text_events
        result.token_source = SOURCE_EVENTS
    if stamps:
        result.ttft_s = stamps[0] - started
        result.itls_s = [b - a for a, b in itertools.pairwise(stamps)]
        span = stamps[-1] - stamps[0]
        if result.completion_tokens and result.completion_tokens > 1 and span > 0:
            result.decode_tok_s = (result.completion_tokens - 1) / span
    return result


async def run_level(
    endpoint: Endpoint,
    model: str,
    config: BenchConfig,
    concurrency: int,
    counter: TokenizerCounter | None,
    on_done: Callable[[RequestResult], None] | None = None,
) -> LevelResult:
    total = None if config.duration_s else config.requests_for(concurrency)
    # Prompts are made before the clock starts, so their making is not measured.
    planned = plan_requests(config, concurrency)
    results: list[RequestResult] = []
    issued = 0
    loop = asyncio.get_running_loop()
    started = loop.time()
    deadline = started + config.duration_s if config.duration_s else None

    async def worker() -> None:
        nonlocal issued
        while True:
            if total is not None and issued >= total:
                return
            if deadline is not None and loop.time() >= deadline:
                return
            index = issued % len(planned)
            prompt, max_tokens = planned[index]
            issued += 1
            body = request_body(config, model, prompt, max_tokens)
            result = await run_request(endpoint, config, body, counter)
            result.index, result.max_tokens = index, max_tokens
            results.append(result)
            if on_done:
                on_done(result)

    cpu_before = time.process_time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall = max(loop.time() - started, 1e-9)
    cpu = time.process_time() - cpu_before
    good = [r for r in results if r.ok]
    tokens = sum(r.completion_tokens or 0 for r in good)
    errors = [r.error or "" for r in results if not r.ok]
    broken_samples = _judge(good)
    finish_reasons: dict[str, int] = {}
    findings: dict[str, int] = {}
    for r in good:
        finish_reasons[str(r.finish_reason)] = finish_reasons.get(str(r.finish_reason), 0) + 1
        for check in r.findings:
            findings[check] = findings.get(check, 0) + 1
    return LevelResult(
        concurrency=concurrency,
        requests=len(results),
        ok=len(good),
        errors=len(errors),
        wall_s=wall,
        output_tokens=tokens,
        output_tok_s=tokens / wall,
        requests_per_s=len(good) / wall,
        ttft_s=summary([r.ttft_s for r in good if r.ttft_s is not None]),
        itl_s=summary([gap for r in good for gap in r.itls_s]),
        e2e_s=summary([r.e2e_s for r in good if r.e2e_s is not None]),
        decode_tok_s=summary([r.decode_tok_s for r in good if r.decode_tok_s is not None]),
        client_cpu_share=cpu / wall,
        error_samples=sorted(set(errors))[:5],
        token_sources=sorted({r.token_source for r in good if r.token_source}),
        broken=sum(1 for r in good if r.findings),
        early_stops=sum(1 for r in good if r.early_stop),
        finish_reasons=finish_reasons,
        findings=findings,
        broken_samples=broken_samples,
        per_request=[
            {k: v for k, v in asdict(r).items() if k not in ("itls_s", "text")} for r in results
        ],
    )


def _judge(results: list[RequestResult]) -> list[str]:
    """Judge each answer (after the level's clock stopped); up to 5 lines describing broken ones."""
    samples: list[str] = []
    for r in results:
        verdict = answers.judge(r.text, r.finish_reason, r.completion_tokens, r.max_tokens, r.matched_stop)
        r.findings = [f.check for f in verdict.findings]
        r.early_stop = verdict.early_stop
        if verdict.findings and len(samples) < 5:
            first = verdict.findings[0]
            samples.append(f"request {r.index}: {first.check}: {first.detail}: {first.excerpt}")
        r.text = None  # judged: free it
    return samples


# Tokens each warm-up request asks for: enough for a few decoding steps at the level's batch size.
WARMUP_TOKENS = 16


async def warm_up(endpoint: Endpoint, model: str, config: BenchConfig, concurrency: int = 1) -> None:
    """Unmeasured rounds before a level: `concurrency` requests at once, as long as the level's prompts, so the
    server's first batch of that size (prefill, decoding, just-in-time kernels) is not measured."""
    rng = random.Random(f"{config.seed}-warmup-{concurrency}")
    for _ in range(config.warmup_requests):
        bodies = [request_body(config, model, make_prompt(rng, _length(rng, config.input_len, config)),
                               min(config.output_len, WARMUP_TOKENS)) for _ in range(concurrency)]
        results = await asyncio.gather(*(run_request(endpoint, config, body, None) for body in bodies))
        failed = [r for r in results if not r.ok]
        if failed:
            raise CheckFailed(
                f"{len(failed)} of {concurrency} warm-up requests to {endpoint.base_url} failed: {failed[0].error}",
                "check the URL, --model and --timeout (and drop --ignore-eos for servers that reject it)",
            )


# The prompt words one level may make up front: about 300 MB of text, far above any real sweep (128 x 8 x 4,096).
PROMPT_WORDS_LIMIT = 50_000_000


def validate(config: BenchConfig) -> None:
    if not config.concurrencies or any(c < 1 for c in config.concurrencies):
        raise StackError(f"bad concurrency levels {config.concurrencies}", "give positive integers: --concurrency 1,8,32")
    if config.requests_per_level is not None and config.requests_per_level < 1:
        raise StackError("--requests must be at least 1", "for example --requests 64")
    if config.duration_s is not None and config.duration_s <= 0:
        raise StackError("--duration must be positive", "for example --duration 60")
    if config.input_len < 1 or config.output_len < 1:
        raise StackError("--input-len and --output-len must be at least 1", "for example --input-len 256 --output-len 256")
    if config.len_dist not in ("fixed", "uniform"):
        raise StackError(f"unknown length distribution {config.len_dist!r}", "use fixed or uniform")
    if not 0 <= config.range_ratio < 1:
        raise StackError("--range-ratio must be in [0, 1)", "for example --range-ratio 0.5")
    if not config.timeout_s > 0:
        raise StackError("--timeout must be a positive number of seconds", "for example --timeout 600")
    if config.warmup_requests < 0:
        raise StackError("--warmup must be 0 or more", "for example --warmup 1")
    # A level's prompts are all made before its clock starts, and each concurrent request holds a connection:
    # refused here, not after a minute of making prompts, or in the middle of a level.
    open_files = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    most = max(config.concurrencies)
    if open_files != resource.RLIM_INFINITY and most > open_files - 64:
        raise StackError(f"--concurrency {most} needs more connections than this process may open ({open_files} files)",
                         f"raise the limit (ulimit -n {most + 64}), or use fewer concurrent requests")
    words = max(config.planned_for(c) for c in config.concurrencies) * config.input_len
    if words > PROMPT_WORDS_LIMIT:
        raise StackError(f"one level would make {words:,} words of prompts before it starts, more than bench holds "
                         f"({PROMPT_WORDS_LIMIT:,})", "use fewer --requests, a shorter --input-len, or a lower --concurrency")
