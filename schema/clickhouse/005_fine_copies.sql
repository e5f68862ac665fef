-- Copies of drift_evidence and node_agent_status with fine granules (256
-- rows instead of 8192), kept by materialized views on every insert, for
-- the reads that fetch a few rows by key: the attention queue, drift
-- pages in evidence_id order and drift detail. Reading one row decodes
-- its whole granule of every column, so a granule 32 times smaller makes
-- a point read about that much cheaper. These reads go without FINAL
-- (which on ClickHouse 18.16 collapses the selected granules on one
-- thread, an order of magnitude slower than reading them) and pick each
-- key's current row themselves: the highest version, then the latest
-- updated_at (docs/drift-model.md, "The read model"). drift_evidence and
-- node_agent_status stay the tables of record.
CREATE TABLE IF NOT EXISTS drift_evidence_fine
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
SETTINGS index_granularity = 256
;
CREATE MATERIALIZED VIEW IF NOT EXISTS drift_evidence_fine_mv TO drift_evidence_fine
AS SELECT evidence_id, correlation_id, resource_family, product_id, owning_domain, owning_package,
    domain_id, record_type, record_id, expected_state, expected_version, provider, provider_id,
    observed_state, observed_version, observed_at, classification, severity, status, first_seen_at,
    last_seen_at, resolved_at, retry_count, posture, next_attempt_at, runbook, attention_score,
    version, updated_at
FROM drift_evidence
;
CREATE TABLE IF NOT EXISTS node_agent_status_fine
(
    node_id                   String,
    domain_id                 LowCardinality(String),
    owning_domain             LowCardinality(String),
    node_agent_state          LowCardinality(String),
    node_agent_reason         LowCardinality(String),
    update_path               LowCardinality(String),
    expected_agent_version    String,
    observed_agent_version    String,
    cert_issuer_fingerprint   String,
    ingress_trust_fingerprint String,
    host_fingerprint          String,
    terminal_stream_probe     LowCardinality(String),
    workload_impact           LowCardinality(String),
    health                    LowCardinality(String),
    gate                      LowCardinality(String),
    connectivity_mode         LowCardinality(String),
    rtt_ms                    Float64,
    loss_pct                  Float64,
    bandwidth_kbps            Float64,
    backlog_messages          Int64,
    seconds_behind            Int64,
    replay_required           UInt8,
    last_seen_at              DateTime,
    attention_score           Float64,
    version                   UInt64,
    updated_at                DateTime
)
ENGINE = ReplacingMergeTree(version)
ORDER BY node_id
SETTINGS index_granularity = 256
;
CREATE MATERIALIZED VIEW IF NOT EXISTS node_agent_status_fine_mv TO node_agent_status_fine
AS SELECT node_id, domain_id, owning_domain, node_agent_state, node_agent_reason, update_path,
    expected_agent_version, observed_agent_version, cert_issuer_fingerprint, ingress_trust_fingerprint,
    host_fingerprint, terminal_stream_probe, workload_impact, health, gate, connectivity_mode,
    rtt_ms, loss_pct, bandwidth_kbps, backlog_messages, seconds_behind, replay_required,
    last_seen_at, attention_score, version, updated_at
FROM node_agent_status
;
-- The rows written before this migration (the views above already copy
-- every later insert; a row copied twice collapses).
INSERT INTO drift_evidence_fine (evidence_id, correlation_id, resource_family, product_id, owning_domain,
    owning_package, domain_id, record_type, record_id, expected_state, expected_version, provider,
    provider_id, observed_state, observed_version, observed_at, classification, severity, status,
    first_seen_at, last_seen_at, resolved_at, retry_count, posture, next_attempt_at, runbook,
    attention_score, version, updated_at)
SELECT evidence_id, correlation_id, resource_family, product_id, owning_domain, owning_package,
    domain_id, record_type, record_id, expected_state, expected_version, provider, provider_id,
    observed_state, observed_version, observed_at, classification, severity, status, first_seen_at,
    last_seen_at, resolved_at, retry_count, posture, next_attempt_at, runbook, attention_score,
    version, updated_at
FROM drift_evidence
;
INSERT INTO node_agent_status_fine (node_id, domain_id, owning_domain, node_agent_state, node_agent_reason,
    update_path, expected_agent_version, observed_agent_version, cert_issuer_fingerprint,
    ingress_trust_fingerprint, host_fingerprint, terminal_stream_probe, workload_impact, health, gate,
    connectivity_mode, rtt_ms, loss_pct, bandwidth_kbps, backlog_messages, seconds_behind,
    replay_required, last_seen_at, attention_score, version, updated_at)
SELECT node_id, domain_id, owning_domain, node_agent_state, node_agent_reason, update_path,
    expected_agent_version, observed_agent_version, cert_issuer_fingerprint, ingress_trust_fingerprint,
    host_fingerprint, terminal_stream_probe, workload_impact, health, gate, connectivity_mode,
    rtt_ms, loss_pct, bandwidth_kbps, backlog_messages, seconds_behind, replay_required,
    last_seen_at, attention_score, version, updated_at
FROM node_agent_status
