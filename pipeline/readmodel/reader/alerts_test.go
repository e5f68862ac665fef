package reader

import (
	"context"
	"testing"
	"time"

	"github.com/driftline/driftline/internal/testenv"
)

// automationAlerts inserts open billing_mismatch rows (id, kind, tenant)
// and returns the automation alerts (id to summary) and whether
// reader.Automation (/v1/billing/automation) says tenant's automation is
// stopped.
func automationAlerts(t *testing.T, tenant string, rows ...[3]string) (alerts map[string]string, stopped bool) {
	t.Helper()
	conn, _ := testenv.ClickHouseConn(t)
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	var rs [][]any
	for _, r := range rows {
		rs = append(rs, []any{r[0], r[1], "u-" + r[0], "gw", "m-" + r[0], r[2], "p1", "gpu_hour", "1.000000", "", "", "EUR", "open", at, at, uint64(1), at})
	}
	testenv.Insert(t, conn, `INSERT INTO billing_mismatch (mismatch_id, kind, usage_id, metering_source, metering_id, tenant_id,
	product_id, unit_id, quantity, rated_amount, ledger_amount, currency, status, first_seen_at, last_seen_at, version, updated_at)`, rs...)
	rd := New(conn, Options{})
	ctx := context.Background()
	as, err := rd.Alertables(ctx)
	if err != nil {
		t.Fatal(err)
	}
	alerts = map[string]string{}
	for _, a := range as {
		if a.Kind == "automation" {
			alerts[a.ID] = a.Summary
		}
	}
	flag, err := rd.Automation(ctx, tenant, "")
	if err != nil {
		t.Fatal(err)
	}
	return alerts, flag.Stopped
}

// TestAlertablesAutomationStoppingKinds: only the kinds that stop
// financial automation raise its alert; duplicate_usage and
// conflicting_usage alone leave it running (/v1/billing/automation), so
// they raise none.
func TestAlertablesAutomationStoppingKinds(t *testing.T) {
	alerts, stopped := automationAlerts(t, "t1", [3]string{"dup-t1", "duplicate_usage", "t1"}, [3]string{"conf-t1", "conflicting_usage", "t1"})
	if stopped {
		t.Fatal("precondition: /v1/billing/automation says t1 is stopped")
	}
	if len(alerts) != 0 {
		t.Fatalf("automation of t1 is not stopped (/v1/billing/automation), yet alerts hold: %v", alerts)
	}
	alerts, stopped = automationAlerts(t, "t1", [3]string{"dup-t1", "duplicate_usage", "t1"}, [3]string{"unrated-t1", "usage_not_rated", "t1"})
	if !stopped {
		t.Fatal("precondition: /v1/billing/automation says t1 is running")
	}
	if _, ok := alerts["automation:t1"]; !ok || len(alerts) != 1 {
		t.Fatalf("automation of t1 is stopped, alerts hold %v, want automation:t1", alerts)
	}
}

// TestAlertablesAutomationUnattributed: an open window_unbalanced row
// with no tenant stops every tenant's automation (docs/billing-model.md,
// docs/access.md), so "automation:*" holds; another kind with no tenant
// stops none.
func TestAlertablesAutomationUnattributed(t *testing.T) {
	alerts, stopped := automationAlerts(t, "t1", [3]string{"win-none", "window_unbalanced", ""}, [3]string{"unrated-none", "usage_not_rated", ""})
	if !stopped {
		t.Fatal("precondition: /v1/billing/automation says t1 is running")
	}
	if _, ok := alerts["automation:*"]; !ok || len(alerts) != 1 {
		t.Fatalf("financial automation is stopped for every tenant (unattributed window_unbalanced), alerts hold %v, want automation:*", alerts)
	}
}
