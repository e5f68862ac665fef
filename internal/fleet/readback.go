package fleet

import (
	"context"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// ReadFindings reads the current findings of the drift_evidence table in
// database db in the form Truth.Compare takes them. It returns the
// findings read before an error, so that a caller can say how far it got.
func ReadFindings(ctx context.Context, conn driver.Conn, db string) ([]Finding, error) {
	rows, err := conn.Query(ctx, `SELECT evidence_id, classification, severity, provider, provider_id, status,
		retry_count, posture FROM `+db+`.drift_evidence FINAL`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Finding
	for rows.Next() {
		var f Finding
		var retry uint32
		if err := rows.Scan(&f.EvidenceID, &f.Classification, &f.Severity, &f.Provider, &f.ProviderID, &f.Status, &retry, &f.Posture); err != nil {
			return out, err
		}
		f.RetryCount = int(retry)
		out = append(out, f)
	}
	return out, rows.Err()
}
