-- Operator actions (CONTRACT section 9.2). The joiner applies each action
-- in stream order and writes its effect on the finding (who acknowledged
-- it, who it is assigned to, until when it is suppressed, where its latest
-- request to the platform's controllers stands, the id of the latest
-- action) into drift_evidence, and the action itself as a drift_history
-- row (docs/actions.md). One column per statement, so that a run after a
-- failure skips the columns added before (readmodel.MigrateFS).
ALTER TABLE drift_evidence ADD COLUMN acknowledged_by String
;
ALTER TABLE drift_evidence ADD COLUMN assignee String
;
ALTER TABLE drift_evidence ADD COLUMN suppressed_until DateTime
;
ALTER TABLE drift_evidence ADD COLUMN action_state LowCardinality(String)
;
ALTER TABLE drift_evidence ADD COLUMN last_action_id String
;
ALTER TABLE drift_history ADD COLUMN action_state LowCardinality(String)
;
ALTER TABLE drift_history ADD COLUMN action LowCardinality(String)
;
ALTER TABLE drift_history ADD COLUMN action_id String
;
ALTER TABLE drift_history ADD COLUMN actor_id String
;
ALTER TABLE drift_history ADD COLUMN reason String
;
ALTER TABLE drift_history ADD COLUMN refusal LowCardinality(String)
;
-- The answers of the query service to accepted actions, by Idempotency-Key:
-- a key posted again (to any query replica, after any restart) finds its
-- first answer here. request_hash is the SHA-256 of the canonical request
-- (route, evidence id or filters, and body): the same key with another
-- request is refused with 409. command_id is derived from the key, so two
-- replicas that race on one key write the same command, which the joiner
-- applies once (its dedupe of event ids). Should two replicas race on one
-- key, version (2^63 minus accepted_at in ns) keeps the first answer once
-- merged, and a read picks the row of the highest version as well. Rows
-- are never deleted.
CREATE TABLE IF NOT EXISTS action_commands
(
    idempotency_key  String,
    request_hash     String,
    command_id       String,
    evidence_id      String,
    action           LowCardinality(String),
    actor_id         String,
    answer           String,
    accepted_at      DateTime,
    version          UInt64
)
ENGINE = ReplacingMergeTree(version)
ORDER BY idempotency_key
;
-- The alert sender's position (CONTRACT section 9.3): per receiver, each
-- alert it was sent firing, and its resolve. A restarted sender reads the
-- firing rows and sends neither a firing twice nor misses a resolve.
CREATE TABLE IF NOT EXISTS alert_deliveries
(
    receiver         String,
    alert_id         String,
    state            LowCardinality(String),
    label_names      Array(String),
    label_values     Array(String),
    starts_at        DateTime,
    sent_at          DateTime,
    version          UInt64
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (receiver, alert_id)
