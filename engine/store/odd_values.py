"""What migration m015 counts as an odd value of a memory, and what it makes of it: one
rule for both backends (sqlite_schema.py and postgres_schema.py each find the odd rows
their own way, then fix each with `fix_row`)."""

from __future__ import annotations

import json
import math

# what each numeric column may hold: (lowest, highest, value for NULL, text, blob or NaN)
NUMBERS = {
    "importance": (0.0, 10.0, 5.0),
    "confidence": (0.0, 1.0, 1.0),
    "decay_score": (0.0, 1.0, 1.0),
    "access_count": (0, 2**62, 0),
}
TEXTS = ("content", "summary", "tags", "kind", "scene")
COLUMNS = [*NUMBERS, *TEXTS]


def normalised(values: dict) -> dict:
    """column -> (what it was, as text; what it becomes) for each odd value of one row."""
    out = {}
    for col, (lo, hi, default) in NUMBERS.items():
        v = values[col]
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        new = min(hi, max(lo, v)) if ok else default
        if col == "access_count":
            new = int(new)
        if not ok or new != v:
            out[col] = (_shown(v), new)
    for col in TEXTS:
        v = values[col]
        if v is None and col != "content" or isinstance(v, str):
            continue
        new = v.decode("utf-8", errors="replace") if isinstance(v, bytes) else ("" if v is None else str(v))
        out[col] = (_shown(v), new)
    return out


def _shown(value) -> str:
    if isinstance(value, bytes):
        return f"a blob of {len(value)} bytes"
    return "NULL" if value is None else repr(value)


def fix_row(db, p: str, row, now: str | None) -> None:
    """Make one row's odd values usable (`row`: its id, then COLUMNS), with a `normalised`
    event saying what each was; `p` is the dialect's placeholder."""
    fixed = normalised(dict(zip(COLUMNS, row[1:])))
    if not fixed:
        return
    db.execute(
        f"UPDATE memories SET {', '.join(f'{c} = {p}' for c in fixed)} WHERE id = {p}",
        [value for _, value in fixed.values()] + [row[0]],
    )
    detail = {c: {"was": was, "now": value} for c, (was, value) in fixed.items()}
    db.execute(
        "INSERT INTO memory_events (memory_id, event_type, detail, occurred_at) "
        f"VALUES ({p}, 'normalised', {p}, {p})",
        (row[0], json.dumps(detail, ensure_ascii=False, sort_keys=True), now),
    )
