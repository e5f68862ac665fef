-- conflicting_usage (a usage_id that came again with other content) shows
-- both quantities: quantity is the first usage's (the one rated),
-- conflict_quantity the latest conflicting one's; empty on every other
-- kind.
ALTER TABLE billing_mismatch ADD COLUMN conflict_quantity String DEFAULT '' AFTER quantity
