-- policy: lifecycle  dialect: postgres

-- pass expiry (every 1:00:00)
-- when it reaches over half of the file's memories, the indexes over status are dropped before its rules and created again after them, in its transaction
-- expiry reach
SELECT count(*) FROM memories
WHERE "namespace" = %s AND ((("status" = %s) AND ("expires_at" < %s)));
-- params: [':namespace', 'active', ':now']
-- expiry.rules[0] event expired
INSERT INTO memory_events (memory_id, event_type, detail, occurred_at)
SELECT "id", %s, json_build_object(%s, %s, %s, json_build_object(%s, "status"), %s, json_build_object(%s, %s)), %s
FROM memories
WHERE "namespace" = %s AND (("status" = %s) AND ("expires_at" < %s));
-- params: ['expired', 'rule', 'expiry.rules[0]', 'from', 'status', 'to', 'status', 'expired', ':now', ':namespace', 'active', ':now']
-- expiry.rules[0] update
UPDATE memories
SET "status" = %s
WHERE "namespace" = %s AND (("status" = %s) AND ("expires_at" < %s));
-- params: ['expired', ':namespace', 'active', ':now']

-- pass decay (every 23:00:00)
-- when it reaches over half of the file's memories, the indexes over decay_score, rank, status are dropped before its rules and created again after them, in its transaction
-- decay reach
SELECT count(*) FROM memories
WHERE "namespace" = %s AND (("status" = %s) OR (("status" = %s) AND ("decay_score" < %s)));
-- params: [':namespace', 'active', 'active', 0.1]
-- decay.rules[0] rows (the skipped: those it does not change)
SELECT count(*) FROM memories
WHERE "namespace" = %s AND ("status" = %s);
-- params: [':namespace', 'active']
-- decay.rules[0] update
UPDATE memories
SET "decay_score" = least(%s, (exp(((%s * floor((extract(epoch from (%s)::timestamp - (coalesce("last_accessed", "created_at"))::timestamp) / 86400.0))) * 1.0 / %s)) + least(%s, ("access_count" * %s)))),
    "rank" = (("importance" * "confidence") * (least(%s, (exp(((%s * floor((extract(epoch from (%s)::timestamp - (coalesce("last_accessed", "created_at"))::timestamp) / 86400.0))) * 1.0 / %s)) + least(%s, ("access_count" * %s))))))
WHERE "namespace" = %s AND ("status" = %s) AND ((least(%s, (exp(((%s * floor((extract(epoch from (%s)::timestamp - (coalesce("last_accessed", "created_at"))::timestamp) / 86400.0))) * 1.0 / %s)) + least(%s, ("access_count" * %s))))) BETWEEN %s AND %s);
-- params: [1.0, -0.693, ':now', 30, 0.3, 0.03, 1.0, -0.693, ':now', 30, 0.3, 0.03, ':namespace', 'active', 1.0, -0.693, ':now', 30, 0.3, 0.03, -1.7976931348623157e+308, 1.7976931348623157e+308]
-- decay.rules[1] event archived
INSERT INTO memory_events (memory_id, event_type, detail, occurred_at)
SELECT "id", %s, json_build_object(%s, %s, %s, json_build_object(%s, "status", %s, "decay_score"), %s, json_build_object(%s, %s, %s, %s)), %s
FROM memories
WHERE "namespace" = %s AND (("status" = %s) AND ("decay_score" < %s));
-- params: ['archived', 'rule', 'decay.rules[1]', 'from', 'status', 'decay_score', 'to', 'status', 'archived', 'decay_score', 0, ':now', ':namespace', 'active', 0.1]
-- decay.rules[1] update
UPDATE memories
SET "status" = %s,
    "decay_score" = %s,
    "rank" = (("importance" * "confidence") * (%s))
WHERE "namespace" = %s AND (("status" = %s) AND ("decay_score" < %s));
-- params: ['archived', 0, 0, ':namespace', 'active', 0.1]

-- pass compression (every 6 days, 0:00:00)
-- then: cluster and merge through judges

