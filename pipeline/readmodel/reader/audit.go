package reader

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/driftline/driftline/pipeline/api/apitypes"
)

// AuditFilter selects audit_log entries.
type AuditFilter struct {
	Actors     []string
	Results    []string
	Methods    []string
	Endpoints  []string
	RequestIDs []string
	// From and To, when set, keep the entries at or after From and
	// before To.
	From, To time.Time
	// Limit bounds the entries returned.
	Limit int
}

// Audit reads the audit entries f selects, newest first, at most f.Limit,
// and whether more matched.
func (rd *Reader) Audit(ctx context.Context, f AuditFilter) ([]apitypes.AuditEntry, bool, error) {
	conds, args := listWhere([]listColumn{
		{"actor_id", f.Actors},
		{"result", f.Results},
		{"method", f.Methods},
		{"endpoint", f.Endpoints},
		{"request_id", f.RequestIDs},
	})
	conds, args = rangeWhere(conds, args, "at", f.From, f.To)
	sql := fmt.Sprintf(`SELECT at, at_us, actor_id, roles, tenant_ids, request_id, method, target, endpoint, result,
	status, reason, remote, key_id, policy_rev FROM audit_log%s ORDER BY at DESC, at_us DESC, request_id LIMIT %d`,
		whereClause(conds), f.Limit+1)
	out, err := list(ctx, rd, "audit", sql, args, []apitypes.AuditEntry{}, func(r driver.Rows) (apitypes.AuditEntry, error) {
		var (
			e      apitypes.AuditEntry
			us     uint32
			status uint16
		)
		err := r.Scan(&e.At, &us, &e.ActorID, &e.Roles, &e.TenantIDs, &e.RequestID, &e.Method, &e.Target, &e.Endpoint, &e.Result,
			&status, &e.Reason, &e.Remote, &e.KeyID, &e.PolicyRev)
		e.At = e.At.Add(time.Duration(us) * time.Microsecond).UTC()
		e.Status = int(status)
		return e, err
	})
	if err != nil {
		return nil, false, err
	}
	if len(out) > f.Limit {
		return out[:f.Limit], true, nil
	}
	return out, false, nil
}
