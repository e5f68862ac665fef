-- Small read models that keep the operator surfaces fast however large
-- drift_evidence grows (it stays the source of truth). On ClickHouse 18.16
-- a FINAL read collapses every granule it selects, so the heat map, the
-- status and the attention queue read these instead, and drift pages read
-- drift_evidence only inside an evidence_id range (docs/drift-model.md).

-- Findings per joiner partition and group: absolute counts, written by
-- the joiner from its state whenever a group changes, so that a replayed
-- batch writes the same rows again. version grows with every transition
-- the partition applies. The read sums the current row of every
-- (partition, group) with FINAL: a few thousand rows.
CREATE TABLE IF NOT EXISTS finding_counts
(
    partition        UInt32,
    owning_domain    LowCardinality(String),
    classification   LowCardinality(String),
    severity         LowCardinality(String),
    status           LowCardinality(String),
    posture          LowCardinality(String),
    product_id       LowCardinality(String),
    resource_family  LowCardinality(String),
    provider         LowCardinality(String),
    domain_id        LowCardinality(String),
    findings         UInt64,
    version          UInt64
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (partition, owning_domain, classification, severity, status, posture, product_id, resource_family, provider, domain_id)
;
-- The open findings of highest attention per joiner partition: rows with
-- per_domain 0 hold the partition's top over all domains, rows with
-- per_domain 1 the top of each owning_domain. rank is a slot (0 is the
-- highest); a slot past the end of a shrunken top holds evidence_id ''.
-- The global top n (n up to the slots kept) is among the union of the
-- partitions' tops.
CREATE TABLE IF NOT EXISTS attention_top
(
    per_domain       UInt8,
    owning_domain    LowCardinality(String),
    partition        UInt32,
    rank             UInt16,
    evidence_id      String,
    attention_score  Float64,
    version          UInt64
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (per_domain, owning_domain, partition, rank)
;
-- A fixed sample of evidence ids (about one in 1024, chosen by hash), kept
-- by a materialized view on every insert into drift_evidence. A drift page
-- in evidence_id order reads drift_evidence FINAL only between the cursor
-- and a sampled id a few samples further on, which the primary index
-- narrows to a few granules.
CREATE TABLE IF NOT EXISTS drift_evidence_marks
(
    evidence_id      String
)
ENGINE = ReplacingMergeTree
ORDER BY evidence_id
;
CREATE MATERIALIZED VIEW IF NOT EXISTS drift_evidence_marks_mv TO drift_evidence_marks
AS SELECT evidence_id FROM drift_evidence WHERE cityHash64(evidence_id) % 1024 = 0
;
-- Marks of the findings written before this migration (a rerun only adds
-- duplicates, which collapse).
INSERT INTO drift_evidence_marks (evidence_id)
SELECT DISTINCT evidence_id FROM drift_evidence WHERE cityHash64(evidence_id) % 1024 = 0
