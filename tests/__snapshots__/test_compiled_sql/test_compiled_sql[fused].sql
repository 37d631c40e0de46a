-- policy: fused  dialect: sqlite

-- pass expiry (every 1:00:00)
-- when it reaches over half of the file's memories, the indexes over status are dropped before its
--   rules and created again after them, in its transaction (not recall's while it holds only the
--   head of the ranking, nor the small partial ones: those move the few entries the pass changes;
--   recall's is made again when its head has drifted); its rules are then the ones over an id range
--   below, run over every id (the rows read in id order, not through an index on namespace)
-- expiry reach
SELECT count(*) FROM memory_rows AS memories
WHERE "namespace" = ? AND ((("status" = ?) AND ("expires_at" < ?)));
-- params: [':namespace', 'active', ':now']
-- asked first, in its transaction: whether any row is due; when none is, its rules do not run (they
--   could change nothing) and only its run is recorded
-- expiry due
SELECT 1 FROM memory_rows AS memories
WHERE "namespace" = ? AND ((("status" = ?) AND ("expires_at" < ?)))
LIMIT 1;
-- params: [':namespace', 'active', ':now']
-- expiry.rules[0] event expired
INSERT INTO memory_events (memory_id, event_type, detail, occurred_at)
SELECT "id", ?, json_object(?, ?, ?, json_object(?, "status"), ?, json_object(?, ?)), ?
FROM memory_rows AS memories
WHERE "namespace" = ? AND (("status" = ?) AND ("expires_at" < ?));
-- params: ['expired', 'rule', 'expiry.rules[0]', 'from', 'status', 'to', 'status', 'expired',
--   ':now', ':namespace', 'active', ':now']
-- expiry.rules[0] update
UPDATE memory_rows AS memories
SET "status" = ?
WHERE "namespace" = ? AND (("status" = ?) AND ("expires_at" < ?));
-- params: ['expired', ':namespace', 'active', ':now']
-- when a writer waits for the lock meanwhile, the transaction rolls back and the rules run over one
--   id range per transaction instead; once no writer has waited for a while, the rest runs in one
--   transaction again, counted first
-- expiry reach in a range
SELECT count(*) FROM memory_rows AS memories
WHERE +"namespace" = ? AND "id" >= ? AND "id" < ? AND ((("status" = ?) AND ("expires_at" < ?)));
-- params: [':namespace', ':from_id', ':to_id', 'active', ':now']
-- expiry.rules[0] event expired
INSERT INTO memory_events (memory_id, event_type, detail, occurred_at)
SELECT "id", ?, json_object(?, ?, ?, json_object(?, "status"), ?, json_object(?, ?)), ?
FROM memory_rows AS memories
WHERE +"namespace" = ? AND (("status" = ?) AND ("expires_at" < ?)) AND "id" >= ? AND "id" < ?;
-- params: ['expired', 'rule', 'expiry.rules[0]', 'from', 'status', 'to', 'status', 'expired',
--   ':now', ':namespace', 'active', ':now', ':from_id', ':to_id']
-- expiry.rules[0] update
UPDATE memory_rows AS memories
SET "status" = ?
WHERE +"namespace" = ? AND (("status" = ?) AND ("expires_at" < ?)) AND "id" >= ? AND "id" < ?;
-- params: ['expired', ':namespace', 'active', ':now', ':from_id', ':to_id']

-- pass decay (every 23:00:00)
-- when it reaches over half of the file's memories, the indexes over decay_score, rank, status are
--   dropped before its rules and created again after them, in its transaction (not recall's while
--   it holds only the head of the ranking, nor the small partial ones: those move the few entries
--   the pass changes; recall's is made again when its head has drifted); its rules are then the
--   ones over an id range below, run over every id (the rows read in id order, not through an index
--   on namespace)
-- decay reach
SELECT count(*) FROM memory_rows AS memories
WHERE "namespace" = ? AND (("status" = ?));
-- params: [':namespace', 'active']
-- asked first, in its transaction: whether any row is due; when none is, its rules do not run (they
--   could change nothing) and only its run is recorded
-- decay due
SELECT 1 FROM memory_rows AS memories
WHERE "namespace" = ? AND (("status" = ?))
LIMIT 1;
-- params: [':namespace', 'active']
-- lethe_kept() counts the row and returns NULL: a row where a new value comes out NULL or not
--   finite keeps all its values, and the pass reports it as skipped
-- decay.rules[0] update
UPDATE memory_rows AS memories
SET ("decay_score", "rank") = (SELECT CASE WHEN "usable" THEN "new_decay_score" ELSE coalesce(lethe_kept(), memories."decay_score") END, CASE WHEN "usable" THEN (("importance" * "confidence") * ("new_decay_score")) ELSE memories."rank" END
    FROM (SELECT "new_decay_score", (("new_decay_score") BETWEEN ? AND ?) AS "usable"
    FROM (SELECT min(?, (exp(((? * floor((round((julianday(?) - julianday(coalesce("last_accessed", "created_at"))) * 86400000.0) / 86400000.0))) * 1.0 / ?)) + min(?, ("access_count" * ?)))) AS "new_decay_score")))
WHERE "namespace" = ? AND ("status" = ?);
-- params: [-1.7976931348623157e+308, 1.7976931348623157e+308, 1.0, -0.693, ':now', 30, 0.3, 0.03,
--   ':namespace', 'active']
-- decay.rules[1] event archived
INSERT INTO memory_events (memory_id, event_type, detail, occurred_at)
SELECT "id", ?, json_object(?, ?, ?, json_object(?, "status", ?, "decay_score"), ?, json_object(?, ?, ?, ?)), ?
FROM memory_rows AS memories
WHERE "namespace" = ? AND (("status" = ?) AND ("decay_score" < ?));
-- params: ['archived', 'rule', 'decay.rules[1]', 'from', 'status', 'decay_score', 'to', 'status',
--   'archived', 'decay_score', 0, ':now', ':namespace', 'active', 0.1]
-- decay.rules[1] update
UPDATE memory_rows AS memories
SET "status" = ?,
    "decay_score" = ?,
    "rank" = (("importance" * "confidence") * (?))
WHERE "namespace" = ? AND (("status" = ?) AND ("decay_score" < ?));
-- params: ['archived', 0, 0, ':namespace', 'active', 0.1]
-- when a writer waits for the lock meanwhile, the transaction rolls back and the rules run over one
--   id range per transaction instead; once no writer has waited for a while, the rest runs in one
--   transaction again, counted first
-- decay reach in a range
SELECT count(*) FROM memory_rows AS memories
WHERE +"namespace" = ? AND "id" >= ? AND "id" < ? AND (("status" = ?));
-- params: [':namespace', ':from_id', ':to_id', 'active']
-- decay.rules[0] update
UPDATE memory_rows AS memories
SET ("decay_score", "rank") = (SELECT CASE WHEN "usable" THEN "new_decay_score" ELSE coalesce(lethe_kept(), memories."decay_score") END, CASE WHEN "usable" THEN (("importance" * "confidence") * ("new_decay_score")) ELSE memories."rank" END
    FROM (SELECT "new_decay_score", (("new_decay_score") BETWEEN ? AND ?) AS "usable"
    FROM (SELECT min(?, (exp(((? * floor((round((julianday(?) - julianday(coalesce("last_accessed", "created_at"))) * 86400000.0) / 86400000.0))) * 1.0 / ?)) + min(?, ("access_count" * ?)))) AS "new_decay_score")))
WHERE +"namespace" = ? AND ("status" = ?) AND "id" >= ? AND "id" < ?;
-- params: [-1.7976931348623157e+308, 1.7976931348623157e+308, 1.0, -0.693, ':now', 30, 0.3, 0.03,
--   ':namespace', 'active', ':from_id', ':to_id']
-- decay.rules[1] event archived
INSERT INTO memory_events (memory_id, event_type, detail, occurred_at)
SELECT "id", ?, json_object(?, ?, ?, json_object(?, "status", ?, "decay_score"), ?, json_object(?, ?, ?, ?)), ?
FROM memory_rows AS memories
WHERE +"namespace" = ? AND (("status" = ?) AND ("decay_score" < ?)) AND "id" >= ? AND "id" < ?;
-- params: ['archived', 'rule', 'decay.rules[1]', 'from', 'status', 'decay_score', 'to', 'status',
--   'archived', 'decay_score', 0, ':now', ':namespace', 'active', 0.1, ':from_id', ':to_id']
-- decay.rules[1] update
UPDATE memory_rows AS memories
SET "status" = ?,
    "decay_score" = ?,
    "rank" = (("importance" * "confidence") * (?))
WHERE +"namespace" = ? AND (("status" = ?) AND ("decay_score" < ?)) AND "id" >= ? AND "id" < ?;
-- params: ['archived', 0, 0, ':namespace', 'active', 0.1, ':from_id', ':to_id']

-- pass compression (every 6 days, 0:00:00)
-- then: cluster and merge through judges

-- recall
-- recall
SELECT memories.*, 0.0 AS relevance
FROM memories
WHERE "namespace" = ? AND (("status" = ?) AND ("decay_score" > ?))
ORDER BY "rank" DESC, "id" DESC
LIMIT ?;
-- params: [':namespace', 'active', 0.15, ':limit']
-- while recall's index holds only the head of the ranking (rank >= :floor, a number the store
-- chooses from the ranks; a store of few memories keeps every active one in it), this runs
-- first, and the statement above only when it returns fewer than :limit rows:
-- recall, over the head of the ranking
SELECT memories.*, 0.0 AS relevance
FROM memories
WHERE "namespace" = ? AND (("status" = ?) AND ("decay_score" > ?)) AND "rank" >= ?
ORDER BY "rank" DESC, "id" DESC
LIMIT ?;
-- params: [':namespace', 'active', 0.15, ':floor', ':limit']
-- recall (matching a query)
SELECT memories.*, coalesce(-fts.score / (1.0 - fts.score), 0.0) AS relevance
FROM (SELECT rowid AS fts_id, bm25(memories_fts) AS score FROM memories_fts
      WHERE memories_fts MATCH ?) AS fts
CROSS JOIN memories ON memories.id = fts.fts_id
WHERE "namespace" = ? AND (("status" = ?) AND ("decay_score" > ?))
ORDER BY "rank" DESC, "id" DESC
LIMIT ?;
-- params: [':query', ':namespace', 'active', 0.15, ':limit']
-- recall (scored by a query)
SELECT memories.*, coalesce((SELECT -s / (1.0 - s) FROM (SELECT bm25(memories_fts) AS s FROM memories_fts
      WHERE memories_fts MATCH ? AND rowid = memories.id)), 0.0) AS relevance
FROM memories
WHERE "namespace" = ? AND (("status" = ?) AND ("decay_score" > ?))
ORDER BY "rank" DESC, "id" DESC
LIMIT ?;
-- params: [':query', ':namespace', 'active', 0.15, ':limit']
-- while recall's index holds only the head of the ranking (rank >= :floor, a number the store
-- chooses from the ranks; a store of few memories keeps every active one in it), this runs
-- first, and the statement above only when it returns fewer than :limit rows:
-- recall (scored by a query), over the head of the ranking
SELECT memories.*, coalesce((SELECT -s / (1.0 - s) FROM (SELECT bm25(memories_fts) AS s FROM memories_fts
      WHERE memories_fts MATCH ? AND rowid = memories.id)), 0.0) AS relevance
