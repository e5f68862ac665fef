-- The query API's audit log (CONTRACT 9.1, docs/access.md): one row per
-- action, evidence-bundle or export read, audit read and denied request.
-- Append-only: a plain MergeTree (never Replacing or Collapsing), no TTL,
-- and nothing in Driftline updates or deletes a row; on releases with
-- access control the query service's audit user holds INSERT and SELECT
-- on this table alone. at_us orders entries within a second (no
-- DateTime64 on 18.16).
CREATE TABLE IF NOT EXISTS audit_log
(
    at          DateTime,
    at_us       UInt32,
    actor_id    String,
    roles       Array(String),
    tenant_ids  Array(String),
    request_id  String,
    method      LowCardinality(String),
    target      String,
    endpoint    LowCardinality(String),
    result      LowCardinality(String),
    status      UInt16,
    reason      String,
    remote      String,
    key_id      String,
    policy_rev  LowCardinality(String)
)
ENGINE = MergeTree()
PARTITION BY toYYYYMM(at)
ORDER BY (at, at_us, request_id)
