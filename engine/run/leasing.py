"""Holding a namespace's pass lease while running passes: every runner (the scheduler and
`lethe daemon`, `lethe run`, `Memory.run()` and `run_due()`, experiments) goes through
`hold`, so any number of runners of any kind apply each pass once.

- The lease is taken before anything is read: which passes are due, where an interrupted
  batched pass stopped. A runner that cannot get it waits up to `wait` seconds, then
  raises LeaseBusy without running anything.
- It is kept alive while its holder works, in SQL or waiting on a model: a heartbeat
  thread renews it every third of its ttl (by the injected clock, or by real time, which
  ever comes first), and every fenced commit renews it too.
- Every commit a holder makes (each pass, each batch, each merge, each judged pending
  turn) is fenced: inside its transaction the lease row must still name the holder, or
  the commit rolls back with LeaseLost. A holder that was too slow never writes over the
  work of the runner that took over from it.
- It is given back afterwards. A holder that dies leaves a row that expires `ttl` later,
  or at once for a runner on the same host, which sees that the holder's process is gone.
  (A takeover is always safe: were the holder alive after all, its commits would fail the
  fence; only its uncommitted work is lost.)

The lease's times come from the memory's clock, like every other time; only the
heartbeat's sleep is real time.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import threading
import time
import uuid
from dataclasses import dataclass, replace
from typing import Iterator

from engine.base import processes
from engine.base.errors import LeaseBusy, LeaseLost
from engine.run.context import Context

DEFAULT_TTL = dt.timedelta(minutes=15)
POLL = 0.2  # seconds between the heartbeat's looks at the clock, and between tries to take

log = logging.getLogger("lethe.leasing")


@dataclass(frozen=True)
class LeaseTerms:
    """How a runner holds the lease: for how long a renewal lasts (`ttl`), under which
    name (`holder`, default host:pid:random) and how long to wait for it (`wait`, s)."""

    ttl: dt.timedelta = DEFAULT_TTL
    holder: str | None = None
    wait: float = 0.0


def _host() -> str:
    """This machine's name (socket.gethostname(), without importing socket where os has it)."""
    if hasattr(os, "uname"):
        return os.uname().nodename
    import socket

    return socket.gethostname()


def default_holder() -> str:
    """host:pid:random, so a lease row says who holds it and no two holders share a name."""
    return f"{_host()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Held:
    """A lease this runner holds: the fence its commits check, and its heartbeat."""

    def __init__(self, lease, clock):
        self.lease, self.clock = lease, clock
        self.lost_to_another = False
        self._renewed, self._renewed_real = clock(), time.monotonic()
        self.busy = threading.Lock()  # the heartbeat and release never share the connection

    # -- the fence (engine.store calls these inside a holder's transaction)
    def renew_sql(self) -> tuple[str, tuple]:
        return self.lease.renew_sql()

    def renewed(self) -> None:
        self._renewed, self._renewed_real = self.clock(), time.monotonic()

    def lost(self) -> LeaseLost:
        self.lost_to_another = True
        return LeaseLost(
            f"another runner took over the passes of namespace "
            f"'{self.lease.namespace}' while this one worked (its lease had run "
            "out); what it had not committed was rolled back"
        )

    def check(self) -> None:
        """Raise LeaseLost at once when the heartbeat found the lease taken over."""
        if self.lost_to_another:
            raise self.lost()

    def due(self) -> bool:
        """A third of the ttl has gone by since the last renewal, by the clock or in real time."""
        third = self.lease.ttl / 3
        return (
            self.clock() - self._renewed >= third
            or time.monotonic() - self._renewed_real >= third.total_seconds()
        )

    def beat(self) -> None:
        """Renew on the lease's own connection if due (the heartbeat thread calls this)."""
        with self.busy:
            if self.lost_to_another or not self.due():
                return
            ok = self.lease.renew()  # None: the write lock was busy; the next look retries
            if ok is False:
                self.lost_to_another = True
            elif ok:
                self.renewed()


class _Heartbeat:
    """One thread per process renews every lease held here, looking every POLL seconds
    (one thread, started once: a runner that takes the lease costs no thread start)."""

    def __init__(self) -> None:
        self._held: set[Held] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def add(self, held: Held) -> None:
        with self._lock:
            self._held.add(held)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, daemon=True, name="lethe-lease-heartbeat")
                self._thread.start()

    def remove(self, held: Held) -> None:
        with self._lock:
            self._held.discard(held)
        with held.busy:  # wait for a renewal in flight on its connection
            pass

    def _run(self) -> None:
        while True:
            time.sleep(POLL)
            with self._lock:
                held = list(self._held)
            for h in held:
                try:
                    h.beat()
                except Exception as exc:  # the server gone a moment: the next
                    # look retries; a lease never renewed runs out, and its holder's fenced
                    # commit finds that out (LeaseLost)
                    log.warning("lease heartbeat: %s", " ".join(str(exc).split())[:300])


HEARTBEAT = _Heartbeat()


def busy_message(lease) -> str:
    held = lease.current()
    if held is None:  # given back between our try and this look: next time
        return f"another runner was taking the passes of namespace '{lease.namespace}'"
    return (
        f"another runner holds the passes of namespace '{lease.namespace}' until "
        f"{held['expires_at']} ({held['holder']})"
    )


@contextlib.contextmanager
def hold(ctx: Context, terms: LeaseTerms | None = None) -> Iterator[Context]:
    """The context under the namespace's lease: its commits are fenced, its lease kept
    alive until the block ends, then given back. Raises LeaseBusy when another runner
    keeps it for longer than `terms.wait`. A database only this connection can reach
    (`:memory:`) needs no lease."""
    terms = terms or LeaseTerms()
    if ctx.lease is not None or ctx.store.path in ("", ":memory:"):
        yield ctx  # already held (a runner calling a runner), or nobody else can run
        return
    lease = ctx.store.lease(ctx.namespace, terms.ttl, terms.holder or default_holder())
    try:
        if not _take(lease, terms.wait):
            raise LeaseBusy(busy_message(lease))
        held = Held(lease, ctx.clock)
        HEARTBEAT.add(held)
        try:
            yield replace(ctx, lease=held)
        finally:
            HEARTBEAT.remove(held)
            lease.release()
    finally:
        lease.close()


def holder_is_gone(holder: str) -> bool:
    """A holder named by `default_holder` on this host whose process no longer exists."""
    host, _, rest = holder.partition(":")
    return host == _host() and processes.gone(rest.partition(":")[0])


def _take(lease, wait: float) -> bool:
    deadline = time.monotonic() + max(0.0, wait)
    while True:
        if lease.acquire():
            return True
        held = lease.current()
        if held and holder_is_gone(held["holder"]) and lease.take_over(held["holder"]):
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(POLL, left))
