-- Billing conservation per window (docs/billing-model.md): one current row
-- per (tenant_id, product_id, currency, window_start, partition), where
-- window_start is the UTC hour of the usage's occurred_at and partition the
-- partition of the billing topics whose usage_ids the row counts (a
-- window's totals are the sum over its partitions). Rows are absolute (the
-- reconciler's running totals), so a replay writes the same rows again.
-- Amounts are exact decimal strings in the row's currency.
CREATE TABLE IF NOT EXISTS billing_window
(
    tenant_id                     LowCardinality(String),
    product_id                    LowCardinality(String),
    currency                      LowCardinality(String),
    window_start                  DateTime,
    partition                     UInt32,
    accepted                      UInt64,
    rejected                      UInt64,
    rating_pending                UInt64,
    not_rated                     UInt64,
    rated                         UInt64,
    rated_amount                  String,
    rated_without_usage           UInt64,
    rated_without_usage_amount    String,
    ledgered                      UInt64,
    ledgered_amount               String,
    ledger_pending                UInt64,
    ledger_pending_amount         String,
    not_ledgered                  UInt64,
    not_ledgered_amount           String,
    amount_mismatch               UInt64,
    amount_mismatch_amount        String,
    amount_mismatch_ledger_amount String,
    ledger_entries                UInt64,
    ledger_amount                 String,
    ledger_without_rated          UInt64,
    ledger_without_rated_amount   String,
    unexplained                   UInt64,
    balanced                      UInt8,
    last_event_at                 DateTime,
    version                       UInt64,
    updated_at                    DateTime
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (tenant_id, product_id, currency, window_start, partition)
