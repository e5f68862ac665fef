-- The nodes of highest attention per joiner partition, kept as
-- attention_top keeps the open findings (migration 004): the nodes whose
-- current node_agent_status row has a gate other than pass, by
-- attention_score and then node_id, over all domains (per_domain 0) and
-- per owning_domain (per_domain 1). rank is a slot (0 is the highest); a
-- slot past the end of a shrunken top holds node_id ''. The attention
-- queue takes its nodes from here instead of ranking node_agent_status,
-- which grows with the fleet; the global top n (n up to the slots kept)
-- is among the union of the partitions' tops.
CREATE TABLE IF NOT EXISTS attention_top_nodes
(
    per_domain       UInt8,
    owning_domain    LowCardinality(String),
    partition        UInt32,
    rank             UInt16,
    node_id          String,
    attention_score  Float64,
    version          UInt64
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (per_domain, owning_domain, partition, rank)
;
