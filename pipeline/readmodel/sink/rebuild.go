package sink

import (
	"context"
	"fmt"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// RebuildSummaries recomputes finding_counts and attention_top from the
// current rows of drift_evidence, and attention_top_nodes from those of
// node_agent_status, as the joiner keeps them, spreading the findings and
// nodes over partitions by cityHash64 of their id (not the Kafka
// partition: the reads sum and merge over partitions, so the answers are
// the same). It replaces the tables' contents, so it is only for a read
// model no joiner writes to: tests, benchmarks, or drift_evidence restored
// from a backup before the joiners start (they rewrite their whole
// summary on start anyway).
func RebuildSummaries(ctx context.Context, db driver.Conn, partitions int) error {
	if partitions < 1 {
		return fmt.Errorf("rebuild summaries: partitions %d < 1", partitions)
	}
	part := func(id string) string { return fmt.Sprintf("toUInt32(cityHash64(%s) %% %d)", id, partitions) }
	// top ranks the rows of from that where admits into table, over all
	// domains (by '') or per owning domain.
	top := func(table, id, from, where string, perDomain int, by string) string {
		return fmt.Sprintf(`INSERT INTO %[1]s (per_domain, owning_domain, partition, rank, %[2]s, attention_score, version)
	SELECT %[5]d, d, p, toUInt16(i - 1), ids[i], scores[i], 1 FROM (
		SELECT p, d, groupArray(%[2]s) AS ids, groupArray(attention_score) AS scores FROM (
			SELECT %[7]s AS p, %[6]s AS d, %[2]s, attention_score FROM %[3]s FINAL WHERE %[4]s
			ORDER BY p, d, attention_score DESC, %[2]s LIMIT %[8]d BY p, d)
		GROUP BY p, d)
	ARRAY JOIN arrayEnumerate(ids) AS i`, table, id, from, where, perDomain, by, part(id), AttentionSlots)
	}
	findings := func(perDomain int, by string) string {
		return top("attention_top", "evidence_id", "drift_evidence", "status = 'open'", perDomain, by)
	}
	nodes := func(perDomain int, by string) string {
		return top("attention_top_nodes", "node_id", "node_agent_status", "gate != 'pass'", perDomain, by)
	}
	for _, stmt := range []string{
		"TRUNCATE TABLE finding_counts",
		"TRUNCATE TABLE attention_top",
		"TRUNCATE TABLE attention_top_nodes",
		`INSERT INTO finding_counts (partition, owning_domain, classification, severity, status, posture,
	product_id, resource_family, provider, domain_id, findings, version)
	SELECT ` + part("evidence_id") + ` AS p, owning_domain, classification, severity, status, posture,
		product_id, resource_family, provider, domain_id, count(), 1
	FROM drift_evidence FINAL
	GROUP BY p, owning_domain, classification, severity, status, posture, product_id, resource_family, provider, domain_id`,
		findings(0, "''"),
		findings(1, "owning_domain"),
		nodes(0, "''"),
		nodes(1, "owning_domain"),
	} {
		if err := db.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("rebuild summaries: %w", err)
		}
	}
	return nil
}
