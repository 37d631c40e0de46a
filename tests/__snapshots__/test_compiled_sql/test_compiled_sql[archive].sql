-- policy: archive  dialect: sqlite

-- recall
-- recall
SELECT memories.*, 0.0 AS relevance
FROM memories
WHERE "namespace" = ? AND ("status" = ?)
ORDER BY "rank" DESC, "created_at" DESC, "id" DESC
LIMIT ?;
-- params: [':namespace', 'active', ':limit']
-- recall (matching a query)
SELECT memories.*, coalesce(-fts.score / (1.0 - fts.score), 0.0) AS relevance
FROM (SELECT rowid AS fts_id, bm25(memories_fts) AS score FROM memories_fts
      WHERE memories_fts MATCH ?) AS fts
CROSS JOIN memories ON memories.id = fts.fts_id
WHERE "namespace" = ? AND ("status" = ?)
ORDER BY "rank" DESC, "created_at" DESC, "id" DESC
LIMIT ?;
-- params: [':query', ':namespace', 'active', ':limit']
-- recall (scored by a query)
SELECT memories.*, coalesce((SELECT -s / (1.0 - s) FROM (SELECT bm25(memories_fts) AS s FROM memories_fts
      WHERE memories_fts MATCH ? AND rowid = memories.id)), 0.0) AS relevance
FROM memories
WHERE "namespace" = ? AND ("status" = ?)
ORDER BY "rank" DESC, "created_at" DESC, "id" DESC
LIMIT ?;
-- params: [':query', ':namespace', 'active', ':limit']
-- rank refresh
UPDATE memories SET "rank" = ("importance" * "confidence")
WHERE "namespace" = ?;
-- params: [':namespace']
-- rank refresh (by id)
UPDATE memories SET "rank" = ("importance" * "confidence")
WHERE +"namespace" = ? AND "id" IN (SELECT value FROM json_each(?));
-- params: [':namespace', ':ids']
