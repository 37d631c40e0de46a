"""Benchmark data: article-format databases cached under bench/data/, and adopted copies.

* ``raw(n)``: an article-format database (bench.seed_article.generate) with ``n`` rows,
  generated once and cached (bench/data is gitignored); regenerated when missing.
* ``adopted(n)``: a copy of ``raw(n)`` opened once with ``engine.Memory`` (migrations,
  FTS rebuild, rank refresh done), cached under a key that changes whenever the engine's
  source or the policy changes, so a stale schema is never benchmarked.
* ``work_copy(src, tag)``: a fresh copy to run a measurement on; delete it with ``drop``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import hashlib
import os
import shutil
import sqlite3
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench" / "data"
WORK = DATA / "work"
POLICY = ROOT / "policies" / "lifecycle.yaml"

SEED = 7
GEN_NOW = dt.datetime(2025, 6, 1, 12, 0, 0)  # the generator's `now`
T = GEN_NOW + dt.timedelta(days=1)  # when the passes and recall run
T_ISO = T.isoformat(timespec="seconds")

DEFAULT_SIZES = (10_000, 100_000, 1_000_000)


def parse_sizes(text: str) -> list[int]:
    """'10000,100k,1M' -> [10000, 100000, 1000000]."""
    out = []
    for part in text.split(","):
        part = part.strip().lower().replace("_", "")
        if not part:
            continue
        mult = 1
        if part[-1] in "km":
            mult = 1_000 if part[-1] == "k" else 1_000_000
            part = part[:-1]
        out.append(int(float(part) * mult))
    if not out:
        raise ValueError("no sizes given")
    return out


def label(n: int) -> str:
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    if n >= 1_000 and n % 1_000 == 0:
        return f"{n // 1_000}k"
    return str(n)


def _sidecars(path: Path) -> list[Path]:
    return [Path(str(path) + s) for s in ("-wal", "-shm", "-journal")]


def drop(path: Path) -> None:
    # and the store's file of waiting writers (engine.store.sqlite.sqlite_wait)
    for p in [Path(path), *_sidecars(Path(path)), Path(str(path) + "-lethe-waiters")]:
        with contextlib.suppress(FileNotFoundError):
            p.unlink()


def _copy(src: Path, dst: Path) -> Path:
    for side in _sidecars(src)[::2]:  # -wal, -journal: a copy without them would be torn
        if side.exists():
            raise RuntimeError(f"{src} has a {side.name}: it was not closed cleanly")
    drop(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
    # written out now: else the first fsync of the copy (a checkpoint, a commit) writes
    # the whole copied file, and the call that made it takes 150 ms more at 1M
    with open(dst, "rb") as f:
        os.fsync(f.fileno())
    return dst


def work_copy(src: Path, tag: str) -> Path:
    """A fresh copy of ``src`` under bench/data/work/ (any old one is replaced)."""
    return _copy(Path(src), WORK / f"{Path(src).stem}.{tag}.db")


def raw(n: int, log=print) -> Path:
    """The cached article-format database with ``n`` rows (generated when missing)."""
    from .seed_article import generate

    path = DATA / f"article-{n}-seed{SEED}-{GEN_NOW:%Y%m%dT%H%M}.db"
    if path.exists():
        return path
    DATA.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    drop(tmp)
    t0 = time.perf_counter()
    generate(tmp, n, GEN_NOW, seed=SEED)
    os.replace(tmp, path)  # only a complete file is ever cached
    log(
        f"  generated {label(n)} article rows into {path.relative_to(ROOT)} "
        f"in {time.perf_counter() - t0:.1f} s"
    )
    return path


@functools.lru_cache(maxsize=None)
def engine_key() -> str:
    """Changes when any engine source file or the policy changes (computed once per
    process, so one run uses one adopted database per N even if the engine is edited
    meanwhile)."""
    h = hashlib.sha256()
    for p in sorted((ROOT / "engine").rglob("*.py")) + [POLICY]:
        h.update(str(p.relative_to(ROOT)).encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:12]


def adopted_path(n: int) -> Path:
    return DATA / f"adopted-{n}-{engine_key()}.db"


def adopt(path: Path) -> float:
    """Open ``path`` once with the engine (migrations, FTS rebuild, rank refresh);
    returns the seconds it took, in-process."""
    from engine import FixedClock, Memory

    t0 = time.perf_counter()
    mem = Memory(str(path), policy=str(POLICY), clock=FixedClock(T))
    mem.close()
    return time.perf_counter() - t0


def keep_adopted(n: int, path: Path) -> Path:
    """Store an adopted copy as the cached adopted database for ``n``."""
    dst = adopted_path(n)
    for old in DATA.glob(f"adopted-{n}-*.db"):
        if old != dst:
            drop(old)
    drop(dst)
    shutil.move(str(path), dst)
    return dst


def adopted(n: int, log=print) -> Path:
    """The cached adopted database for ``n`` (adopting a copy of raw(n) when missing)."""
    dst = adopted_path(n)
    if dst.exists():
        return dst
    copy = work_copy(raw(n, log), "adopting")
    secs = adopt(copy)
    log(f"  adopted {label(n)} in {secs:.1f} s")
    return keep_adopted(n, copy)


def count_by(path: Path, sql: str) -> dict:
    conn = sqlite3.connect(str(path))
    try:
        return {r[0]: r[1] for r in conn.execute(sql)}
    finally:
        conn.close()
