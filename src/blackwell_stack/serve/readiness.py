"""services.sglang's readiness gate: wait until SGLang's /health answers 200.

Run by the unit as ExecStartPost (modules/sglang.nix), so the unit becomes active only once the server answers, and
standalone on purpose: it runs under the SGLang environment's Python (standard library only), which does not have
blackwell_stack. SGLang serves /health without the API key (srt/utils/auth.py: health and metrics paths are always
allowed).

It stops waiting, with the reason on stderr (the journal) and exit status 1, when the server process is gone
($MAINPID, set by systemd for ExecStartPost) or when --timeout seconds have passed. A failing ExecStartPost makes
systemd stop the unit with result `exit-code`, which Restart=on-abnormal does not restart: a server that never gets
ready is not reloaded in a loop.
"""

import argparse
import os
import sys
import time
import urllib.error
import urllib.request


def answers_200(url: str, timeout: float) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, under another user
    return True


def wait(url: str, timeout: float, interval: float, main_pid: int | None) -> tuple[bool, str]:
    start = time.monotonic()
    deadline = start + timeout
    while True:
        if answers_200(url, timeout=min(5.0, max(0.1, deadline - time.monotonic()))):
            return True, f"sglang readiness: {url} answered 200 after {time.monotonic() - start:.0f} s"
        if main_pid is not None and not process_alive(main_pid):
            return False, f"sglang readiness: the server process ({main_pid}) exited before {url} answered 200"
        if time.monotonic() >= deadline:
            return False, (
                f"sglang readiness: {url} did not answer 200 within {timeout:.0f} s "
                "(services.sglang.readiness.timeoutSec); stopping the unit, it is not restarted"
            )
        time.sleep(max(0.0, min(interval, deadline - time.monotonic())))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Wait until SGLang's /health answers 200.")
    parser.add_argument("--url", required=True, help="the health URL, e.g. http://127.0.0.1:30000/health")
    parser.add_argument("--timeout", type=float, required=True, help="seconds to wait at most")
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between probes")
    args = parser.parse_args(argv)
    pid = os.environ.get("MAINPID")
    ok, message = wait(args.url, args.timeout, args.interval, int(pid) if pid and pid.isdigit() else None)
    print(message, file=sys.stdout if ok else sys.stderr, flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
