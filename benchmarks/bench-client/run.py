"""How many streamed tokens per second the bench client consumes on one core.

A synthetic SSE source (this measurement only, never a test) runs in a child
process on 127.0.0.1 and answers every completion request with N events shaped
like SGLang's (one token of text per event, chunked transfer encoding, a
final usage event and [DONE]), yielding to its event loop after each event so
that concurrent streams interleave and the client sees small reads, as from a
real server. The client is bench.run_level, the code path of
`blackwell-stack bench`, in this process; its CPU time (process_time) gives
tokens per CPU-second, which is what one core can consume whatever else runs
on the machine.

    PYTHONPATH=src python benchmarks/bench-client/run.py [--tokens 2000] [--concurrency 64] [--out result.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import platform
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "src"))

from blackwell_stack.verify import bench
from blackwell_stack.verify.openai_client import Endpoint


def _event(i: int) -> bytes:
    data = json.dumps(
        {
            "id": "cmpl-0123456789abcdef",
            "object": "text_completion",
            "created": 1764400000,
            "model": "Qwen/Qwen3.5-397B-A17B-NVFP4",
            "choices": [{"index": 0, "text": f" tok{i % 97}", "logprobs": None, "finish_reason": None, "matched_stop": None}],
            "usage": None,
        }
    ).encode()
    payload = b"data: " + data + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def serve(port: int, tokens: int, pace_s: float, ready) -> None:
    events = [_event(i) for i in range(tokens)]
    usage = b"data: " + json.dumps(
        {"id": "x", "object": "text_completion", "choices": [{"index": 0, "text": "", "finish_reason": "length"}],
         "usage": {"prompt_tokens": 8, "completion_tokens": tokens, "total_tokens": tokens + 8}}
    ).encode() + b"\n\ndata: [DONE]\n\n"
    tail = b"%x\r\n%s\r\n0\r\n\r\n" % (len(usage), usage)
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"

    async def handle(reader, writer):
        head_bytes = await reader.readuntil(b"\r\n\r\n")
        length = int(next(h.split(b":")[1] for h in head_bytes.split(b"\r\n") if h.lower().startswith(b"content-length")))
        await reader.readexactly(length)
        writer.write(head)
        for ev in events:
            writer.write(ev)
            # pace 0: only interleave the streams; pace > 0: one event per read, as from a decoding server
            await asyncio.sleep(pace_s)
            if writer.transport.get_write_buffer_size() > 1 << 16:
                await writer.drain()
        writer.write(tail)
        await writer.drain()
        writer.close()

    async def main():
        server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=1024)
        ready.set()
        async with server:
            await server.serve_forever()

    asyncio.run(main())


READS = [0]


def _counting(stream):
    """bench.stream_events, counting socket reads that carried events (to report events per read)."""

    async def wrapped(endpoint, path, body, on_events):
        def counted(stamp, events):
            READS[0] += 1
            on_events(stamp, events)

        await stream(endpoint, path, body, counted)

    return wrapped


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=2000, help="tokens per streamed request")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--requests", type=int, default=128)
    parser.add_argument("--port", type=int, default=18999)
    parser.add_argument("--pace-ms", type=float, default=0.0, help="pause of the source after each event of a stream")
    parser.add_argument("--out")
    args = parser.parse_args()

    bench.stream_events = _counting(bench.stream_events)
    ready = multiprocessing.Event()
    source = multiprocessing.Process(target=serve, args=(args.port, args.tokens, args.pace_ms / 1000, ready), daemon=True)
    source.start()
    ready.wait(30)
    try:
        endpoint = Endpoint.parse(f"http://127.0.0.1:{args.port}")
        config = bench.BenchConfig(concurrencies=(args.concurrency,), requests_per_level=args.requests, input_len=8, output_len=args.tokens)
        cpu0, wall0 = time.process_time(), time.perf_counter()
        level = asyncio.run(bench.run_level(endpoint, "m", config, args.concurrency, None))
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    finally:
        source.terminate()
        source.join()
    events = sum(r["text_events"] for r in level.per_request)
    result = {
        "what": "tokens per second the bench client consumes (bench.run_level, SSE over loopback, one event per token)",
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores (shared with other work)",
        "concurrency": args.concurrency,
        "source_pace_ms": args.pace_ms,
        "requests": level.requests,
        "errors": level.errors,
        "tokens": level.output_tokens,
        "text_events": events,
        "reads_with_events": READS[0],
        "events_per_read": round(events / max(READS[0], 1), 2),
        "client_cpu_s": round(cpu, 3),
        "wall_s": round(wall, 3),
        "tokens_per_client_cpu_s": round(level.output_tokens / cpu),
        "tokens_per_wall_s": round(level.output_tokens / wall),
        "goal_tokens_per_s": 20000,
    }
    print(json.dumps(result, indent=2))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(result, fh, indent=2)
            fh.write("\n")
    return 0 if level.errors == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
