package cli

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/api"
	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/readmodel/sink"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// startAPI starts the query API over a database holding two findings, a node
// and a billing mismatch.
func startAPI(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	db, _ := testenv.ClickHouseConn(t)
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	ins := func(sql string, rows ...[]any) {
		t.Helper()
		testenv.Insert(t, db, sql, rows...)
	}
	ins(`INSERT INTO drift_evidence (evidence_id, owning_domain, provider, provider_id, expected_state, observed_state,
		classification, severity, status, posture, first_seen_at, last_seen_at, attention_score, version)`,
		[]any{"identity_mismatch:maas/n1", "compute", "maas", "n1", "running", "running", "identity_mismatch", "critical", "open", "quarantine", now, now, 900.0, uint64(1)},
		[]any{"stale_lifecycle_state:maas/n2", "compute", "maas", "n2", "running", "starting", "stale_lifecycle_state", "warning", "open", "retry", now, now, 40.0, uint64(1)})
	ins(`INSERT INTO node_agent_status (node_id, domain_id, owning_domain, gate, connectivity_mode, health, node_agent_state,
		expected_agent_version, observed_agent_version, attention_score, version, last_seen_at, tags, phase, state, relay_id,
		seconds_behind, backlog_messages)`,
		[]any{"n1", "d-eu1", "compute", "block_production", "LIVE", "OK", "security_action_required", "1.2", "1.1", 800.0, uint64(1),
			now, []string{"gpu", "eu"}, "QUARANTINED", "GATE_BLOCKED", "relay-7", int64(42), int64(9)})
	ins(`INSERT INTO node_lifecycle_history (node_id, seq, domain_id, from_phase, from_state, to_phase, to_state, reason, at, correlation_id, updated_at)`,
		[]any{"n1", uint64(1), "d-eu1", "", "", "ACTIVE", "LIVE_OK", "connectivity", now.Add(-time.Hour), "c1", now},
		[]any{"n1", uint64(2), "d-eu1", "ACTIVE", "LIVE_OK", "QUARANTINED", "GATE_BLOCKED", "gate_blocked", now, "c2", now})
	ins(`INSERT INTO rollout_status (policy_bundle_id, domain_id, partition, target_version, artifact_id, deadline, nodes, at_target,
		updating, behind, failed, pending, as_of, version, updated_at)`,
		[]any{"pb-7", "d-eu1", uint32(0), "3.1", "art-7", now, uint32(5), uint32(3), uint32(1), uint32(1), uint32(0), uint32(0), now, uint64(1), now})
	ins(`INSERT INTO sync_debt_minute (domain_id, relay_id, minute, partition, nodes, max_seconds_behind, backlog_messages, version, updated_at)`,
		[]any{"d-eu1", "relay-7", now.Add(-time.Minute), uint32(0), uint32(1), int64(42), int64(9), uint64(1), now})
	ins(`INSERT INTO billing_mismatch (mismatch_id, kind, tenant_id, rated_amount, currency, status, first_seen_at, last_seen_at, version)`,
		[]any{"rated_not_ledgered:u1", "rated_not_ledgered", "t1", "0.10", "EUR", "open", now, now, uint64(1)},
		[]any{"rated_not_ledgered:u2", "rated_not_ledgered", "t1", "0.20", "EUR", "open", now, now, uint64(1)})
	// The joiner keeps the heat map's counts and the attention tops; rows
	// written by hand need them rebuilt.
	if err := sink.RebuildSummaries(ctx, db, 1); err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(api.Options{Guard: testenv.LocalGuard(t), DB: db, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	return testenv.Serve(t, srv)
}

func TestClient(t *testing.T) {
	u := startAPI(t)
	run := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		if err := Run(args[0], append([]string{"-api", u}, args[1:]...), &out); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return out.String()
	}
	out := run("drift", "severity=critical")
	if !strings.Contains(out, "EVIDENCE_ID") || !strings.Contains(out, "identity_mismatch:maas/n1") || strings.Contains(out, "n2") {
		t.Errorf("drift table:\n%s", out)
	}
	var page apitypes.DriftPage
	if err := json.Unmarshal([]byte(run("drift", "-o", "json", "-all", "limit=1")), &page); err == nil {
		t.Errorf("-all json is a list, not a page")
	}
	var all []apitypes.Finding
	if err := json.Unmarshal([]byte(run("drift", "-o", "json", "-all", "limit=1")), &all); err != nil || len(all) != 2 {
		t.Errorf("drift -all: %v %d", err, len(all))
	}
	recs, err := csv.NewReader(strings.NewReader(run("heatmap", "-o", "csv"))).ReadAll()
	// The two open billing mismatches count as billing_mismatch findings
	// of no domain.
	if err != nil || len(recs) != 3 || recs[1][0] != "" || recs[1][9] != "2 (2 crit)" ||
		recs[2][0] != "compute" || recs[2][3] != "1" || recs[2][4] != "1 (1 crit)" {
		t.Errorf("heatmap csv: %v %v", recs, err)
	}
	// The subcommands whose output must hold each of want; below
	// "timeline", the fleet core's subcommands and -tag.
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"attention", "n=4"}, []string{"identity_mismatch:maas/n1", "gate block_production", "billing_mismatch:rated_not_ledgered:u1"}},
		{[]string{"billing", "tenant=t1"}, []string{"total EUR: 2 mismatches, at risk 0.30"}},
		{[]string{"automation", "tenant_id=t1"}, []string{"tenant t1: stopped=true (2 open mismatches that stop it, at risk 0.30 EUR", "rated_not_ledgered"}},
		{[]string{"automation", "tenant_id=t2"}, []string{"tenant t2: stopped=false (0 open mismatches that stop it, at risk -;"}},
		{[]string{"node", "n1"}, []string{"block_production", "DIFFERS", "identity_mismatch:maas/n1"}},
		{[]string{"node", "gate=block_production"}, []string{"n1"}},
		{[]string{"timeline", "n1"}, []string{"QUARANTINED/GATE_BLOCKED", "gate_blocked", "ACTIVE/LIVE_OK"}},
		{[]string{"rollouts"}, []string{"pb-7", "(all)", "3.1"}},
		{[]string{"relays"}, []string{"relay-7", "domain d-eu1: 1 nodes over 1 relays, worst 42s behind, backlog 9"}},
		{[]string{"syncdebt", "domain_id=d-eu1"}, []string{"relay-7", "42"}},
		{[]string{"node", "-tag", "gpu", "-tag", "eu"}, []string{"n1"}},
		{[]string{"node", "n1"}, []string{"lifecycle", "QUARANTINED/GATE_BLOCKED", "transition", "diff"}},
	} {
		out := run(tc.args...)
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: no %q in\n%s", tc.args, w, out)
			}
		}
	}
	if out := run("node", "-tag", "nope"); strings.Contains(out, "n1") {
		t.Errorf("node -tag nope:\n%s", out)
	}
	var buf bytes.Buffer
	err = Run("drift", []string{"-api", u, "severity=bogus"}, &buf)
	if err == nil || !strings.Contains(err.Error(), "allowed: critical, warning") {
		t.Errorf("bad filter: %v", err)
	}
}