FROM memories
WHERE "namespace" = ? AND (("status" = ?) AND ("decay_score" > ?)) AND "rank" >= ?
ORDER BY "rank" DESC, "id" DESC
LIMIT ?;
-- params: [':query', ':namespace', 'active', 0.15, ':floor', ':limit']
-- recall (best matches)
WITH matched AS MATERIALIZED (SELECT rowid AS fts_id, bm25(memories_fts) AS score FROM memories_fts WHERE memories_fts MATCH ?),
best AS MATERIALIZED (SELECT fts_id, score FROM matched ORDER BY score LIMIT 4 * ?)
SELECT memories.*, coalesce(-fts.score / (1.0 - fts.score), 0.0) AS relevance
FROM (SELECT * FROM matched AS fts WHERE (SELECT count(*) FROM best AS fts CROSS JOIN memories ON memories.id = fts.fts_id WHERE "namespace" = ? AND (("status" = ?) AND ("decay_score" > ?))) < ?
      OR coalesce(-fts.score / (1.0 - fts.score), 0.0) >= (SELECT min(coalesce(-fts.score / (1.0 - fts.score), 0.0)) FROM best AS fts)) AS fts
CROSS JOIN memories ON memories.id = fts.fts_id
WHERE "namespace" = ? AND (("status" = ?) AND ("decay_score" > ?))
ORDER BY coalesce(-fts.score / (1.0 - fts.score), 0.0) DESC, "rank" DESC, "id" DESC
LIMIT ?;
-- params: [':query', ':limit', ':namespace', 'active', 0.15, ':limit', ':namespace', 'active',
--   0.15, ':limit']
-- recall (fallback)
WITH matched AS MATERIALIZED (SELECT rowid AS fts_id, bm25(memories_fts) AS score FROM memories_fts WHERE memories_fts MATCH ?),
best AS MATERIALIZED (SELECT fts_id, score FROM matched ORDER BY score LIMIT 4 * ?)
SELECT memories.*, coalesce(-fts.score / (1.0 - fts.score), 0.0) AS relevance
FROM (SELECT * FROM matched AS fts WHERE (SELECT count(*) FROM best AS fts CROSS JOIN memories ON memories.id = fts.fts_id WHERE "namespace" = ? AND (("status" = ?) OR ("status" = ?))) < ?
      OR coalesce(-fts.score / (1.0 - fts.score), 0.0) >= (SELECT min(coalesce(-fts.score / (1.0 - fts.score), 0.0)) FROM best AS fts)) AS fts
