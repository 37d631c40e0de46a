"""Vectors in SQLite: the sqlite-vec extension, storing embeddings, and a bounded
nearest-neighbour search.

Vectors live in the plain tables of migration m016 (`memory_vectors`, `vector_cells`);
sqlite-vec supplies the distance functions (`vec_distance_cosine`,
`vec_distance_hamming`, `vec_quantize_binary`). A search costs the same at any size: it
scans the few cells nearest the query (an inverted-file index: each vector sits in the cell
of its nearest centroid) by their sign bits, from a covering index, and the compiled
neighbour statement rescores that shortlist with the full vectors. Until a namespace holds
REINDEX_AT vectors everything stays in cell 0 and the scan is exact.
"""

from __future__ import annotations

import json
import threading
from typing import Any, Callable

from engine.base.distribution import extra_error
from engine.base.errors import StoreError
from engine.store.shared import StoreCommon

CELL_SIZE = 1024  # vectors per cell the index aims for
PROBES = 12  # cells searched per query
SHORTLIST = 4  # sign-bit candidates kept per neighbour wanted, before rescoring (8 found
# no more sources than 4 in bench/neighbours.py, at 1.3x the time)
REINDEX_AT = 4 * CELL_SIZE
_OPENING = threading.Lock()  # guards each store's second connection (nearest_beside)


def load_extension(db) -> None:
    """sqlite-vec's functions on `db`; where this Python's SQLite loads no extension, the
    same four functions in Python (`python_functions`): every connection stays on the
    standard library's SQLite, the one the application's own `sqlite3` uses. Two SQLite
    libraries in one process on one file drop each other's locks and delete a WAL in use."""
    if not hasattr(db, "enable_load_extension"):
        python_functions(db)
        return
    try:
        import sqlite_vec
    except ImportError as exc:
        raise extra_error(
            exc, "embed", "embeddings (the sqlite-vec extension)", ("sqlite_vec",), StoreError
        ) from None
    db.enable_load_extension(True)
    try:
        sqlite_vec.load(db)
    finally:
        db.enable_load_extension(False)


def python_functions(db) -> None:
    """vec_distance_cosine, vec_quantize_binary, vec_bit and vec_distance_hamming in Python
    (numpy), answering as sqlite-vec does: cosine distance of float32 blobs (NULL when a
    vector is all zero), sign bits packed least significant first, Hamming distance. A
    blob that is no vector (a corrupt row) gives NULL, never an error."""
    import numpy as np

    def floats(blob):
        ok = isinstance(blob, bytes) and blob and len(blob) % 4 == 0
        return np.frombuffer(blob, dtype=np.float32) if ok else None

    def cosine(a, b):
        x, y = floats(a), floats(b)
        if x is None or y is None or len(x) != len(y):
            return None
        norms = float(np.linalg.norm(x)) * float(np.linalg.norm(y))
        return None if norms == 0 or not np.isfinite(norms) else 1.0 - float(x @ y) / norms

    def quantize(v):
        x = floats(v)
        return None if x is None else np.packbits(x > 0, bitorder="little").tobytes()

    def hamming(a, b):
        if not isinstance(a, bytes) or not isinstance(b, bytes) or len(a) != len(b):
            return None
        xor = np.frombuffer(a, dtype=np.uint8) ^ np.frombuffer(b, dtype=np.uint8)
        return float(np.unpackbits(xor).sum())

    for name, n, fn in (
        ("vec_distance_cosine", 2, cosine),
        ("vec_quantize_binary", 1, quantize),
        ("vec_bit", 1, lambda b: b),
        ("vec_distance_hamming", 2, hamming),
    ):
        db.create_function(name, n, fn, deterministic=True)


