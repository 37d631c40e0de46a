-- policy: lifecycle  dialect: postgres

-- pass expiry (every 1:00:00)
-- when it reaches over half of the file's memories, the indexes over status are dropped before its
--   rules and created again after them, in its transaction
-- expiry reach
SELECT count(*) FROM memories
WHERE "namespace" = %s AND ((("status" = %s::text) AND ("expires_at" < %s)));
-- params: [':namespace', 'active', ':now']
-- asked first, in its transaction: whether any row is due; when none is, its rules do not run (they
--   could change nothing) and only its run is recorded
-- expiry due
SELECT 1 FROM memories
WHERE "namespace" = %s AND ((("status" = %s::text) AND ("expires_at" < %s)))
LIMIT 1;
-- params: [':namespace', 'active', ':now']
-- expiry.rules[0] event expired
INSERT INTO memory_events (memory_id, event_type, detail, occurred_at)
SELECT "id", %s, json_build_object(%s::text, %s::text, %s::text, json_build_object(%s::text, "status"), %s::text, json_build_object(%s::text, %s::text)), %s
FROM memories
WHERE "namespace" = %s AND (("status" = %s::text) AND ("expires_at" < %s));
-- params: ['expired', 'rule', 'expiry.rules[0]', 'from', 'status', 'to', 'status', 'expired',
--   ':now', ':namespace', 'active', ':now']
-- expiry.rules[0] update
UPDATE memories
SET "status" = %s::text
WHERE "namespace" = %s AND (("status" = %s::text) AND ("expires_at" < %s));
-- params: ['expired', ':namespace', 'active', ':now']

-- pass decay (every 23:00:00)
-- when it reaches over half of the file's memories, the indexes over decay_score, rank, status are
--   dropped before its rules and created again after them, in its transaction
-- decay reach
SELECT count(*) FROM memories
WHERE "namespace" = %s AND (("status" = %s::text));
-- params: [':namespace', 'active']
-- asked first, in its transaction: whether any row is due; when none is, its rules do not run (they
--   could change nothing) and only its run is recorded
-- decay due
SELECT 1 FROM memories
WHERE "namespace" = %s AND (("status" = %s::text))
LIMIT 1;
-- params: [':namespace', 'active']
-- decay.rules[0] rows (the skipped: those it does not change)
SELECT count(*) FROM memories
WHERE "namespace" = %s AND ("status" = %s::text);
-- params: [':namespace', 'active']
-- decay.rules[0] update
UPDATE memories
SET "decay_score" = least(%s::double precision, (exp(least(greatest(((%s::double precision * floor((extract(epoch from (%s)::timestamp - (coalesce("last_accessed", "created_at"))::timestamp) / 86400.0)::double precision)) * 1.0 / nullif(%s::bigint, 0)), -745.0), 709.0)) + least(%s::double precision, ("access_count" * %s::double precision)))),
    "rank" = (("importance" * "confidence") * (least(%s::double precision, (exp(least(greatest(((%s::double precision * floor((extract(epoch from (%s)::timestamp - (coalesce("last_accessed", "created_at"))::timestamp) / 86400.0)::double precision)) * 1.0 / nullif(%s::bigint, 0)), -745.0), 709.0)) + least(%s::double precision, ("access_count" * %s::double precision))))))
WHERE "namespace" = %s AND ("status" = %s::text) AND ((least(%s::double precision, (exp(least(greatest(((%s::double precision * floor((extract(epoch from (%s)::timestamp - (coalesce("last_accessed", "created_at"))::timestamp) / 86400.0)::double precision)) * 1.0 / nullif(%s::bigint, 0)), -745.0), 709.0)) + least(%s::double precision, ("access_count" * %s::double precision))))) BETWEEN %s AND %s);
-- params: [1.0, -0.693, ':now', 30, 0.3, 0.03, 1.0, -0.693, ':now', 30, 0.3, 0.03, ':namespace',
--   'active', 1.0, -0.693, ':now', 30, 0.3, 0.03, -1.7976931348623157e+308,
--   1.7976931348623157e+308]
-- decay.rules[1] event archived
INSERT INTO memory_events (memory_id, event_type, detail, occurred_at)
SELECT "id", %s, json_build_object(%s::text, %s::text, %s::text, json_build_object(%s::text, "status", %s::text, "decay_score"), %s::text, json_build_object(%s::text, %s::text, %s::text, %s::bigint)), %s
FROM memories
WHERE "namespace" = %s AND (("status" = %s::text) AND ("decay_score" < %s::double precision));
-- params: ['archived', 'rule', 'decay.rules[1]', 'from', 'status', 'decay_score', 'to', 'status',
--   'archived', 'decay_score', 0, ':now', ':namespace', 'active', 0.1]
-- decay.rules[1] update
UPDATE memories
SET "status" = %s::text,
    "decay_score" = %s::bigint,
    "rank" = (("importance" * "confidence") * (%s::bigint))
