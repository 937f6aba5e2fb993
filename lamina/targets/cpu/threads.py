"""The CPU runtime's persistent thread pool: ``n - 1`` Python worker threads plus the caller, each
running the compiled entry point with its own ``tid`` (ctypes releases the GIL during the call, so
they run in parallel in native code). Idle workers sleep on a condition variable — never a spin —
and the threads of one run synchronize inside the compiled code (its barriers sleep on a futex)."""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable
from typing import Any

__all__ = ["Pool"]


class Pool:
    """``Pool(n).run(fn)`` calls ``fn(tid)`` for ``tid`` in ``range(n)`` at once (``tid`` 0 on the
    calling thread) and returns when all have returned; the first exception raised is re-raised."""

    def __init__(self, n: int) -> None:
        if n < 1:
            raise ValueError(f"a pool needs at least one thread, got {n}")
        self.n = n
        self._cond = threading.Condition()
        self._gen = 0
        self._task: Callable[[int], Any] | None = None
        self._remaining = 0
        self._error: BaseException | None = None
        self._closed = False
        self._run_lock = threading.Lock()
        self._threads = []
        for tid in range(1, n):
            t = threading.Thread(
                target=_worker, args=(weakref.ref(self), tid), daemon=True, name=f"lamina-cpu-{tid}"
            )
            t.start()
            self._threads.append(t)

    def run(self, fn: Callable[[int], Any]) -> None:
        with self._run_lock:
            with self._cond:
                self._task = fn
                self._error = None
                self._remaining = self.n - 1
                self._gen += 1
                self._cond.notify_all()
            err: BaseException | None = None
            try:
                fn(0)
            except BaseException as e:
                err = e
            with self._cond:
                while self._remaining:
                    self._cond.wait()
                self._task = None
                err = err or self._error
            if err is not None:
                raise err

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # interpreter shutdown
            self.close()


def _worker(ref: Any, tid: int) -> None:
    seen = 0
    while True:
        pool = ref()
        if pool is None:
            return
        cond = pool._cond
        with cond:
            while pool._gen == seen and not pool._closed:
                del pool
                cond.wait(timeout=5.0)
                pool = ref()
                if pool is None:
                    return
            if pool._closed:
                return
            seen = pool._gen
            task = pool._task
        try:
            if task is not None:
                task(tid)
        except BaseException as e:
            with cond:
                pool._error = pool._error or e
        with cond:
            pool._remaining -= 1
            cond.notify_all()
        del pool, task
