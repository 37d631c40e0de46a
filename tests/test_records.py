"""MemoryRecord.from_rows: records built from result rows equal those __init__ builds, keep
the defaults of the fields a statement leaves out, and share no tag list."""

import sqlite3
from dataclasses import MISSING, dataclass, field, fields

import pytest

from engine.base.records import MemoryRecord, parse_tags


def rows(sql: str):
    db = sqlite3.connect(":memory:")
    db.row_factory = sqlite3.Row
    return db.execute(sql).fetchall()


def test_records_equal_what_init_builds():
    got = MemoryRecord.from_rows(
        rows(
            "SELECT 7 AS id, 'uses uv' AS content, '[\"deploy\", \"tooling\"]' AS tags, "
            "8.0 AS importance, 'archived' AS status, 0.5 AS rank, 'extra' AS not_a_field"
        )
    )
    assert got == [
        MemoryRecord(
            id=7, content="uses uv", tags=["deploy", "tooling"], importance=8.0, status="archived", rank=0.5
        )
    ]
    assert got[0].confidence == 1.0 and got[0].namespace == "default"  # left out: defaults
    assert list(vars(got[0])) == list(MemoryRecord.__dataclass_fields__)


def test_the_first_of_two_columns_with_one_name_wins():
    got = MemoryRecord.from_rows(rows("SELECT 1 AS id, 'a' AS content, 'b' AS content"))
    assert got[0].content == "a"


def test_no_tags_column_and_a_missing_required_one():
    (one,) = MemoryRecord.from_rows(rows("SELECT 'a' AS content, 3 AS id"))
    assert one.id == 3 and one.tags == []
    with pytest.raises(TypeError, match="content"):
        MemoryRecord.from_rows(rows("SELECT 3 AS id"))


def test_tags_is_the_one_field_built_by_a_factory():
    # from_rows sets tags itself and every other field from DEFAULTS: another field with a
    # default_factory would get None there instead of its own new value
    assert [f.name for f in fields(MemoryRecord) if f.default_factory is not MISSING] == ["tags"]


@dataclass
class Mine(MemoryRecord):
    """A caller's own record: its own fields, defaults and __post_init__."""

    seen: list = field(default_factory=list)

    def __post_init__(self):
        self.seen.append(self.id)


def test_a_subclass_gets_its_own_init():
    (one,) = Mine.from_rows(rows("SELECT 5 AS id, 'x' AS content, '[\"a\"]' AS tags"))
    assert isinstance(one, Mine) and one.seen == [5] and one.tags == ["a"]
    assert one == Mine(id=5, content="x", tags=["a"])


def test_records_share_no_tag_list():
    a, b = MemoryRecord.from_rows(
        rows("SELECT 1 AS id, 'x' AS content, '[\"deploy\"]' AS tags UNION ALL SELECT 2, 'y', '[\"deploy\"]'")
    )
    a.tags.append("changed")
    assert b.tags == ["deploy"]
    (again,) = MemoryRecord.from_rows(rows("SELECT 3 AS id, 'z' AS content, '[\"deploy\"]' AS tags"))
    assert again.tags == ["deploy"]  # a later statement's records neither


def test_tags_that_hold_objects_are_parsed_for_each_record():
    a, b = MemoryRecord.from_rows(
        rows("SELECT 1 AS id, 'x' AS content, '[{\"k\": 1}]' AS tags UNION ALL SELECT 2, 'y', '[{\"k\": 1}]'")
    )
    a.tags[0]["k"] = 2
    assert b.tags == [{"k": 1}]


def test_stored_tag_forms():
    assert parse_tags('["a", "b"]') == ["a", "b"]
    assert parse_tags("a, b ,") == ["a", "b"]  # older rows: comma-separated text
    assert parse_tags(None) == [] and parse_tags("[]") == []
    assert [
        r.tags
        for r in MemoryRecord.from_rows(
            rows(
                "SELECT 1 AS id, 'x' AS content, 'a, b' AS tags UNION ALL SELECT 2, 'y', NULL "
                "UNION ALL SELECT 3, 'z', '\"solo\"'"
            )
        )
    ] == [["a", "b"], [], ["solo"]]