WHERE "namespace" = %s AND (("status" = %s::text) AND ("decay_score" < %s::double precision));
-- params: ['archived', 0, 0, ':namespace', 'active', 0.1]

-- pass compression (every 6 days, 0:00:00)
-- then: cluster and merge through judges

-- recall
-- recall
SELECT memories.*, 0.0::float8 AS relevance
FROM memories
WHERE "namespace" = %s AND (("status" = %s::text) AND ("decay_score" > %s::double precision))
ORDER BY "rank" DESC, "id" DESC
LIMIT %s;
-- params: [':namespace', 'active', 0.15, ':limit']
-- recall (matching a query)
SELECT memories.*, coalesce(fts.score / (1.0 + fts.score), 0.0) AS relevance
FROM (SELECT id AS fts_id, ts_rank(tsv, q)::float8 AS score FROM memories_fts, websearch_to_tsquery('lethe_english', %s) AS q
      WHERE tsv @@ q) AS fts
JOIN memories ON memories.id = fts.fts_id
WHERE "namespace" = %s AND (("status" = %s::text) AND ("decay_score" > %s::double precision))
ORDER BY "rank" DESC, "id" DESC
LIMIT %s;
-- params: [':query', ':namespace', 'active', 0.15, ':limit']
-- recall (scored by a query)
SELECT memories.*, coalesce((SELECT s / (1.0 + s) FROM (SELECT ts_rank(tsv, q)::float8 AS s FROM memories_fts, websearch_to_tsquery('lethe_english', %s) AS q
      WHERE tsv @@ q AND id = memories.id) AS one), 0.0) AS relevance
FROM memories
WHERE "namespace" = %s AND (("status" = %s::text) AND ("decay_score" > %s::double precision))
ORDER BY "rank" DESC, "id" DESC
LIMIT %s;
-- params: [':query', ':namespace', 'active', 0.15, ':limit']
-- recall (best matches)
SELECT memories.*, coalesce(fts.score / (1.0 + fts.score), 0.0) AS relevance
FROM (SELECT id AS fts_id, ts_rank(tsv, q)::float8 AS score FROM memories_fts, websearch_to_tsquery('lethe_english', %s) AS q
      WHERE tsv @@ q) AS fts
JOIN memories ON memories.id = fts.fts_id
WHERE "namespace" = %s AND (("status" = %s::text) AND ("decay_score" > %s::double precision))
ORDER BY coalesce(fts.score / (1.0 + fts.score), 0.0) DESC, "rank" DESC, "id" DESC
LIMIT %s;
-- params: [':query', ':namespace', 'active', 0.15, ':limit']
-- recall (fallback)
SELECT memories.*, coalesce(fts.score / (1.0 + fts.score), 0.0) AS relevance
FROM (SELECT id AS fts_id, ts_rank(tsv, q)::float8 AS score FROM memories_fts, websearch_to_tsquery('lethe_english', %s) AS q
      WHERE tsv @@ q) AS fts
JOIN memories ON memories.id = fts.fts_id
WHERE "namespace" = %s AND (("status" = %s::text) OR ("status" = %s::text))
ORDER BY coalesce(fts.score / (1.0 + fts.score), 0.0) DESC, "rank" DESC, "id" DESC
LIMIT %s;
-- params: [':query', ':namespace', 'archived', 'expired', ':limit']
-- recall (fallback): forgotten ones left out
SELECT DISTINCT memory_id FROM memory_events
WHERE memory_id IN (SELECT value::bigint FROM json_array_elements_text(%s::json)) AND event_type = %s;
-- params: [':ids', 'forgotten']
-- recall on_access
UPDATE memories
SET "access_count" = ("access_count" + %s::bigint),
    "last_accessed" = %s
WHERE "namespace" = %s AND "id" IN (SELECT value::bigint FROM json_array_elements_text(%s::json)) AND "status" = %s;
-- params: [1, ':now', ':namespace', ':ids', 'active']
-- rank refresh
UPDATE memories SET "rank" = (("importance" * "confidence") * "decay_score")
WHERE "namespace" = %s;
-- params: [':namespace']
-- rank refresh (by id)
UPDATE memories SET "rank" = (("importance" * "confidence") * "decay_score")
WHERE "namespace" = %s AND "id" IN (SELECT value::bigint FROM json_array_elements_text(%s::json));
-- params: [':namespace', ':ids']
-- contradiction candidates
SELECT memories.*, coalesce(fts.score / (1.0 + fts.score), 0.0) AS relevance
FROM (SELECT id AS fts_id, ts_rank(tsv, q)::float8 AS score FROM memories_fts, websearch_to_tsquery('lethe_english', %s) AS q
      WHERE tsv @@ q) AS fts
