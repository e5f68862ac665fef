-- Per producer and reason, the well-formed records a consumer did not
-- apply because their producer got time or identity wrong (clock_skew,
-- late_event, conflicting_duplicate): what the status endpoint shows per
-- producer. Counts are cumulative per (consumer, partition), part of the
-- partition's checkpointed state, so a replayed batch writes the same
-- rows again; the read sums the current row of every partition with
-- FINAL.
CREATE TABLE IF NOT EXISTS producer_rejections
(
    consumer    LowCardinality(String),
    partition   UInt32,
    producer    String,
    reason      LowCardinality(String),
    events      UInt64,
    last_at     DateTime,
    updated_at  DateTime,
    version     UInt64
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (consumer, partition, producer, reason)
