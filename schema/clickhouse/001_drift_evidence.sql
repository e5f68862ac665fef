-- Current state of every drift finding: one row per evidence_id once merged
-- (read with FINAL). Rows are never deleted: a resolved finding stays as
-- evidence. version orders the rows of one finding; it grows with every
-- transition the joiner makes, so the highest version is the current row.
CREATE TABLE IF NOT EXISTS drift_evidence
(
    evidence_id      String,
    correlation_id   String,
    resource_family  LowCardinality(String),
    product_id       LowCardinality(String),
    owning_domain    LowCardinality(String),
    owning_package   LowCardinality(String),
    domain_id        LowCardinality(String),
    record_type      LowCardinality(String),
    record_id        String,
    expected_state   LowCardinality(String),
    expected_version String,
    provider         LowCardinality(String),
    provider_id      String,
    observed_state   LowCardinality(String),
    observed_version String,
    observed_at      DateTime,
    classification   LowCardinality(String),
    severity         LowCardinality(String),
    status           LowCardinality(String),
    first_seen_at    DateTime,
    last_seen_at     DateTime,
    resolved_at      DateTime,
    retry_count      UInt32,
    posture          LowCardinality(String),
    next_attempt_at  DateTime,
    runbook          String,
    attention_score  Float64,
    version          UInt64,
    updated_at       DateTime
)
ENGINE = ReplacingMergeTree(version)
ORDER BY evidence_id
;
-- Append-only history of finding transitions (opened, updated, resolved,
-- reopened), for drift detail and audits.
CREATE TABLE IF NOT EXISTS drift_history
(
    evidence_id     String,
    version         UInt64,
    transition      LowCardinality(String),
    classification  LowCardinality(String),
    severity        LowCardinality(String),
    status          LowCardinality(String),
    posture         LowCardinality(String),
    expected_state  LowCardinality(String),
    observed_state  LowCardinality(String),
    observed_version String,
    retry_count     UInt32,
    at              DateTime,
    correlation_id  String
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (evidence_id, version)
;
-- Per-partition progress of each consumer: what the status endpoint shows
-- as last run, watermark and processed counts. One current row per
-- (consumer, partition).
CREATE TABLE IF NOT EXISTS consumer_progress
(
    consumer        LowCardinality(String),
    partition       UInt32,
    watermark       DateTime,
    events          UInt64,
    findings_open   UInt64,
    updated_at      DateTime,
    version         UInt64
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (consumer, partition)
