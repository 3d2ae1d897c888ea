"""Two small HTTP steps of device.sh, with the standard library only (the machine may have no curl):

    python http_probe.py ready PORT SECONDS          exit 0 once GET /v1/models answers 200
    python http_probe.py complete PORT MODEL OUTFILE  one completion; the server's answer (or the error) to OUTFILE
"""

import json
import sys
import time
import urllib.request


def ready(port: str, seconds: str) -> int:
    end = time.monotonic() + float(seconds)
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5) as answer:
                if answer.status == 200:
                    return 0
        except OSError:
            pass
        time.sleep(1)
    return 1


def complete(port: str, model: str, out: str) -> int:
    body = json.dumps({"model": model, "prompt": "What is the capital of France?", "max_tokens": 16}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body,
                                     {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=300) as answer:
            text, code = answer.read().decode(), 0
    except OSError as exc:
        text, code = json.dumps({"error": str(exc)}), 1
    with open(out, "w") as fh:
        fh.write(text + "\n")
    return code


if __name__ == "__main__":
    verb, *rest = sys.argv[1:]
    raise SystemExit(ready(*rest) if verb == "ready" else complete(*rest))
