"""The SQLite store: one file, the embedded default (`sqlite_store.SqliteStore`), its
schema (`sqlite_schema`), lease, write-lock waiting, checkpoints, recall's head index,
the text kept apart (m020) and the vector index (sqlite-vec)."""
