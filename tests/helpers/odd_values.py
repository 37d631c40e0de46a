"""Odd values of every sort in the seed article's own columns, as an older Lethe or
another program could have left them."""

from __future__ import annotations

# the article's own columns (every old version has them): odd values of every sort
ODD = [
    (3, "importance", "high"),
    (4, "importance", 42.0),
    (5, "confidence", None),
    (6, "confidence", "sure"),
    (7, "decay_score", float("inf")),
    (8, "decay_score", -2.5),
    (9, "access_count", -3),
    (10, "access_count", "often"),
    (12, "content", b"User prefers \xff Docker"),
    (13, "summary", b"\xc3\xa9t\xc3\xa9 \x80 a blob"),
    (14, "tags", b"\xfe\xff"),
    (15, "importance", float("-inf")),
]
