-- policy: archive  dialect: sqlite

-- recall
-- recall
SELECT memories.*, 0.0 AS relevance
FROM memories
WHERE "namespace" = ? AND ("status" = ?)
ORDER BY "rank" DESC, "created_at" DESC, "id" DESC
LIMIT ?;
-- params: [':namespace', 'active', ':limit']
-- while recall's index holds only the head of the ranking (rank >= :floor, a number the store
-- chooses from the ranks; a store of few memories keeps every active one in it), this runs
-- first, and the statement above only when it returns fewer than :limit rows:
-- recall, over the head of the ranking
SELECT memories.*, 0.0 AS relevance
FROM memories
WHERE "namespace" = ? AND ("status" = ?) AND "rank" >= ?
ORDER BY "rank" DESC, "created_at" DESC, "id" DESC
LIMIT ?;
-- params: [':namespace', 'active', ':floor', ':limit']
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
-- while recall's index holds only the head of the ranking (rank >= :floor, a number the store
-- chooses from the ranks; a store of few memories keeps every active one in it), this runs
-- first, and the statement above only when it returns fewer than :limit rows:
-- recall (scored by a query), over the head of the ranking
SELECT memories.*, coalesce((SELECT -s / (1.0 - s) FROM (SELECT bm25(memories_fts) AS s FROM memories_fts
      WHERE memories_fts MATCH ? AND rowid = memories.id)), 0.0) AS relevance
FROM memories
WHERE "namespace" = ? AND ("status" = ?) AND "rank" >= ?
ORDER BY "rank" DESC, "created_at" DESC, "id" DESC
LIMIT ?;
-- params: [':query', ':namespace', 'active', ':floor', ':limit']
-- recall (best matches)
WITH matched AS MATERIALIZED (SELECT rowid AS fts_id, bm25(memories_fts) AS score FROM memories_fts WHERE memories_fts MATCH ?),
best AS MATERIALIZED (SELECT fts_id, score FROM matched ORDER BY score LIMIT 4 * ?)
SELECT memories.*, coalesce(-fts.score / (1.0 - fts.score), 0.0) AS relevance
FROM (SELECT * FROM matched AS fts WHERE (SELECT count(*) FROM best AS fts CROSS JOIN memories ON memories.id = fts.fts_id WHERE "namespace" = ? AND ("status" = ?)) < ?
      OR coalesce(-fts.score / (1.0 - fts.score), 0.0) >= (SELECT min(coalesce(-fts.score / (1.0 - fts.score), 0.0)) FROM best AS fts)) AS fts
CROSS JOIN memories ON memories.id = fts.fts_id
WHERE "namespace" = ? AND ("status" = ?)
ORDER BY coalesce(-fts.score / (1.0 - fts.score), 0.0) DESC, "rank" DESC, "created_at" DESC, "id" DESC
LIMIT ?;
-- params: [':query', ':limit', ':namespace', 'active', ':limit', ':namespace', 'active', ':limit']
-- rank refresh
UPDATE memory_rows AS memories SET "rank" = ("importance" * "confidence")
WHERE "namespace" = ?;
-- params: [':namespace']
-- rank refresh (by id)
UPDATE memory_rows AS memories SET "rank" = ("importance" * "confidence")
WHERE +"namespace" = ? AND "id" IN (SELECT value FROM json_each(?));
-- params: [':namespace', ':ids']
-- when the namespace is over half of the file's memories, its ranks are refreshed in id order, over
--   every id:
-- rank refresh (in id order)
UPDATE memory_rows AS memories SET "rank" = ("importance" * "confidence")
WHERE +"namespace" = ? AND "id" >= ? AND "id" < ?;
-- params: [':namespace', ':from_id', ':to_id']

-- write, merge and explain
-- write: supersede
UPDATE memory_rows AS memories SET "status" = ?, "contradicted_by" = ?
WHERE +"namespace" = ? AND "id" IN (SELECT value FROM json_each(?)) AND "status" = ?;
-- params: ['superseded', ':new_id', ':namespace', ':ids', 'active']
-- forget
UPDATE memory_rows AS memories SET "status" = ?
WHERE +"namespace" = ? AND "id" IN (SELECT value FROM json_each(?)) AND "status" = ?;
-- params: ['archived', ':namespace', ':ids', 'active']
-- write: reinforce
UPDATE memory_rows AS memories
SET "confidence" = min(?, ("confidence" + ?)),
    "access_count" = ("access_count" + ?),
    "last_accessed" = ?,
    "rank" = ("importance" * (min(?, ("confidence" + ?))))
WHERE +"namespace" = ? AND "id" IN (SELECT value FROM json_each(?)) AND "status" = ?;
-- params: [1.0, 0.1, 1, ':now', 1.0, 0.1, ':namespace', ':ids', 'active']
-- recall explain: reasons
SELECT CASE WHEN ("status" = ?) THEN 'eligible' WHEN coalesce("status", '') <> 'active' THEN coalesce("status", 'unknown') ELSE 'below_floor' END AS reason, count(*) AS n
FROM memories
WHERE "namespace" = ?
GROUP BY reason;
-- params: ['active', ':namespace']
-- recall explain: reasons (with a query)
SELECT CASE WHEN ("status" = ?) THEN 'eligible' WHEN coalesce("status", '') <> 'active' THEN coalesce("status", 'unknown') ELSE 'below_floor' END AS reason, count(*) AS n
FROM memories
WHERE "namespace" = ?
GROUP BY reason;
-- params: ['active', ':namespace']
-- recall explain: order keys
SELECT memories.id, "rank" AS key_0, "created_at" AS key_1
FROM memories
WHERE +"namespace" = ? AND memories.id IN (SELECT value FROM json_each(?));
-- params: [':namespace', ':ids']
-- recall explain: order keys (with a query)
SELECT memories.id, "rank" AS key_0, "created_at" AS key_1
FROM memories
LEFT JOIN (SELECT rowid AS fts_id, bm25(memories_fts) AS score FROM memories_fts WHERE memories_fts MATCH ?) AS fts ON fts.fts_id = memories.id
WHERE +"namespace" = ? AND memories.id IN (SELECT value FROM json_each(?));
-- params: [':query', ':namespace', ':ids']