JOIN memories ON memories.id = fts.fts_id
WHERE "namespace" = %s AND ("status" = %s::text)
ORDER BY coalesce(fts.score / (1.0 + fts.score), 0.0) DESC, "importance" DESC, "created_at" DESC, "id" DESC
LIMIT %s;
-- params: [':query', ':namespace', 'active', ':limit']
-- compression cluster candidates
SELECT memories.*, 0.0::float8 AS relevance
FROM memories
WHERE "namespace" = %s AND ("status" = %s::text)
ORDER BY "importance" DESC, "access_count" DESC, "id" DESC
LIMIT %s;
-- params: [':namespace', 'active', ':limit']

-- write, merge and explain
-- write: supersede
UPDATE memories SET "status" = %s, "contradicted_by" = %s
WHERE "namespace" = %s AND "id" IN (SELECT value::bigint FROM json_array_elements_text(%s::json)) AND "status" = %s;
-- params: ['superseded', ':new_id', ':namespace', ':ids', 'active']
-- forget
UPDATE memories SET "status" = %s
WHERE "namespace" = %s AND "id" IN (SELECT value::bigint FROM json_array_elements_text(%s::json)) AND "status" = %s;
-- params: ['archived', ':namespace', ':ids', 'active']
-- write: reinforce
UPDATE memories
SET "confidence" = least(%s::double precision, ("confidence" + %s::double precision)),
    "access_count" = ("access_count" + %s::bigint),
    "last_accessed" = %s,
    "rank" = (("importance" * (least(%s::double precision, ("confidence" + %s::double precision)))) * "decay_score")
WHERE "namespace" = %s AND "id" IN (SELECT value::bigint FROM json_array_elements_text(%s::json)) AND "status" = %s;
-- params: [1.0, 0.1, 1, ':now', 1.0, 0.1, ':namespace', ':ids', 'active']
-- compression: merged values
SELECT least(%s::bigint, (avg("importance") * %s::double precision)) AS "importance", %s::double precision AS "confidence", max("access_count") AS "access_count", %s::double precision AS "decay_score"
FROM memories
WHERE "namespace" = %s AND "id" IN (SELECT value::bigint FROM json_array_elements_text(%s::json));
-- params: [10, 1.2, 0.85, 1.0, ':namespace', ':ids']
-- merge: events of the absorbed
INSERT INTO memory_events (memory_id, event_type, detail, occurred_at)
SELECT "id", %s, %s, %s FROM memories
WHERE "namespace" = %s AND "id" IN (SELECT value::bigint FROM json_array_elements_text(%s::json)) AND "status" = %s;
-- params: ['compressed', ':text', ':now', ':namespace', ':ids', 'active']
-- merge: absorb the cluster
UPDATE memories SET "status" = %s, "merged_into" = %s
WHERE "namespace" = %s AND "id" IN (SELECT value::bigint FROM json_array_elements_text(%s::json)) AND "status" = %s;
-- params: ['compressed', ':new_id', ':namespace', ':ids', 'active']
-- recall explain: reasons
SELECT CASE WHEN (("status" = %s::text) AND ("decay_score" > %s::double precision)) THEN 'eligible' WHEN coalesce("status", '') <> 'active' THEN coalesce("status", 'unknown') ELSE 'below_floor' END AS reason, count(*) AS n
FROM memories
WHERE "namespace" = %s
GROUP BY reason;
-- params: ['active', 0.15, ':namespace']
-- recall explain: reasons (with a query)
SELECT CASE WHEN (("status" = %s::text) AND ("decay_score" > %s::double precision)) THEN 'eligible' WHEN coalesce("status", '') <> 'active' THEN coalesce("status", 'unknown') ELSE 'below_floor' END AS reason, count(*) AS n
FROM memories
WHERE "namespace" = %s
GROUP BY reason;
-- params: ['active', 0.15, ':namespace']
-- recall explain: order keys
SELECT memories.id, "rank" AS key_0
FROM memories
WHERE "namespace" = %s AND memories.id IN (SELECT value::bigint FROM json_array_elements_text(%s::json));
-- params: [':namespace', ':ids']
-- recall explain: order keys (with a query)
SELECT memories.id, "rank" AS key_0
FROM memories
LEFT JOIN (SELECT id AS fts_id, ts_rank(tsv, q)::float8 AS score FROM memories_fts, websearch_to_tsquery('lethe_english', %s) AS q WHERE tsv @@ q) AS fts ON fts.fts_id = memories.id
WHERE "namespace" = %s AND memories.id IN (SELECT value::bigint FROM json_array_elements_text(%s::json));
-- params: [':query', ':namespace', ':ids']
