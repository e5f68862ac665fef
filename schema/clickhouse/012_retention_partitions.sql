-- Retention drops whole partitions (ClickHouse 18.16 has no TTL), so the
-- tables that grow with time are partitioned by month of a time that is
-- fixed per sorting key: ReplacingMergeTree replaces a row only within
-- its partition, so the key's rows must never span two.
--   drift_history   by month of `at`          (key: evidence_id, version)
--   billing_window  by month of `window_start` (window_start is in the key)
-- rated_usage is partitioned by month of `day` since 002; consumer_progress
-- keeps one row per (consumer, partition) once merged, and retention
-- deletes only keys that stopped reporting (pipeline/readmodel/retention).
--
-- Each table is rebuilt as a partitioned copy and swapped in by RENAME;
-- the unpartitioned original stays as <table>_unpartitioned until an
-- operator drops it. `CREATE TABLE ... AS` copies the columns the table
-- has now, whichever migrations added them, hence `SELECT *`: the copy
-- has exactly the original's columns in its order. Stop the writers
-- (joiners, raters) while this migration runs on a populated read model:
-- a row written between the copy and the swap would stay in the original.
-- A rerun after an interruption starts over from the current table.
DROP TABLE IF EXISTS drift_history_partitioned
;
CREATE TABLE drift_history_partitioned AS drift_history
ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(at)
ORDER BY (evidence_id, version)
;
INSERT INTO drift_history_partitioned SELECT * FROM drift_history
;
DROP TABLE IF EXISTS drift_history_unpartitioned
;
RENAME TABLE drift_history TO drift_history_unpartitioned, drift_history_partitioned TO drift_history
;
DROP TABLE IF EXISTS billing_window_partitioned
;
CREATE TABLE billing_window_partitioned AS billing_window
ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(window_start)
ORDER BY (tenant_id, product_id, currency, window_start, partition)
;
INSERT INTO billing_window_partitioned SELECT * FROM billing_window
;
DROP TABLE IF EXISTS billing_window_unpartitioned
;
RENAME TABLE billing_window TO billing_window_unpartitioned, billing_window_partitioned TO billing_window
