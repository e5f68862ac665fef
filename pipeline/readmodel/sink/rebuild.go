package sink

import (
	"context"
	"fmt"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// RebuildSummaries recomputes finding_counts and attention_top from the
// current rows of drift_evidence, as the joiner keeps them, spreading the
// findings over partitions by cityHash64(evidence_id) (not the Kafka
// partition: the reads sum and merge over partitions, so the answers are
// the same). It replaces the tables' contents, so it is only for a read
// model no joiner writes to: tests, benchmarks, or drift_evidence restored
// from a backup before the joiners start (they rewrite their whole
// summary on start anyway).
func RebuildSummaries(ctx context.Context, db driver.Conn, partitions int) error {
	if partitions < 1 {
		return fmt.Errorf("rebuild summaries: partitions %d < 1", partitions)
	}
	part := fmt.Sprintf("toUInt32(cityHash64(evidence_id) %% %d)", partitions)
	top := func(perDomain int, by string) string {
		return fmt.Sprintf(`INSERT INTO attention_top (per_domain, owning_domain, partition, rank, evidence_id, attention_score, version)
	SELECT %d, d, p, toUInt16(i - 1), ids[i], scores[i], 1 FROM (
		SELECT p, d, groupArray(evidence_id) AS ids, groupArray(attention_score) AS scores FROM (
			SELECT %s AS p, %s AS d, evidence_id, attention_score FROM drift_evidence FINAL WHERE status = 'open'
			ORDER BY p, d, attention_score DESC, evidence_id LIMIT %d BY p, d)
		GROUP BY p, d)
	ARRAY JOIN arrayEnumerate(ids) AS i`, perDomain, part, by, AttentionSlots)
	}
	for _, stmt := range []string{
		"TRUNCATE TABLE finding_counts",
		"TRUNCATE TABLE attention_top",
		`INSERT INTO finding_counts (partition, owning_domain, classification, severity, status, posture,
	product_id, resource_family, provider, domain_id, findings, version)
	SELECT ` + part + ` AS p, owning_domain, classification, severity, status, posture,
		product_id, resource_family, provider, domain_id, count(), 1
	FROM drift_evidence FINAL
	GROUP BY p, owning_domain, classification, severity, status, posture, product_id, resource_family, provider, domain_id`,
		top(0, "''"),
		top(1, "owning_domain"),
	} {
		if err := db.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("rebuild summaries: %w", err)
		}
	}
	return nil
}
