-- Fleet core (CONTRACT section 8, docs/fleet-core.md): the node's
-- lifecycle, authority, rollout and supply-chain projections, the tags of
-- platform records, and the registry of artifacts and policy bundles.
--
-- One ADD COLUMN per statement: a rerun after a failure skips the columns
-- an earlier run added (MigrateFS).
ALTER TABLE node_agent_status ADD COLUMN tags Array(String)
;
ALTER TABLE node_agent_status ADD COLUMN node_kind LowCardinality(String) DEFAULT ''
;
ALTER TABLE node_agent_status ADD COLUMN lifecycle_intent LowCardinality(String) DEFAULT ''
;
ALTER TABLE node_agent_status ADD COLUMN phase LowCardinality(String) DEFAULT ''
;
ALTER TABLE node_agent_status ADD COLUMN state LowCardinality(String) DEFAULT ''
;
ALTER TABLE node_agent_status ADD COLUMN phase_since DateTime DEFAULT toDateTime(0)
;
ALTER TABLE node_agent_status ADD COLUMN transitions UInt64 DEFAULT 0
;
ALTER TABLE node_agent_status ADD COLUMN master_of_record LowCardinality(String) DEFAULT ''
;
ALTER TABLE node_agent_status ADD COLUMN controller_ids Array(String)
;
ALTER TABLE node_agent_status ADD COLUMN controller_id String DEFAULT ''
;
ALTER TABLE node_agent_status ADD COLUMN authority LowCardinality(String) DEFAULT ''
;
ALTER TABLE node_agent_status ADD COLUMN relay_id String DEFAULT ''
;
ALTER TABLE node_agent_status ADD COLUMN policy_bundle_id String DEFAULT ''
;
ALTER TABLE node_agent_status ADD COLUMN target_version String DEFAULT ''
;
ALTER TABLE node_agent_status ADD COLUMN reported_version String DEFAULT ''
;
ALTER TABLE node_agent_status ADD COLUMN rollout LowCardinality(String) DEFAULT ''
;
ALTER TABLE node_agent_status ADD COLUMN artifact_id String DEFAULT ''
;
ALTER TABLE node_agent_status ADD COLUMN artifact_digest String DEFAULT ''
;
ALTER TABLE node_agent_status ADD COLUMN supply_chain LowCardinality(String) DEFAULT ''
;
ALTER TABLE node_agent_status ADD COLUMN uptime_s Int64 DEFAULT 0
;
ALTER TABLE node_agent_status ADD COLUMN recent_events Array(String)
;
ALTER TABLE drift_evidence ADD COLUMN tags Array(String)
;
-- One row per lifecycle transition of a node. seq counts the node's
-- transitions from 1, so a replay writes the same (node_id, seq) rows and
-- they collapse; a key's row never changes month.
CREATE TABLE IF NOT EXISTS node_lifecycle_history
(
    node_id        String,
    seq            UInt64,
    domain_id      LowCardinality(String),
    from_phase     LowCardinality(String),
    from_state     LowCardinality(String),
    to_phase       LowCardinality(String),
    to_state       LowCardinality(String),
    reason         LowCardinality(String),
    at             DateTime,
    correlation_id String,
    updated_at     DateTime
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(at)
ORDER BY (node_id, seq)
;
-- Current rollout counts per policy bundle and domain, one row per Kafka
-- partition of the joiners (each partition counts its own nodes); readers
-- sum the partitions' current rows.
CREATE TABLE IF NOT EXISTS rollout_status
(
    policy_bundle_id String,
    domain_id        LowCardinality(String),
    partition        UInt32,
    target_version   String,
    artifact_id      String,
    deadline         DateTime,
    nodes            UInt32,
    at_target        UInt32,
    updating         UInt32,
    behind           UInt32,
    failed           UInt32,
    pending          UInt32,
    as_of            DateTime,
    version          UInt64,
    updated_at       DateTime
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (policy_bundle_id, domain_id, partition)
;
-- Sync debt per domain and relay (relay_id '' = nodes reaching the
-- platform directly) per minute of event time, one row per joiner
-- partition; readers sum nodes and backlog and take the max of
-- max_seconds_behind over the partitions.
CREATE TABLE IF NOT EXISTS sync_debt_minute
(
    domain_id          LowCardinality(String),
    relay_id           String,
    minute             DateTime,
    partition          UInt32,
    nodes              UInt32,
    max_seconds_behind Int64,
    backlog_messages   Int64,
    version            UInt64,
    updated_at         DateTime
)
ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(minute)
ORDER BY (domain_id, relay_id, minute, partition)
;
-- The registry of fleet.artifact and fleet.policy_bundle events (CONTRACT
-- 8.2), the newest (by occurred_at) per id.
CREATE TABLE IF NOT EXISTS fleet_artifacts
(
    artifact_id      String,
    artifact_version String,
    digest           String,
    signed_by        String,
    sbom_ref         String,
    provenance_ref   String,
    revoked          UInt8,
    occurred_at      DateTime,
    version          UInt64,
    updated_at       DateTime
)
ENGINE = ReplacingMergeTree(version)
ORDER BY artifact_id
;
CREATE TABLE IF NOT EXISTS policy_bundles
(
    policy_bundle_id String,
    target_version   String,
    artifact_id      String,
    domains          Array(String),
    deadline         DateTime,
    occurred_at      DateTime,
    version          UInt64,
    updated_at       DateTime
)
ENGINE = ReplacingMergeTree(version)
ORDER BY policy_bundle_id