CROSS JOIN memories ON memories.id = fts.fts_id
WHERE "namespace" = ? AND (("status" = ?) OR ("status" = ?))
ORDER BY coalesce(-fts.score / (1.0 - fts.score), 0.0) DESC, "rank" DESC, "id" DESC
LIMIT ?;
-- params: [':query', ':limit', ':namespace', 'archived', 'expired', ':limit', ':namespace',
--   'archived', 'expired', ':limit']
-- recall (fallback): forgotten ones left out
SELECT DISTINCT memory_id FROM memory_events
WHERE memory_id IN (SELECT value FROM json_each(?)) AND event_type = ?;
-- params: [':ids', 'forgotten']
-- recall on_access
UPDATE memory_rows AS memories
SET "access_count" = ("access_count" + ?),
    "last_accessed" = ?
WHERE +"namespace" = ? AND "id" IN (SELECT value FROM json_each(?)) AND "status" = ?;
-- params: [1, ':now', ':namespace', ':ids', 'active']
-- rank refresh
UPDATE memory_rows AS memories SET "rank" = (("importance" * "confidence") * "decay_score")
WHERE "namespace" = ?;
-- params: [':namespace']
-- rank refresh (by id)
UPDATE memory_rows AS memories SET "rank" = (("importance" * "confidence") * "decay_score")
WHERE +"namespace" = ? AND "id" IN (SELECT value FROM json_each(?));
-- params: [':namespace', ':ids']
-- when the namespace is over half of the file's memories, its ranks are refreshed in id order, over
--   every id:
-- rank refresh (in id order)
UPDATE memory_rows AS memories SET "rank" = (("importance" * "confidence") * "decay_score")
WHERE +"namespace" = ? AND "id" >= ? AND "id" < ?;
-- params: [':namespace', ':from_id', ':to_id']
-- fused candidates
WITH matched AS MATERIALIZED (SELECT rowid AS fts_id, bm25(memories_fts) AS score FROM memories_fts WHERE memories_fts MATCH ?),
best AS MATERIALIZED (SELECT fts_id, score FROM matched ORDER BY score LIMIT 4 * ?)
SELECT memories.*, coalesce(-fts.score / (1.0 - fts.score), 0.0) AS relevance
FROM (SELECT * FROM matched AS fts WHERE (SELECT count(*) FROM best AS fts CROSS JOIN memories ON memories.id = fts.fts_id WHERE "namespace" = ? AND ("status" = ?)) < ?
      OR coalesce(-fts.score / (1.0 - fts.score), 0.0) >= (SELECT min(coalesce(-fts.score / (1.0 - fts.score), 0.0)) FROM best AS fts)) AS fts
