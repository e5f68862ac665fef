package reader

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/contract"
)

// Alertable is one condition of CONTRACT section 9.3 that holds now: an
// open critical finding (not suppressed), a node whose gate blocks
// production, or a tenant whose financial automation is stopped (open
// billing mismatches of a kind that stops it, as reader.Automation reads
// them).
type Alertable struct {
	ID       string // evidence_id, "node:<node_id>", "automation:<tenant_id>" or "automation:*" (every tenant)
	Kind     string // finding, node_gate, automation
	Labels   map[string]string
	Summary  string
	StartsAt time.Time
}

// Alertables reads the conditions that hold now.
func (rd *Reader) Alertables(ctx context.Context) ([]Alertable, error) {
	var out []Alertable
	// A suppressed finding scores 0 (docs/actions.md): it is not alerted.
	err := rd.each(ctx, "alert_findings", `SELECT evidence_id, classification, severity, owning_domain, domain_id,
	provider, provider_id, posture, runbook, first_seen_at FROM drift_evidence FINAL
	WHERE status = ? AND severity = ? AND attention_score > 0`,
		[]any{string(contract.StatusOpen), string(contract.SeverityCritical)}, func(r driver.Rows) error {
			var (
				a                                                                    = Alertable{Kind: "finding"}
				class, sev, domain, domainID, provider, providerID, posture, runbook string
			)
			err := r.Scan(&a.ID, &class, &sev, &domain, &domainID, &provider, &providerID, &posture, &runbook, &a.StartsAt)
			a.Labels = map[string]string{"evidence_id": a.ID, "classification": class, "severity": sev,
				"owning_domain": domain, "domain_id": domainID, "provider": provider, "provider_id": providerID,
				"posture": posture, "runbook": runbook}
			a.Summary = fmt.Sprintf("%s on %s/%s (%s)", class, provider, providerID, posture)
			out = append(out, a)
			return err
		})
	if err != nil {
		return nil, err
	}
	err = rd.each(ctx, "alert_nodes", `SELECT node_id, owning_domain, domain_id, node_agent_state, node_agent_reason, last_seen_at
	FROM node_agent_status FINAL WHERE gate = ?`, []any{string(contract.GateBlockProduction)}, func(r driver.Rows) error {
		var node, domain, domainID, state, reason string
		var at time.Time
		err := r.Scan(&node, &domain, &domainID, &state, &reason, &at)
		out = append(out, Alertable{ID: "node:" + node, Kind: "node_gate", StartsAt: at,
			Labels: map[string]string{"node_id": node, "owning_domain": domain, "domain_id": domainID,
				"gate": string(contract.GateBlockProduction), "node_agent_state": state, "node_agent_reason": reason, "severity": string(contract.SeverityCritical)},
			Summary: fmt.Sprintf("node %s: gate %s (%s %s)", node, contract.GateBlockProduction, state, reason)})
		return err
	})
	if err != nil {
		return nil, err
	}
	// A tenant's automation stops as reader.Automation says: an open
	// mismatch of a stopping kind (apitypes.AutomationStoppingKinds)
	// names the tenant, or an unbalanced window names no tenant, which
	// stops every tenant's alike and is alerted once as
	// "automation:*". The alert sender's context has no tenant scope, so
	// every tenant is read; the scope is applied all the same, as in every
	// read of billing_mismatch, so that no caller with a scope reads past
	// it.
	kinds := apitypes.AutomationStoppingKinds
	conds, args := []string{"status = ?", inList("kind", len(kinds)), "(tenant_id != '' OR kind = ?)"}, []any{string(contract.StatusOpen)}
	for _, k := range kinds {
		args = append(args, k)
	}
	args = append(args, string(contract.KindWindowUnbalanced))
	conds, args = scopeWhere(ctx, "tenant_id", conds, args)
	err = rd.each(ctx, "alert_automation", "SELECT tenant_id, count(), min(first_seen_at) FROM billing_mismatch FINAL"+
		whereClause(conds)+" GROUP BY tenant_id", args, func(r driver.Rows) error {
		var tenant string
		var n uint64
		var at time.Time
		err := r.Scan(&tenant, &n, &at)
		a := Alertable{ID: "automation:" + tenant, Kind: "automation", StartsAt: at,
			Labels:  map[string]string{"tenant_id": tenant, "classification": string(contract.ClassBilling), "severity": string(contract.SeverityCritical)},
			Summary: fmt.Sprintf("financial automation stopped for tenant %s: %d open billing mismatches", tenant, n)}
		if tenant == "" {
			a.ID, a.Labels["tenant_scope"] = "automation:*", "all"
			a.Summary = fmt.Sprintf("financial automation stopped for every tenant: %d open unbalanced windows attributed to no tenant", n)
		}
		out = append(out, a)
		return err
	})
	return out, err
}

// Delivery is an alert sent firing to a receiver and not yet resolved
// there.
type Delivery struct {
	ID       string
	Labels   map[string]string
	StartsAt time.Time
}

// AlertLog keeps, per receiver, the alerts sent firing and not yet
// resolved (alert_deliveries): the alert sender's position, so that a
// restarted sender sends neither a firing twice nor misses a resolve.
type AlertLog struct {
	conn driver.Conn
}

// NewAlertLog returns the alert log over conn.
func NewAlertLog(conn driver.Conn) *AlertLog { return &AlertLog{conn: conn} }

// Firing returns the alerts receiver was sent firing and not resolved.
func (l *AlertLog) Firing(ctx context.Context, receiver string) (map[string]Delivery, error) {
	rows, err := l.conn.Query(ctx, `SELECT alert_id, label_names, label_values, starts_at FROM alert_deliveries FINAL
	WHERE receiver = ? AND state = 'firing'`, receiver)
	if err != nil {
		return nil, fmt.Errorf("read alert_deliveries: %w", err)
	}
	defer rows.Close()
	out := map[string]Delivery{}
	for rows.Next() {
		var (
			d             Delivery
			names, values []string
		)
		if err := rows.Scan(&d.ID, &names, &values, &d.StartsAt); err != nil {
			return nil, fmt.Errorf("read alert_deliveries: %w", err)
		}
		d.Labels = make(map[string]string, len(names))
		for i := range min(len(names), len(values)) {
			d.Labels[names[i]] = values[i]
		}
		d.StartsAt = d.StartsAt.UTC()
		out[d.ID] = d
	}
	return out, rows.Err()
}

// Record records that receiver acknowledged ds in state (firing or
// resolved) at at, which versions the rows: the latest at of an alert
// is its state.
func (l *AlertLog) Record(ctx context.Context, receiver, state string, ds []Delivery, at time.Time) error {
	if len(ds) == 0 {
		return nil
	}
	b, err := l.conn.PrepareBatch(ctx, `INSERT INTO alert_deliveries (receiver, alert_id, state, label_names,
	label_values, starts_at, sent_at, version)`)
	if err != nil {
		return fmt.Errorf("record alert deliveries: %w", err)
	}
	version := uint64(at.UnixNano())
	for _, d := range ds {
		names := make([]string, 0, len(d.Labels))
		values := make([]string, 0, len(d.Labels))
		for k, v := range d.Labels {
			names, values = append(names, k), append(values, v)
		}
		if err := b.Append(receiver, d.ID, state, names, values, d.StartsAt.UTC(), at.UTC(), min(version, math.MaxInt64)); err != nil {
			return fmt.Errorf("record alert deliveries: %w", err)
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("record alert deliveries: %w", err)
	}
	return nil
}
