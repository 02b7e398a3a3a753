"""The few primitives whose sync and async forms differ in more than `await`.

Everything else sync is generated from its async source by
tools/async_to_sync.py, which renames `aname` here to `name`. Keep each pair
side by side and as small as it can be.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

# Seconds an attempt may overrun its timeout before the caller stops waiting.
GRACE_S = 0.05


async def asleep(seconds: float) -> None:
    await asyncio.sleep(seconds)


def sleep(seconds: float) -> None:
    time.sleep(seconds)


_EXECUTOR: concurrent.futures.ThreadPoolExecutor | None = None
_EXECUTOR_LOCK = threading.Lock()


def _executor() -> concurrent.futures.ThreadPoolExecutor:
    # Sync work runs here so the caller can stop waiting at a deadline even when a
    # server trickles bytes slower than the HTTP read timeout, or a client library
    # takes seconds to import; abandoned work ends on its own.
    global _EXECUTOR
    with _EXECUTOR_LOCK:
        if _EXECUTOR is None:
            _EXECUTOR = concurrent.futures.ThreadPoolExecutor(max_workers=32, thread_name_prefix="pgsift")
        return _EXECUTOR


async def arun_bounded(sync_fn: Callable[..., T], async_fn: Callable[..., Awaitable[T]] | None,
                       timeout: float, *args: Any, **kwargs: Any) -> T:
    """Await async_fn(*args, **kwargs) (or sync_fn in a worker thread when there is no async
    form), giving up after timeout + GRACE_S with TimeoutError."""
    if async_fn is not None:
        call: Awaitable[T] = async_fn(*args, **kwargs)
    else:
        call = asyncio.get_running_loop().run_in_executor(_executor(), functools.partial(sync_fn, *args, **kwargs))
    return await asyncio.wait_for(call, timeout + GRACE_S)


def run_bounded(sync_fn: Callable[..., T], async_fn: Callable[..., Awaitable[T]] | None,
                timeout: float, *args: Any, **kwargs: Any) -> T:
    """Run sync_fn(*args, **kwargs) in a worker thread, giving up after timeout + GRACE_S with
    TimeoutError (a call that had not started by then never starts)."""
    future = _executor().submit(sync_fn, *args, **kwargs)
    try:
        return future.result(timeout=timeout + GRACE_S)
    except concurrent.futures.TimeoutError as exc:
        raise TimeoutError(f"no answer within {timeout:.2f}s") from exc
    finally:
        future.cancel()
