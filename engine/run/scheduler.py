"""The scheduler: `run_due()` on a background thread, and never two at once per store.

Two runners (scheduler threads, daemons, `lethe run`, `Memory.run_due()`) must not run
passes on the same store and namespace at the same time. The scheduler runs through the
same runner functions as everyone else (engine.run.runner), which take the namespace's lease
(engine.run.leasing): a tick whose lease another runner holds is skipped; while a tick works
its lease is renewed, also while it waits on a model, and its commits are fenced.

The scheduler works over its own connection to the file, so the agent's recall and
remember, on theirs, keep reading during a pass (WAL) and wait for nothing but SQLite's
write lock. Times come from the memory's clock; only the sleep between ticks is real time.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
import warnings
from typing import Callable

from engine.base.clock import parse_duration
from engine.base.errors import LeaseBusy, LeaseLost, LetheError, StoreError
from engine.judges.keys import PassesUndoneWarning
from engine.run import runner
from engine.run.leasing import DEFAULT_TTL, LeaseTerms, default_holder
from engine.run.passes import PassResult
from engine.store import database_errors

log = logging.getLogger("lethe.scheduler")

__all__ = ["Scheduler", "LeaseBusy", "LeaseLost", "DEFAULT_TTL", "default_holder"]


class _Stopped(Exception):
    """Raised between a pass's statements when the scheduler stops: the pass rolls back."""