CROSS JOIN memories ON memories.id = fts.fts_id
WHERE "namespace" = ? AND ("status" = ?)
ORDER BY coalesce(-fts.score / (1.0 - fts.score), 0.0) DESC, "importance" DESC, "created_at" DESC, "id" DESC
LIMIT ?;
-- params: [':query', ':limit', ':namespace', 'active', ':limit', ':namespace', 'active', ':limit']
-- compression cluster candidates
SELECT memories.*, 0.0 AS relevance
FROM memories
WHERE "namespace" = ? AND ("status" = ?)
ORDER BY "importance" DESC, "access_count" DESC, "id" DESC
LIMIT ?;
-- params: [':namespace', 'active', ':limit']

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
    "rank" = (("importance" * (min(?, ("confidence" + ?)))) * "decay_score")
WHERE +"namespace" = ? AND "id" IN (SELECT value FROM json_each(?)) AND "status" = ?;
-- params: [1.0, 0.1, 1, ':now', 1.0, 0.1, ':namespace', ':ids', 'active']
-- compression: merged values
SELECT min(?, (avg("importance") * ?)) AS "importance", ? AS "confidence", max("access_count") AS "access_count", ? AS "decay_score"
FROM memory_rows AS memories
WHERE +"namespace" = ? AND "id" IN (SELECT value FROM json_each(?));
-- params: [10, 1.2, 0.85, 1.0, ':namespace', ':ids']
-- merge: events of the absorbed
INSERT INTO memory_events (memory_id, event_type, detail, occurred_at)
SELECT "id", ?, ?, ? FROM memory_rows AS memories
WHERE +"namespace" = ? AND "id" IN (SELECT value FROM json_each(?)) AND "status" = ?;
-- params: ['compressed', ':text', ':now', ':namespace', ':ids', 'active']
-- merge: absorb the cluster
UPDATE memory_rows AS memories SET "status" = ?, "merged_into" = ?
WHERE +"namespace" = ? AND "id" IN (SELECT value FROM json_each(?)) AND "status" = ?;
-- params: ['compressed', ':new_id', ':namespace', ':ids', 'active']
-- recall explain: reasons
SELECT CASE WHEN (("status" = ?) AND ("decay_score" > ?)) THEN 'eligible' WHEN coalesce("status", '') <> 'active' THEN coalesce("status", 'unknown') ELSE 'below_floor' END AS reason, count(*) AS n
FROM memories
WHERE "namespace" = ?
GROUP BY reason;
-- params: ['active', 0.15, ':namespace']
-- recall explain: reasons (with a query)
SELECT CASE WHEN (("status" = ?) AND ("decay_score" > ?)) THEN 'eligible' WHEN coalesce("status", '') <> 'active' THEN coalesce("status", 'unknown') ELSE 'below_floor' END AS reason, count(*) AS n
FROM memories
WHERE "namespace" = ?
GROUP BY reason;
-- params: ['active', 0.15, ':namespace']
-- recall explain: order keys
SELECT memories.id, "rank" AS key_0
FROM memories
WHERE +"namespace" = ? AND memories.id IN (SELECT value FROM json_each(?));
-- params: [':namespace', ':ids']
-- recall explain: order keys (with a query)
SELECT memories.id, "rank" AS key_0
FROM memories
LEFT JOIN (SELECT rowid AS fts_id, bm25(memories_fts) AS score FROM memories_fts WHERE memories_fts MATCH ?) AS fts ON fts.fts_id = memories.id
WHERE +"namespace" = ? AND memories.id IN (SELECT value FROM json_each(?));
-- params: [':query', ':namespace', ':ids']
