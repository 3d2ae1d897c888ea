"""Work in a thread pool that an interrupt stops: Ctrl-C (or SIGTERM) cancels what is queued and tells what runs.

ThreadPoolExecutor's `with` waits for every queued job on its way out, so a Ctrl-C during `stack audit` went on
downloading every wheel left (still running 170 s later). `run_all` cancels the queue at once; a running job
stops at its next `check()` (downloads call it between blocks, so the file it was writing is removed as any
interrupted write is); then the interrupt ends the command as usual.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

_stopping = threading.Event()


class Stopped(KeyboardInterrupt):
    """Raised in a worker by check() once the command has been interrupted."""


def check() -> None:
    """Stop this job (raise Stopped) when the command has been interrupted; a no-op otherwise."""
    if _stopping.is_set():
        raise Stopped("interrupted")


def run_all(func: Callable[[T], R], items: Iterable[T], *, jobs: int) -> list[R]:
    """func over items in `jobs` threads, the results in the order of items."""
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs))
    try:
        futures = [pool.submit(func, item) for item in items]
        return [future.result() for future in futures]
    except BaseException:
        _stopping.set()
        pool.shutdown(wait=True, cancel_futures=True)  # the running jobs end at their next check()
        _stopping.clear()
        raise
    finally:
        pool.shutdown(wait=True)