class Scheduler:
    """Runs `memory.run_due()` every `interval` seconds on a background thread.

    >>> sched = Scheduler(mem, interval=60).start()   # or: with Scheduler(mem): ...
    >>> sched.force_run()                               # every pass, now
    >>> sched.stop()                                    # returns within a second

    `on_tick(results)` is called after each tick with the pass results, or None when
    another holder had the lease. A tick that fails is logged and kept in `last_error`;
    the scheduler carries on, unless every tick has failed for more than `give_up_after`
    seconds (of `timer`, a monotonic clock): then its thread ends and `gave_up` holds a
    one-line StoreError saying so (`lethe daemon` exits 2 on it, for a supervisor).
    """

    def __init__(
        self,
        memory,
        interval: float = 60.0,
        *,
        lease_ttl=DEFAULT_TTL,
        on_tick: Callable[[list[PassResult] | None], None] | None = None,
        holder: str | None = None,
        give_up_after: float | None = None,
        timer: Callable[[], float] = time.monotonic,
    ):
        if memory.database in ("", ":memory:"):
            raise LetheError("the scheduler needs a database file: it opens its own connection to it")
        self.memory = memory
        self.interval = float(interval)
        self.lease_ttl = lease_ttl if isinstance(lease_ttl, dt.timedelta) else parse_duration(lease_ttl)
        self.on_tick = on_tick
        self.holder = holder or default_holder()
        self.ticks = 0
        self.last_results: list[PassResult] | None = None
        self.last_error: BaseException | None = None
        self.give_up_after = give_up_after
        self.gave_up: StoreError | None = None
        self._timer = timer
        self.failing_since: float | None = None  # timer() at the first failed tick in a row
        self.failed_ticks = 0  # in a row
        self._stopping = threading.Event()
        self._run_lock = threading.Lock()  # the thread and force_run take turns
        self._thread: threading.Thread | None = None
        self._own = None  # the scheduler's context, on its own connection
        self._warned_keyless = False  # PassesUndoneWarning is given once
        self._open()

    # -- lifecycle
    def start(self) -> "Scheduler":
        """Start the background thread (its first tick runs at once); returns self."""
        if self.running:
            return self
        self._stopping.clear()
        self._thread = threading.Thread(
            target=self._loop, daemon=True, name=f"lethe-scheduler-{self.memory.namespace}"
        )
        self._thread.start()
        return self

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout: float = 1.0) -> bool:
        """Stop the thread and join it, waiting at most `timeout` seconds. A pass caught
        half-way is rolled back (it runs again on the next tick). False only when the thread
        is still waiting on a model's answer; it then exits as soon as that returns."""
        self._stopping.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout / 2)
            own = self._own
            if thread.is_alive() and own is not None:
                own.store.interrupt()  # a long statement aborts; its pass rolls back
                thread.join(timeout / 2)
            if thread.is_alive():
                return False
            self._thread = None
        self.close()
        return True

    def close(self) -> None:
        """Close the scheduler's own connections (force_run reopens them)."""
        with self._run_lock:
            if self._own is not None:
                self._own.store.close()
                self._own = None

    def __enter__(self) -> "Scheduler":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- running passes
    def tick(self, progress: Callable[[str], None] | None = None) -> list[PassResult] | None:
        """Once, now: pending turns and due passes, under the lease. None when another
        holder has the lease (it is running passes on this store)."""
        return self._under_lease(None, progress)

    def force_run(self, passes=None, progress: Callable[[str], None] | None = None) -> list[PassResult]:
        """Run every pass of the policy (or the named ones) now, due or not, in the
        caller's thread and under the lease. Raises LeaseBusy when another holder has it."""
        names = list(passes) if passes else list(self.memory.policy.passes)
        done = self._under_lease(names, progress)
        assert done is not None  # named passes raise LeaseBusy rather than give None
        return done

    def _under_lease(self, names: list[str] | None, progress) -> list[PassResult] | None:
        terms = LeaseTerms(self.lease_ttl, self.holder)
        with self._run_lock:
            ctx = self._open()
            hook = self._hook(progress)
            before = ctx.judges.keyless_asks
            try:
                if names is not None:
                    return runner.run(ctx, names, hook, terms)
                try:
                    return runner.run_due(ctx, hook, terms)
                except LeaseBusy:
                    return None
            finally:
                self._say_if_keyless(ctx, before)

    def _say_if_keyless(self, ctx, before: int) -> None:
        """Once per scheduler, as `Memory.run_due()` does: a tick asked a model that has no
        API key, so its turns stay pending and compression merges nothing. Also logged,
        since a background thread's warning is easy to miss."""
        if ctx.judges.keyless_asks > before and not self._warned_keyless:
            self._warned_keyless = True
            warning = PassesUndoneWarning(ctx.judges.keyless_env or "OPENAI_API_KEY")
            log.warning("scheduler: %s", warning)
            warnings.warn(warning, stacklevel=2)

    def _hook(self, progress):
        """Called before each statement of a pass, inside the pass's transaction: report
        progress, stop if asked to (the runner renews the lease there)."""
        in_thread = threading.current_thread() is self._thread

        def hook(label: str) -> None:
            if progress:
                progress(label)
            if in_thread and self._stopping.is_set():  # the last moment before the statement
                raise _Stopped()

        return hook

    def _open(self):
        if self._own is None:
            self._own = self.memory.runner_context()
        return self._own

    def failing_for(self) -> float:
        """Seconds (of the timer) since the first of the ticks that failed in a row; 0 when
        the last tick worked."""
        return 0.0 if self.failing_since is None else self._timer() - self.failing_since

    def _give_up(self) -> bool:
        failing = self.failing_for()
        if self.give_up_after is None or failing <= self.give_up_after:
            return False
        last = " ".join(str(self.last_error).split()) or type(self.last_error).__name__
        self.gave_up = StoreError(
            f"every tick failed for {failing:.0f}s ({self.failed_ticks} ticks), the last with: {last}"
        )
        log.error("scheduler: %s; giving up", self.gave_up)
        return True

    def _loop(self) -> None:
        while not self._stopping.is_set():
            try:
                results = self.tick()
            except _Stopped:
                break
            except LeaseLost as exc:  # too slow: another runner finished the work
                self.last_error = exc
                log.warning("scheduler tick: %s", exc)
            except Exception as exc:  # a failing tick is logged; the next one may succeed
                if self._stopping.is_set():  # interrupted by stop(): not a failure
                    break
                self.last_error = exc
                self.failed_ticks += 1
                if self.failing_since is None:
                    self.failing_since = self._timer()
                if isinstance(exc, (LetheError, *database_errors())):  # the database gone: a line
                    log.warning("scheduler tick failed: %s", " ".join(str(exc).split()))
                else:  # a bug: its traceback
                    log.exception("scheduler tick failed")
                if self._give_up():
                    break
            else:
                self.failing_since, self.failed_ticks = None, 0
                self.ticks += 1
                self.last_results = results
                if self.on_tick:
                    self.on_tick(results)
            self._stopping.wait(self.interval)
        self.close()  # stop() may have given up waiting for us: give the connections back
