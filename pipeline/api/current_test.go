package api_test

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/api"
	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/readmodel/reader"
	"github.com/driftline/driftline/pipeline/readmodel/sink"
)

// churn writes findings and nodes in several versions, each version in its
// own parts, so that the tables hold superseded rows that a merge has
// not removed: findings resolved, moved to another domain with a higher
// score, written twice with one version (a replay); nodes whose old rows
// scored highest and whose current rows pass their gate or score low.
func churn(t *testing.T, fx *fixture) {
	t.Helper()
	ctx := context.Background()
	findings := `INSERT INTO drift_evidence (evidence_id, owning_domain, classification, severity, status, posture,
		first_seen_at, last_seen_at, attention_score, version, updated_at)
		SELECT concat('churn:maas/n', toString(number)), %s, 'orphan_provider_resource', 'warning', %s, 'quarantine',
			toDateTime(1795000000), toDateTime(1795000000), %s, %s, toDateTime(%s)
		FROM numbers(20000) WHERE %s`
	nodes := `INSERT INTO node_agent_status (node_id, owning_domain, domain_id, gate, connectivity_mode, health,
		attention_score, version, updated_at)
		SELECT concat('churn-', toString(number)), 'churn', 'd-churn', %s, 'LIVE', 'OK', %s, %s, toDateTime(1795000000)
		FROM numbers(3000) WHERE %s`
	for _, stmt := range []string{
		fmtSQL(findings, "concat('churn-', toString(number % 4))", "'open'", "toFloat64((number * 7919) % 1000)", "1", "1795000000", "1"),
		fmtSQL(findings, "concat('churn-', toString(number % 4))", "'resolved'", "0", "2", "1795000100", "number % 3 = 0"),
		fmtSQL(findings, "'churn-9'", "'open'", "toFloat64(2000 + number % 50)", "2", "1795000100", "number % 3 = 1"),
		// The same version again, written later: it is the current row.
		fmtSQL(findings, "'churn-9'", "'open'", "toFloat64(2000 + number % 50)", "2", "1795000200", "number % 3 = 1 AND number % 7 = 0"),
		fmtSQL(nodes, "'block_production'", "toFloat64(900 + number % 100)", "1", "1"),
		fmtSQL(nodes, "'pass'", "toFloat64(1000 + number % 100)", "2", "number % 2 = 0"),
		fmtSQL(nodes, "'warning'", "toFloat64(number % 500)", "2", "number % 2 = 1"),
	} {
		if err := fx.db.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	if err := sink.RebuildSummaries(ctx, fx.db, 3); err != nil {
		t.Fatal(err)
	}
}

func fmtSQL(format string, args ...string) string {
	for _, a := range args {
		format = strings.Replace(format, "%s", a, 1)
	}
	return format
}

// TestKeyReadsMatchFinal checks the reads by key without FINAL (drift
// pages, attention queue, drift detail) against FINAL over drift_evidence
// and node_agent_status, with superseded rows unmerged.
func TestKeyReadsMatchFinal(t *testing.T) {
	fx := newFixture(t, api.Options{})
	seedNodes(t, fx.db)
	churn(t, fx)
	ctx := context.Background()

	for _, c := range []struct {
		q     url.Values
		where string
	}{
		{url.Values{"limit": {"333"}}, "status = 'open'"},
		{url.Values{"limit": {"100"}, "owning_domain": {"churn-1"}}, "status = 'open' AND owning_domain = 'churn-1'"},
		{url.Values{"limit": {"1000"}, "owning_domain": {"churn-9"}}, "status = 'open' AND owning_domain = 'churn-9'"},
		{url.Values{"limit": {"500"}, "status": {"resolved"}}, "status = 'resolved'"},
		{url.Values{"limit": {"4000"}, "status": {"all"}}, "1"},
	} {
		got, err := fx.client.DriftAll(ctx, c.q)
		if err != nil {
			t.Fatal(err)
		}
		want := testenv.Strings(t, fx.db, "SELECT evidence_id FROM drift_evidence FINAL WHERE "+c.where+" ORDER BY evidence_id")
		if len(want) == 0 || !slices.Equal(ids(got), want) {
			t.Errorf("%v: %d findings paged, %d with FINAL", c.q, len(got), len(want))
		}
	}

	att, err := fx.client.Attention(ctx, url.Values{"n": {"100"}, "kind": {"finding"}})
	if err != nil {
		t.Fatal(err)
	}
	want := testenv.Strings(t, fx.db, `SELECT evidence_id FROM drift_evidence FINAL WHERE status = 'open'
		ORDER BY attention_score DESC, evidence_id LIMIT 100`)
	if got := attentionIDs(att); !slices.Equal(got, want) {
		t.Errorf("attention findings:\n got %v\nwant %v", got, want)
	}

	for _, c := range []struct {
		q     url.Values
		where string
	}{
		{url.Values{"n": {"50"}, "kind": {"node"}}, "gate != 'pass'"},
		{url.Values{"n": {"1000"}, "kind": {"node"}}, "gate != 'pass'"},
		{url.Values{"n": {"10"}, "gate": {"warning"}}, "gate = 'warning'"},
		{url.Values{"n": {"5"}, "kind": {"node"}, "owning_domain": {"compute,edge"}}, "gate != 'pass' AND owning_domain IN ('compute', 'edge')"},
	} {
		att, err := fx.client.Attention(ctx, c.q)
		if err != nil {
			t.Fatal(err)
		}
		want := testenv.Strings(t, fx.db, "SELECT node_id FROM node_agent_status FINAL WHERE "+c.where+
			" ORDER BY attention_score DESC, node_id LIMIT "+c.q.Get("n"))
		if got := attentionIDs(att); len(want) == 0 || !slices.Equal(got, want) {
			t.Errorf("attention %v:\n got %v\nwant %v", c.q, got, want)
		}
	}

	// A finding written twice with one version shows its later write.
	d, err := fx.client.DriftDetail(ctx, "churn:maas/n7")
	if err != nil {
		t.Fatal(err)
	}
	if d.Finding.OwningDomain != "churn-9" || d.Finding.UpdatedAt == nil || !d.Finding.UpdatedAt.Equal(time.Unix(1795000200, 0)) {
		t.Errorf("detail of a replayed version: domain %s updated_at %v", d.Finding.OwningDomain, d.Finding.UpdatedAt)
	}
}

// TestSortedPagesMatchFinal checks the ranked reads without FINAL (drift
// pages in an order other than evidence_id, node pages in every order,
// the attention queue under a filter its summaries cannot answer),
// followed page by page through their cursors, and a node's findings,
// against FINAL, with
// superseded rows unmerged that rank ahead of the current ones, ties over
// many pages, and a score that is not a number (ranked as 0, as shown).
func TestSortedPagesMatchFinal(t *testing.T) {
	fx := newFixture(t, api.Options{})
	seedNodes(t, fx.db)
	churn(t, fx)
	ctx := context.Background()
	findings := `INSERT INTO drift_evidence (evidence_id, owning_domain, classification, severity, status, posture,
		first_seen_at, last_seen_at, attention_score, version, updated_at)
		SELECT concat('sort:maas/n', toString(number)), concat('sort-', toString(number % 3)), 'orphan_provider_resource',
			%s, %s, 'quarantine', toDateTime(1795000000 + number % 17), toDateTime(%s), %s, %s, toDateTime(1795000000)
		FROM numbers(3000) WHERE %s`
	nodes := `INSERT INTO node_agent_status (node_id, owning_domain, domain_id, gate, connectivity_mode, health,
		last_seen_at, attention_score, version, updated_at)
		SELECT concat('churn-', toString(number)), 'churn', 'd-churn', %s, 'LIVE', 'OK', toDateTime(%s), %s, 3, toDateTime(1795000000)
		FROM numbers(3000) WHERE %s`
	for _, stmt := range []string{
		fmtSQL(findings, "'warning'", "'open'", "1795000000 + number % 23", "toFloat64(3000 - number % 200)", "1", "1"),
		// Newer versions: later, lower, some resolved, one whose score is
		// not a number.
		fmtSQL(findings, "if(number % 4 = 0, 'critical', 'warning')", "if(number % 5 = 0, 'resolved', 'open')",
			"1795001000 + number % 29", "if(number = 7, nan, toFloat64(number % 300))", "2", "number % 2 = 0"),
		fmtSQL(nodes, "if(number % 2 = 0, 'block_production', 'warning')", "1795000000 + number % 31",
			"toFloat64(number % 700)", "number % 3 = 0"),
	} {
		if err := fx.db.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}

	order := func(sort string) string {
		switch sort {
		case "attention_score":
			return "if(isFinite(attention_score), attention_score, 0) DESC"
		case "last_seen_at_desc":
			return "last_seen_at DESC"
		}
		return sort
	}
	for _, c := range []struct {
		q           url.Values
		where, sort string
	}{
		{url.Values{"sort": {"attention_score"}}, "status = 'open'", "attention_score"},
		{url.Values{"sort": {"attention_score"}, "owning_domain": {"sort-1"}}, "status = 'open' AND owning_domain = 'sort-1'", "attention_score"},
		{url.Values{"sort": {"attention_score"}, "status": {"all"}}, "1", "attention_score"},
		{url.Values{"sort": {"first_seen_at"}, "severity": {"critical"}, "status": {"resolved"}}, "severity = 'critical' AND status = 'resolved'", "first_seen_at"},
		{url.Values{"sort": {"first_seen_at"}}, "status = 'open'", "first_seen_at"},
		{url.Values{"sort": {"last_seen_at"}, "owning_domain": {"churn-9,sort-2"}}, "status = 'open' AND owning_domain IN ('churn-9', 'sort-2')", "last_seen_at_desc"},
	} {
		c.q.Set("limit", "97")
		got, err := fx.client.DriftAll(ctx, c.q)
		if err != nil {
			t.Fatal(err)
		}
		want := testenv.Strings(t, fx.db, "SELECT evidence_id FROM drift_evidence FINAL WHERE "+c.where+" ORDER BY "+order(c.sort)+", evidence_id")
		if len(want) <= 97 || !slices.Equal(ids(got), want) {
			t.Errorf("drift %v: %d findings paged, %d with FINAL", c.q, len(got), len(want))
		}
	}

	nodeIDs := func(ns []apitypes.Node) []string {
		out := make([]string, len(ns))
		for i, n := range ns {
			out[i] = n.NodeID
		}
		return out
	}
	for _, c := range []struct {
		q           url.Values
		where, sort string
	}{
		{url.Values{}, "1", "node_id"},
		{url.Values{"gate": {"block_production"}}, "gate = 'block_production'", "node_id"},
		{url.Values{"sort": {"attention_score"}}, "1", "attention_score"},
		{url.Values{"sort": {"attention_score"}, "gate": {"warning,pass"}}, "gate IN ('warning', 'pass')", "attention_score"},
		{url.Values{"sort": {"last_seen_at"}}, "1", "last_seen_at"},
		{url.Values{"sort": {"last_seen_at"}, "gate": {"block_production"}}, "gate = 'block_production'", "last_seen_at"},
	} {
		c.q.Set("limit", "89")
		got, err := fx.client.NodesAll(ctx, c.q)
		if err != nil {
			t.Fatal(err)
		}
		want := testenv.Strings(t, fx.db, "SELECT node_id FROM node_agent_status FINAL WHERE "+c.where+" ORDER BY "+order(c.sort)+", node_id")
		if len(want) <= 89 || !slices.Equal(nodeIDs(got), want) {
			t.Errorf("nodes %v: %d nodes paged, %d with FINAL", c.q, len(got), len(want))
		}
	}

	// A node's findings are read by their evidence ids (classification and
	// identity key): several classes, versions resolving some.
	perClass := `INSERT INTO drift_evidence (evidence_id, provider, provider_id, classification, severity, status, posture,
		first_seen_at, last_seen_at, attention_score, version, updated_at)
		SELECT concat(%s, ':maas/x', toString(number % 40)), 'maas', concat('x', toString(number % 40)), %s, 'warning', %s,
			'quarantine', toDateTime(1795000000), toDateTime(1795000000), 100, %s, toDateTime(1795000000)
		FROM numbers(40) WHERE %s`
	for _, stmt := range []string{
		fmtSQL(perClass, "'missing_provider_resource'", "'missing_provider_resource'", "'open'", "1", "1"),
		fmtSQL(perClass, "'stale_lifecycle_state'", "'stale_lifecycle_state'", "'open'", "1", "number % 2 = 0"),
		fmtSQL(perClass, "'missing_provider_resource'", "'missing_provider_resource'", "'resolved'", "2", "number % 3 = 0"),
		fmtSQL(perClass, "'identity_mismatch'", "'identity_mismatch'", "'resolved'", "1", "number % 5 = 0"),
	} {
		if err := fx.db.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 40 {
		id := fmt.Sprintf("x%d", i)
		d, err := fx.client.Node(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range d.Findings {
			got = append(got, f.Finding.EvidenceID)
		}
		want := testenv.Strings(t, fx.db, "SELECT evidence_id FROM drift_evidence FINAL WHERE provider = 'maas' AND provider_id = '"+id+
			"' ORDER BY status = 'open' DESC, evidence_id")
		if len(want) == 0 || !slices.Equal(got, want) {
			t.Errorf("node %s: findings %v, with FINAL %v", id, got, want)
		}
	}

	// A bundle of nodes, findings and a domain's correlation id, read
	// without FINAL.
	rd := reader.New(fx.db, reader.Options{})
	bundle, err := rd.BundleFindings(ctx, reader.BundleSelection{NodeIDs: []string{"x1", "x2", "x3", "x30"},
		EvidenceIDs: []string{"churn:maas/n7", "sort:maas/n8"}}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	want := testenv.Strings(t, fx.db, `SELECT evidence_id FROM drift_evidence FINAL WHERE (provider = 'maas' AND provider_id IN ('x1', 'x2', 'x3', 'x30'))
		OR evidence_id IN ('churn:maas/n7', 'sort:maas/n8') ORDER BY evidence_id`)
	if len(want) < 6 || !slices.Equal(ids(bundle), want) {
		t.Errorf("bundle: %v, with FINAL %v", ids(bundle), want)
	}

	att, err := fx.client.Attention(ctx, url.Values{"n": {"300"}, "severity": {"warning"}})
	if err != nil {
		t.Fatal(err)
	}
	want = testenv.Strings(t, fx.db, `SELECT evidence_id FROM drift_evidence FINAL WHERE status = 'open' AND severity = 'warning'
		AND attention_score > 0 ORDER BY attention_score DESC, evidence_id LIMIT 300`)
	if got := attentionIDs(att); len(want) < 300 || !slices.Equal(got, want) {
		t.Errorf("attention of warnings:\n got %v\nwant %v", got, want)
	}
}
