"""Snapshot extensions: reviewable text files (compiled SQL as .sql, prompts as .txt)."""

from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode


class SQLSnapshot(SingleFileSnapshotExtension):
    file_extension = "sql"
    _write_mode = WriteMode.TEXT


class TextSnapshot(SingleFileSnapshotExtension):
    file_extension = "txt"
    _write_mode = WriteMode.TEXT
