-- drift_evidence and node_agent_status themselves get granules of 256
-- rows, and their fine-grained copies of migration 005 go: the copies
-- doubled the insert and merge work of the two largest tables, and the
-- reads they served (a few rows by key, without FINAL) read the tables of
-- record as cheaply once these have the same granules. The scans with
-- FINAL cost the same either way (bench/query/README.md).
--
-- The copy already holds every row of its table (its view copied every
-- insert, migration 005 the rows before), so it becomes the table: the
-- views go, the copy is filled once more (a row copied twice collapses),
-- and the two tables change names. Run it with the joiners stopped, as
-- every migration: a row inserted between the drop of a view and the
-- rename would be left in the table that is dropped.
--
-- Every statement may run again after a failure (MigrateFS): before the
-- rename the copy is refilled; after it, a new copy is made of the table
-- that is already fine-grained and swapped in the same way. Only a
-- failure between the two renames of one RENAME statement needs a hand:
-- RENAME TABLE drift_evidence_coarse TO drift_evidence (or the node
-- table's), then migrate again.
DROP TABLE IF EXISTS drift_evidence_fine_mv
;
DROP TABLE IF EXISTS node_agent_status_fine_mv
;
-- Recreated below, on the renamed table.
DROP TABLE IF EXISTS drift_evidence_marks_mv
;
-- The copies exist (migration 005) unless a run of this migration got past
-- its renames; then they are made again, like the tables, which by then
-- have the fine granules themselves.
CREATE TABLE IF NOT EXISTS drift_evidence_fine AS drift_evidence
;
CREATE TABLE IF NOT EXISTS node_agent_status_fine AS node_agent_status
;
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
;
DROP TABLE IF EXISTS drift_evidence_coarse
;
DROP TABLE IF EXISTS node_agent_status_coarse
;
RENAME TABLE drift_evidence TO drift_evidence_coarse, drift_evidence_fine TO drift_evidence
;
RENAME TABLE node_agent_status TO node_agent_status_coarse, node_agent_status_fine TO node_agent_status
;
DROP TABLE IF EXISTS drift_evidence_coarse
;
DROP TABLE IF EXISTS node_agent_status_coarse
;
CREATE MATERIALIZED VIEW IF NOT EXISTS drift_evidence_marks_mv TO drift_evidence_marks
AS SELECT evidence_id FROM drift_evidence WHERE cityHash64(evidence_id) % 1024 = 0