-- recall
-- recall
SELECT memories.*, 0.0 AS relevance
FROM memories
WHERE "namespace" = %s AND (("status" = %s) AND ("decay_score" > %s))
ORDER BY "rank" DESC, "id" DESC
LIMIT %s;
-- params: [':namespace', 'active', 0.15, ':limit']
-- recall (matching a query)
SELECT memories.*, coalesce(-fts.score / (1.0 - fts.score), 0.0) AS relevance
FROM (SELECT rowid AS fts_id, bm25(memories_fts) AS score FROM memories_fts
      WHERE memories_fts MATCH %s) AS fts
CROSS JOIN memories ON memories.id = fts.fts_id
WHERE "namespace" = %s AND (("status" = %s) AND ("decay_score" > %s))
ORDER BY "rank" DESC, "id" DESC
LIMIT %s;
-- params: [':query', ':namespace', 'active', 0.15, ':limit']
-- recall (scored by a query)
SELECT memories.*, coalesce((SELECT -s / (1.0 - s) FROM (SELECT bm25(memories_fts) AS s FROM memories_fts
      WHERE memories_fts MATCH %s AND rowid = memories.id)), 0.0) AS relevance
FROM memories
WHERE "namespace" = %s AND (("status" = %s) AND ("decay_score" > %s))
ORDER BY "rank" DESC, "id" DESC
LIMIT %s;
-- params: [':query', ':namespace', 'active', 0.15, ':limit']
-- recall on_access
UPDATE memories
SET "access_count" = ("access_count" + %s),
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
SELECT memories.*, coalesce(-fts.score / (1.0 - fts.score), 0.0) AS relevance
FROM (SELECT rowid AS fts_id, bm25(memories_fts) AS score FROM memories_fts
      WHERE memories_fts MATCH %s) AS fts
CROSS JOIN memories ON memories.id = fts.fts_id
WHERE "namespace" = %s AND ("status" = %s)
ORDER BY coalesce(-fts.score / (1.0 - fts.score), 0.0) DESC, "importance" DESC, "created_at" DESC, "id" DESC
LIMIT %s;
-- params: [':query', ':namespace', 'active', ':limit']
-- compression cluster candidates
SELECT memories.*, 0.0 AS relevance
FROM memories
WHERE "namespace" = %s AND ("status" = %s)
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
SET "confidence" = least(%s, ("confidence" + %s)),
    "access_count" = ("access_count" + %s),
    "last_accessed" = %s,
    "rank" = (("importance" * (least(%s, ("confidence" + %s)))) * "decay_score")
WHERE "namespace" = %s AND "id" IN (SELECT value::bigint FROM json_array_elements_text(%s::json)) AND "status" = %s;
-- params: [1.0, 0.1, 1, ':now', 1.0, 0.1, ':namespace', ':ids', 'active']
-- compression: merged values
SELECT least(%s, (avg("importance") * %s)) AS "importance", %s AS "confidence", max("access_count") AS "access_count", %s AS "decay_score"
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
SELECT CASE WHEN (("status" = %s) AND ("decay_score" > %s)) THEN 'eligible' WHEN coalesce("status", '') <> 'active' THEN coalesce("status", 'unknown') ELSE 'below_floor' END AS reason, count(*) AS n
FROM memories
WHERE "namespace" = %s
GROUP BY reason;
-- params: ['active', 0.15, ':namespace']
-- recall explain: reasons (with a query)
SELECT CASE WHEN (("status" = %s) AND ("decay_score" > %s)) THEN 'eligible' WHEN coalesce("status", '') <> 'active' THEN coalesce("status", 'unknown') ELSE 'below_floor' END AS reason, count(*) AS n
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
LEFT JOIN (SELECT rowid AS fts_id, bm25(memories_fts) AS score FROM memories_fts WHERE memories_fts MATCH %s) AS fts ON fts.fts_id = memories.id
WHERE "namespace" = %s AND memories.id IN (SELECT value::bigint FROM json_array_elements_text(%s::json));
-- params: [':query', ':namespace', ':ids']