class VectorIndex(StoreCommon):
    """The vector methods of a SQLite store (mixed into SqliteStore; `self.db` is its
    connection, with sqlite-vec loaded when the policy declares an embedding model, and
    `self._connect()` opens another one like it)."""

    _connect: Callable[[], Any]  # another connection like `db` (SqliteStore's)
    _beside = None  # (connection, thread) of nearest_beside, opened at its first call

    def save_vector(self, memory_id: int, namespace: str, model: str, vector: bytes) -> None:
        """Store (or replace) a memory's vector, in its nearest cell, in the caller's
        transaction."""
        cell = self._nearest_cells(namespace, model, vector, 1)[0]
        self.db.execute(
            "INSERT OR REPLACE INTO memory_vectors (memory_id, namespace, model, "
            "cell, bits, vector) VALUES (?, ?, ?, ?, vec_quantize_binary(?), ?)",
            (memory_id, namespace, model, cell, vector, vector),
        )

    def vector_size(self, namespace: str, model: str) -> int | None:
        """The size in bytes of this namespace's vectors of `model` (they all have one), or
        None before the first is stored."""
        row = self.db.execute(
            "SELECT length(vector) FROM memory_vectors WHERE namespace = ? AND model = ? LIMIT 1",
            (namespace, model),
        ).fetchone()
        return None if row is None else row[0]

    def missing_vectors(self, namespace: str, model: str, limit: int) -> list[tuple[int, str]]:
        """Active memories without a vector of `model`, newest first (for a backfill)."""
        return [
            (r[0], r[1])
            for r in self.db.execute(
                "SELECT m.id, m.content FROM memories m WHERE m.namespace = ? AND m.status = "
                "'active' AND NOT EXISTS (SELECT 1 FROM memory_vectors v WHERE v.memory_id = m.id "
                "AND v.model = ?) ORDER BY m.id DESC LIMIT ?",
                (namespace, model, limit),
            )
        ]

    def vectors_of(self, namespace: str, model: str, ids: list[int]) -> dict[int, bytes]:
        """The stored vectors of `model` of some memories of a namespace, by id."""
        return {
            r[0]: r[1]
            for r in self.db.execute(
                "SELECT memory_id, vector FROM memory_vectors WHERE namespace = ? AND model = ? "
                "AND memory_id IN (SELECT value FROM json_each(?))",
                (namespace, model, json.dumps(list(ids))),
            )
        }

    def nearest(self, namespace: str, model: str, vector: bytes, k: int) -> list[int]:
        """Ids of about `k * SHORTLIST` memories nearest `vector` by their sign bits, from
        the cells nearest it: a shortlist for the compiled neighbour statement to rescore."""
        return self._shortlist(self.db, self._version(), namespace, model, vector, k)

    def nearest_beside(self, namespace: str, model: str, vector: bytes, k: int):
        """`nearest()` on a second connection of this store, in a thread of its own, so
        the caller's full-text query runs meanwhile: SQLite and the distance functions run
        without holding the GIL, and at 1M memories the two take 5-8 ms each. Inside a
        transaction it runs at once on the store's own connection, which alone sees what
        that transaction wrote. Returns a concurrent.futures.Future."""
        # imported here: 3 ms of every start-up, and only a store with vectors gets here
        from concurrent.futures import Future, ThreadPoolExecutor

        if self.db.in_transaction:
            done: Future = Future()
            done.set_result(self.nearest(namespace, model, vector, k))
            return done
        with _OPENING:  # two threads sharing a store open one connection, not two
            if self._beside is None:
                db = self._connect()
                load_extension(db)
                db.wait = self.timeout  # waits for a lock itself, as the store's does
                db.execute("PRAGMA busy_timeout = 0")
                self._beside = (db, ThreadPoolExecutor(1, thread_name_prefix="lethe-vectors"))
            db, pool = self._beside
        # the cells are checked against this connection's data_version, read here: the
        # second one's changes at every commit of the first (a write, a recall's access)
        return pool.submit(self._shortlist, db, self._version(), namespace, model, vector, k)

    def close_beside(self) -> None:
        """Stop the thread and close the connection `nearest_beside` opened, if it did."""
        with _OPENING:
            beside, self._beside = self._beside, None
        if beside is not None:
            beside[1].shutdown(wait=True)
            beside[0].close()

    def _shortlist(self, db, version: int, namespace: str, model: str, vector: bytes, k: int) -> list[int]:
        cells = self._nearest_cells(namespace, model, vector, PROBES, db, version)
        # the query's sign bits computed here and bound: a subquery in ORDER BY is
        # evaluated again for every row sorted (twice the time of the scan itself)
        bits = db.execute("SELECT vec_quantize_binary(?)", (vector,)).fetchone()[0]
        rows = db.execute(
            "SELECT memory_id FROM memory_vectors INDEXED BY memory_vectors_cell "
            "WHERE namespace = ? AND model = ? AND cell IN (SELECT value FROM json_each(?)) "
            # a row whose bits are not the query's size (corrupt) is left out, not an error
            "AND length(bits) = ? ORDER BY vec_distance_hamming(vec_bit(bits), vec_bit(?)) LIMIT ?",
            (namespace, model, json.dumps(cells), len(bits), bits, k * SHORTLIST),
        )
        return [r[0] for r in rows]

    def pair_similarities(self, model: str, ids: list[int]) -> dict[tuple[int, int], float]:
        """Cosine similarity of every pair of these memories that both have a vector."""
        rows = self.db.execute(
            "SELECT a.memory_id, b.memory_id, "  # NULL for a zero vector: 0
            "coalesce(1.0 - vec_distance_cosine(a.vector, b.vector), 0.0) "
            "FROM memory_vectors a JOIN memory_vectors b ON a.memory_id < b.memory_id "
            "WHERE a.model = ? AND b.model = ? AND length(a.vector) = length(b.vector) "
            "AND a.memory_id IN (SELECT value FROM "
            "json_each(?)) AND b.memory_id IN (SELECT value FROM json_each(?))",
            (model, model, json.dumps(ids), json.dumps(ids)),
        )
        return {(a, b): s for a, b, s in rows}

    def _nearest_cells(
        self, namespace: str, model: str, vector: bytes, n: int, db=None, version: int | None = None
    ) -> list[int]:
        import numpy as np

        cells, centroids = self._centroids(
            namespace, model, self.db if db is None else db, self._version() if version is None else version
        )
        if not cells:
            return [0]
        # centroids are unit vectors: the largest dot products are the smallest cosine distances
        scores = centroids @ np.frombuffer(vector, dtype=np.float32)
        top = np.argsort(-scores, kind="stable")[:n]
        return [cells[i] for i in top.tolist()]

    def _version(self) -> int:
        return self.db.execute("PRAGMA data_version").fetchone()[0]

    def _centroids(self, namespace: str, model: str, db, version: int):
        """The cells' ids and centroids as a matrix, kept in memory (reading them for each
        search cost more than the search of the cells), read through `db`. Read again
        when `version` (the store's own connection's `PRAGMA data_version`, which moves
        at another connection's commit) is not the one they were read at, or after this
        store's `reindex`."""
        import numpy as np

        cache = self.__dict__.setdefault("_centroid_cache", {})
        held = cache.get((namespace, model))
        if held is None or held[0] != version:
            rows = db.execute(
                "SELECT cell, centroid FROM vector_cells WHERE namespace = ? AND model = ? ORDER BY cell",
                (namespace, model),
            ).fetchall()
            matrix = (
                np.vstack([np.frombuffer(r[1], dtype=np.float32) for r in rows])
                if rows
                else np.zeros((0, 0), dtype=np.float32)
            )
            held = cache[(namespace, model)] = (version, [r[0] for r in rows], matrix)
        return held[1], held[2]

    def vector_count(self, namespace: str, model: str) -> tuple[int, int]:
        """(vectors, cells) of a namespace's index."""
        vectors = self.db.execute(
            "SELECT count(*) FROM memory_vectors WHERE namespace = ? AND model = ?", (namespace, model)
        ).fetchone()[0]
        cells = self.db.execute(
            "SELECT count(*) FROM vector_cells WHERE namespace = ? AND model = ?", (namespace, model)
        ).fetchone()[0]
        return vectors, cells

    def reindex_due(self, namespace: str, model: str) -> bool:
        """Has the index outgrown its cells (4x the vectors it was built for)?"""
        vectors, cells = self.vector_count(namespace, model)
        return vectors >= REINDEX_AT and vectors > max(cells, 1) * CELL_SIZE * 4

    def reindex(self, namespace: str, model: str, iterations: int = 4) -> int:
        """Rebuild the cells: centroids from a spread sample (a few rounds of k-means),
        then every vector moved to its nearest one, in one transaction. Needs numpy.
        Returns the number of cells."""
        import numpy as np

        ids = [
            r[0]
            for r in self.db.execute(
                "SELECT memory_id FROM memory_vectors WHERE namespace = ? AND model = ? ORDER BY memory_id",
                (namespace, model),
            )
        ]
        n_cells = max(1, len(ids) // CELL_SIZE)
        sample_ids = ids[:: max(1, len(ids) // (n_cells * 16))]
        sample = self._matrix(np, sample_ids)
        centroids = sample[np.linspace(0, len(sample) - 1, n_cells).astype(int)]
        for _ in range(iterations):
            nearest = np.argmax(sample @ centroids.T, axis=1)
            for c in range(n_cells):
                members = sample[nearest == c]
                if len(members):
                    mean = members.mean(axis=0)
                    centroids[c] = mean / (np.linalg.norm(mean) or 1.0)
        with self.transaction():
            self.db.execute("DELETE FROM vector_cells WHERE namespace = ? AND model = ?", (namespace, model))
            self.db.executemany(
                "INSERT INTO vector_cells VALUES (?, ?, ?, ?)",
                [(namespace, model, c + 1, centroids[c].tobytes()) for c in range(n_cells)],
            )
            for start in range(0, len(ids), 20_000):
                chunk = ids[start : start + 20_000]
                cells = np.argmax(self._matrix(np, chunk) @ centroids.T, axis=1) + 1
                self.db.executemany(
                    "UPDATE memory_vectors SET cell = ? WHERE memory_id = ?", zip(cells.tolist(), chunk)
                )
        self.__dict__.pop("_centroid_cache", None)  # this connection's data_version stays put
        return n_cells

    def _matrix(self, np, ids: list[int]):
        rows = self.db.execute(
            "SELECT vector FROM memory_vectors WHERE memory_id IN "
            "(SELECT value FROM json_each(?)) ORDER BY memory_id",
            (json.dumps(ids),),
        )
        return np.vstack([np.frombuffer(r[0], dtype=np.float32) for r in rows])
