-- Node-agent evidence and gate per node (CONTRACT section 4), one current
-- row per node_id.
CREATE TABLE IF NOT EXISTS node_agent_status
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
;
-- Billing mismatches (CONTRACT section 5), one current row per mismatch_id
-- (kind + usage key or usage_id). Amounts are decimal strings.
CREATE TABLE IF NOT EXISTS billing_mismatch
(
    mismatch_id     String,
    kind            LowCardinality(String),
    usage_id        String,
    metering_source LowCardinality(String),
    metering_id     String,
    tenant_id       LowCardinality(String),
    product_id      LowCardinality(String),
    unit_id         LowCardinality(String),
    quantity        String,
    rated_amount    String,
    ledger_amount   String,
    currency        LowCardinality(String),
    status          LowCardinality(String),
    first_seen_at   DateTime,
    last_seen_at    DateTime,
    version         UInt64,
    updated_at      DateTime
)
ENGINE = ReplacingMergeTree(version)
ORDER BY mismatch_id
;
-- Every rated line, for finance totals. usage_id is unique per rated line
-- (exactly-once rating), so replays collapse on merge.
CREATE TABLE IF NOT EXISTS rated_usage
(
    usage_id        String,
    metering_source LowCardinality(String),
    metering_id     String,
    unit_id         LowCardinality(String),
    unit_version    UInt32,
    quantity        String,
    unit_price      String,
    amount          String,
    currency        LowCardinality(String),
    tenant_id       LowCardinality(String),
    product_id      LowCardinality(String),
    rated_at        DateTime,
    day             Date
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(day)
ORDER BY (tenant_id, usage_id)
