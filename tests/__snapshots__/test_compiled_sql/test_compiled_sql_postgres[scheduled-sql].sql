-- policy: scheduled-sql  dialect: postgres

-- pass decay (every 1 day, 0:00:00)
-- when it reaches over half of the file's memories, the indexes over decay_score, rank, status are
--   dropped before its rules and created again after them, in its transaction
-- decay reach
SELECT count(*) FROM memories
WHERE "namespace" = %s AND ((("status" = %s::text) AND ((extract(epoch from (%s)::timestamp - (coalesce("last_accessed", "created_at"))::timestamp) / 86400.0)::double precision >= %s::bigint)) OR (("status" = %s::text) AND ("decay_score" < %s::double precision)));
-- params: [':namespace', 'active', ':now', 30, 'active', 0.1]
-- asked first, in its transaction: whether any row is due; when none is, its rules do not run (they
--   could change nothing) and only its run is recorded
-- decay due
SELECT 1 FROM memories
WHERE "namespace" = %s AND ((("status" = %s::text) AND ((extract(epoch from (%s)::timestamp - (coalesce("last_accessed", "created_at"))::timestamp) / 86400.0)::double precision >= %s::bigint)) OR (("status" = %s::text) AND ("decay_score" < %s::double precision)))
LIMIT 1;
-- params: [':namespace', 'active', ':now', 30, 'active', 0.1]
-- decay.rules[0] rows (the skipped: those it does not change)
SELECT count(*) FROM memories
WHERE "namespace" = %s AND (("status" = %s::text) AND ((extract(epoch from (%s)::timestamp - (coalesce("last_accessed", "created_at"))::timestamp) / 86400.0)::double precision >= %s::bigint));
-- params: [':namespace', 'active', ':now', 30]
-- decay.rules[0] update
UPDATE memories
SET "decay_score" = ("decay_score" * %s::double precision),
    "rank" = (("importance" * "confidence") * (("decay_score" * %s::double precision)))
WHERE "namespace" = %s AND (("status" = %s::text) AND ((extract(epoch from (%s)::timestamp - (coalesce("last_accessed", "created_at"))::timestamp) / 86400.0)::double precision >= %s::bigint)) AND ((("decay_score" * %s::double precision)) BETWEEN %s AND %s);
-- params: [0.9, 0.9, ':namespace', 'active', ':now', 30, 0.9, -1.7976931348623157e+308,
--   1.7976931348623157e+308]
-- decay.rules[1] event archived
INSERT INTO memory_events (memory_id, event_type, detail, occurred_at)
SELECT "id", %s, json_build_object(%s::text, %s::text, %s::text, json_build_object(%s::text, "status"), %s::text, json_build_object(%s::text, %s::text)), %s
FROM memories
WHERE "namespace" = %s AND (("status" = %s::text) AND ("decay_score" < %s::double precision));
-- params: ['archived', 'rule', 'decay.rules[1]', 'from', 'status', 'to', 'status', 'archived',
--   ':now', ':namespace', 'active', 0.1]
-- decay.rules[1] update
UPDATE memories
SET "status" = %s::text
WHERE "namespace" = %s AND (("status" = %s::text) AND ("decay_score" < %s::double precision));
-- params: ['archived', ':namespace', 'active', 0.1]

-- pass expiry (every 1 day, 0:00:00)
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

-- recall
-- recall
SELECT memories.*, 0.0::float8 AS relevance
FROM memories
WHERE "namespace" = %s AND (("status" = %s::text) AND ("decay_score" >= %s::double precision))
ORDER BY "rank" DESC, "id" DESC
LIMIT %s;
-- params: [':namespace', 'active', 0.1, ':limit']
-- recall (matching a query)
SELECT memories.*, coalesce(fts.score / (1.0 + fts.score), 0.0) AS relevance
FROM (SELECT id AS fts_id, ts_rank(tsv, q)::float8 AS score FROM memories_fts, websearch_to_tsquery('lethe_english', %s) AS q
      WHERE tsv @@ q) AS fts
JOIN memories ON memories.id = fts.fts_id
WHERE "namespace" = %s AND (("status" = %s::text) AND ("decay_score" >= %s::double precision))
ORDER BY "rank" DESC, "id" DESC
LIMIT %s;
-- params: [':query', ':namespace', 'active', 0.1, ':limit']
-- recall (scored by a query)
SELECT memories.*, coalesce((SELECT s / (1.0 + s) FROM (SELECT ts_rank(tsv, q)::float8 AS s FROM memories_fts, websearch_to_tsquery('lethe_english', %s) AS q
      WHERE tsv @@ q AND id = memories.id) AS one), 0.0) AS relevance
FROM memories
WHERE "namespace" = %s AND (("status" = %s::text) AND ("decay_score" >= %s::double precision))
ORDER BY "rank" DESC, "id" DESC
LIMIT %s;
-- params: [':query', ':namespace', 'active', 0.1, ':limit']
-- recall (best matches)
SELECT memories.*, coalesce(fts.score / (1.0 + fts.score), 0.0) AS relevance
FROM (SELECT id AS fts_id, ts_rank(tsv, q)::float8 AS score FROM memories_fts, websearch_to_tsquery('lethe_english', %s) AS q
      WHERE tsv @@ q) AS fts
JOIN memories ON memories.id = fts.fts_id
WHERE "namespace" = %s AND (("status" = %s::text) AND ("decay_score" >= %s::double precision))
ORDER BY coalesce(fts.score / (1.0 + fts.score), 0.0) DESC, "rank" DESC, "id" DESC
LIMIT %s;
-- params: [':query', ':namespace', 'active', 0.1, ':limit']
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
-- recall explain: reasons
SELECT CASE WHEN (("status" = %s::text) AND ("decay_score" >= %s::double precision)) THEN 'eligible' WHEN coalesce("status", '') <> 'active' THEN coalesce("status", 'unknown') ELSE 'below_floor' END AS reason, count(*) AS n
FROM memories
WHERE "namespace" = %s
GROUP BY reason;
-- params: ['active', 0.1, ':namespace']
-- recall explain: reasons (with a query)
SELECT CASE WHEN (("status" = %s::text) AND ("decay_score" >= %s::double precision)) THEN 'eligible' WHEN coalesce("status", '') <> 'active' THEN coalesce("status", 'unknown') ELSE 'below_floor' END AS reason, count(*) AS n
FROM memories
WHERE "namespace" = %s
GROUP BY reason;
-- params: ['active', 0.1, ':namespace']
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
