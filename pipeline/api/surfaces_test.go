package api_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/api"
	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/api/client"
	"github.com/driftline/driftline/pipeline/api/export"
	"github.com/driftline/driftline/pipeline/readmodel/sink"
)

// nodeRow is one node_agent_status row version.
type nodeRow struct {
	id, domainID, domain, state, gate, mode, health string
	score                                           float64
	version                                         uint64
}

func insertNodes(t *testing.T, db driver.Conn, rows ...nodeRow) {
	t.Helper()
	for _, n := range rows {
		insert(t, db, `INSERT INTO node_agent_status (node_id, domain_id, owning_domain, node_agent_state,
			node_agent_reason, update_path, expected_agent_version, observed_agent_version, cert_issuer_fingerprint,
			ingress_trust_fingerprint, host_fingerprint, terminal_stream_probe, workload_impact, health, gate,
			connectivity_mode, rtt_ms, loss_pct, bandwidth_kbps, backlog_messages, seconds_behind, replay_required,
			last_seen_at, attention_score, version, updated_at)`,
			n.id, n.domainID, n.domain, n.state, "", "none", "1.4.2", "1.4."+fmt.Sprint(n.version), "sha256:ca", "sha256:ing",
			"host-"+n.id, "passed", "none_observed", n.health, n.gate, n.mode, 12.5, 0.0, 1000.0, int64(3), int64(40), uint8(0),
			t0.Add(-time.Minute), n.score, n.version, t0)
	}
	// The node tops the joiner would keep for these nodes.
	if err := sink.RebuildSummaries(context.Background(), db, 2); err != nil {
		t.Fatal(err)
	}
}

// seedNodes writes four nodes, one with a superseded version. n1..n3 are
// the maas nodes of seed's findings.
func seedNodes(t *testing.T, db driver.Conn) {
	insertNodes(t, db,
		nodeRow{"n1", "d-eu1", "compute", "healthy", "pass", "LIVE", "OK", 90, 1}, // superseded
		nodeRow{"n1", "d-eu1", "compute", "stale", "warning", "DELAYED", "DEGRADED", 50, 2},
		nodeRow{"n2", "d-eu1", "compute", "security_action_required", "block_production", "LIVE", "OK", 300, 1},
		nodeRow{"n3", "d-us1", "compute", "healthy", "pass", "LIVE", "OK", 500, 1},
		nodeRow{"e9", "d-us1", "edge", "recovering", "retry", "REPLAYING", "DEGRADED", 5, 1},
	)
}

type mismatch struct {
	id, kind, tenant, product, unit, rated, ledger, currency, status string
	first                                                            time.Time
	version                                                          uint64
}

func insertMismatches(t *testing.T, db driver.Conn, rows ...mismatch) {
	t.Helper()
	for _, m := range rows {
		insert(t, db, `INSERT INTO billing_mismatch (mismatch_id, kind, usage_id, metering_source, metering_id,
			tenant_id, product_id, unit_id, quantity, rated_amount, ledger_amount, currency, status,
			first_seen_at, last_seen_at, version, updated_at)`,
			m.id, m.kind, "u-"+m.id, "gw", "m-"+m.id, m.tenant, m.product, m.unit, "1.5", m.rated, m.ledger,
			m.currency, m.status, m.first, m.first, m.version, t0)
	}
}

// Amounts chosen so that float64 sums would be wrong: 0.1 + 0.2, and
// values beyond float64's 15-16 significant digits.
func seedBilling(t *testing.T, db driver.Conn) {
	day1 := time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC)
	day2 := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	insertMismatches(t, db,
		mismatch{"b1", "rated_not_ledgered", "t1", "gpu", "gpu_hour", "0.10", "", "EUR", "open", day1, 1},
		mismatch{"b2", "rated_not_ledgered", "t1", "gpu", "gpu_hour", "0.20", "", "EUR", "open", day2, 1},
		mismatch{"b3", "amount_mismatch", "t2", "apps", "req", "1234567890123.123456", "1234567890123.000001", "EUR", "open", day2, 1},
		mismatch{"b4", "usage_not_rated", "t2", "apps", "req", "", "", "", "open", day1, 1},
		mismatch{"b5", "rated_not_ledgered", "t1", "gpu", "gpu_hour", "99999999999999.99", "", "USD", "open", day2, 1},
		mismatch{"b6", "rated_not_ledgered", "t1", "gpu", "gpu_hour", "5.00", "", "EUR", "open", day1, 1},
		mismatch{"b6", "rated_not_ledgered", "t1", "gpu", "gpu_hour", "5.00", "5.00", "EUR", "resolved", day1, 2},
	)
}

func seedRated(t *testing.T, db driver.Conn) {
	rated := func(id, tenant, product, unit, qty, amount, currency string, day time.Time) {
		insert(t, db, `INSERT INTO rated_usage (usage_id, metering_source, metering_id, unit_id, unit_version,
			quantity, unit_price, amount, currency, tenant_id, product_id, rated_at, day)`,
			id, "gw", "m-"+id, unit, uint32(1), qty, "0.1", amount, currency, tenant, product, day, day)
	}
	d1 := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	d2 := d1.AddDate(0, 0, 1)
	rated("r1", "t1", "gpu", "gpu_hour", "1.5", "0.1", "EUR", d1)
	rated("r1", "t1", "gpu", "gpu_hour", "1.5", "0.1", "EUR", d1) // replay of the same usage_id
	rated("r2", "t1", "gpu", "gpu_hour", "2.25", "0.2", "EUR", d1)
	rated("r3", "t1", "gpu", "gpu_hour", "1", "0.3", "EUR", d2)
	rated("r4", "t2", "apps", "req", "1000", "2345678901234.000001", "EUR", d2) // 19 digits: beyond a float, within a decimal
}

func newSurfaceFixture(t *testing.T, opts api.Options) *fixture {
	fx := newFixture(t, opts)
	seedNodes(t, fx.db)
	seedBilling(t, fx.db)
	seedRated(t, fx.db)
	return fx
}

func decode[T any](t *testing.T, body []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("decode %T: %v: %s", v, err, body)
	}
	return v
}

func nodeIDs(ns []apitypes.Node) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.NodeID
	}
	return out
}

func TestNodes(t *testing.T) {
	fx := newSurfaceFixture(t, api.Options{})
	ctx := context.Background()
	check := idChecker(t, fx.client.Nodes, func(p *apitypes.NodePage) []string { return nodeIDs(p.Nodes) }, nil)
	check("", "e9", "n1", "n2", "n3")
	check("gate=pass", "n3") // n1's pass is superseded
	check("gate=warning,block_production", "n1", "n2")
	check("connectivity_mode=REPLAYING", "e9")
	check("owning_domain=compute&health=OK", "n2", "n3")
	check("sort=attention_score", "n3", "n2", "n1", "e9")
	check("sort=last_seen_at&domain_id=d-us1", "e9", "n3")

	// Pagination under a score order.
	all, err := fx.client.NodesAll(ctx, url.Values{"sort": {"attention_score"}, "limit": {"1"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := nodeIDs(all); !slices.Equal(got, []string{"n3", "n2", "n1", "e9"}) {
		t.Errorf("paged by score: %v", got)
	}
	p, err := fx.client.Nodes(ctx, url.Values{"node_id": {"n1"}})
	if err != nil || len(p.Nodes) != 1 {
		t.Fatal(p, err)
	}
	if n := p.Nodes[0]; n.Version != 2 || n.ObservedAgentVersion != "1.4.2" || n.ExpectedAgentVersion != "1.4.2" ||
		n.LastSeenAt == nil || n.BacklogMessages != 3 || n.RTTMs != 12.5 {
		t.Errorf("n1: %+v", n)
	}
}

func TestNodeDetail(t *testing.T) {
	fx := newSurfaceFixture(t, api.Options{})
	ctx := context.Background()
	d, err := fx.client.Node(ctx, "n2")
	if err != nil {
		t.Fatal(err)
	}
	if d.Node == nil || d.Node.Gate != "block_production" || !d.Gate.Blocking || d.Gate.Summary == "" {
		t.Errorf("gate: %+v %+v", d.Node, d.Gate)
	}
	if len(d.Findings) != 1 || d.Findings[0].Finding.EvidenceID != idIdentity || !d.Findings[0].Action.Required {
		t.Errorf("findings: %+v", d.Findings)
	}
	var fields []string
	for _, c := range d.Comparison {
		fields = append(fields, c.Field)
	}
	if !slices.Equal(fields, []string{"agent_version", "state", "version"}) {
		t.Errorf("comparison: %+v", d.Comparison)
	}
	// n1: agent version 1.4.2 expected, 1.4.2 observed; its missing
	// finding has two history entries.
	d, err = fx.client.Node(ctx, "n1")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Findings) != 1 || len(d.Findings[0].History) != 2 || !d.Comparison[0].Match {
		t.Errorf("n1: %+v", d)
	}
	if _, err := fx.client.Node(ctx, "nope"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("unknown node: %v", err)
	}
}

func TestConnectivity(t *testing.T) {
	fx := newSurfaceFixture(t, api.Options{})
	c, err := fx.client.Connectivity(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	count := func(ms []apitypes.ConnectivityCount, mode string) uint64 {
		for _, m := range ms {
			if m.Mode == mode {
				return m.Count
			}
		}
		t.Fatalf("mode %s absent", mode)
		return 0
	}
	if c.Total != 4 || count(c.Modes, "LIVE") != 2 || count(c.Modes, "DELAYED") != 1 || count(c.Modes, "REPLAYING") != 1 ||
		count(c.Modes, "AUTONOMOUS") != 0 || len(c.Modes) != 7 {
		t.Errorf("spectrum: %+v", c)
	}
	if len(c.Domains) != 2 || c.Domains[0].OwningDomain != "compute" || c.Domains[0].Total != 3 || count(c.Domains[1].Modes, "REPLAYING") != 1 {
		t.Errorf("domains: %+v", c.Domains)
	}
	c, err = fx.client.Connectivity(context.Background(), url.Values{"domain_id": {"d-us1"}})
	if err != nil || c.Total != 2 {
		t.Errorf("filtered: %+v %v", c, err)
	}
}

func TestAttention(t *testing.T) {
	fx := newSurfaceFixture(t, api.Options{})
	ctx := context.Background()
	// Seeded finding scores equal their version: missing 2, identity 4,
	// orphan/quota/stale 1. Nodes: n3 passes (never queued), n2 300, n1 50,
	// e9 5. The five open billing mismatches are critical findings of
	// billing_mismatch (1250 each), first in the global queue.
	a, err := fx.client.Attention(ctx, url.Values{"n": {"9"}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range a.Global {
		got = append(got, it.Kind+":"+it.ID)
	}
	want := []string{"finding:billing_mismatch:b1", "finding:billing_mismatch:b2", "finding:billing_mismatch:b3",
		"finding:billing_mismatch:b4", "finding:billing_mismatch:b5", "node:n2", "node:n1", "node:e9", "finding:" + idIdentity}
	if !slices.Equal(got, want) {
		t.Errorf("global: %v want %v", got, want)
	}
	if len(a.Global) != len(want) || a.Global[0].Finding == nil || a.Global[0].Finding.Classification != "billing_mismatch" ||
		a.Global[5].Node == nil || a.Global[8].Finding == nil || a.Domains != nil {
		t.Errorf("items: %+v", a)
	}
	a, err = fx.client.Attention(ctx, url.Values{"n": {"2"}, "by": {"domain"}, "kind": {"finding"}})
	if err != nil {
		t.Fatal(err)
	}
	byDom := map[string][]string{}
	for _, d := range a.Domains {
		for _, it := range d.Items {
			byDom[d.OwningDomain] = append(byDom[d.OwningDomain], it.ID)
		}
	}
	if !slices.Equal(byDom["compute"], []string{idIdentity, idMissing}) || len(byDom["apps"]) != 1 || len(byDom["storage"]) != 1 {
		t.Errorf("per domain: %v", byDom)
	}
	// A finding-only filter leaves nodes out; a node-only one findings.
	a, _ = fx.client.Attention(ctx, url.Values{"severity": {"critical"}})
	for _, it := range a.Global {
		if it.Kind != apitypes.KindFinding || it.Finding.Severity != "critical" {
			t.Errorf("severity filter: %+v", it)
		}
	}
	a, _ = fx.client.Attention(ctx, url.Values{"gate": {"retry"}})
	if len(a.Global) != 1 || a.Global[0].ID != "e9" {
		t.Errorf("gate filter: %+v", a.Global)
	}
}

func TestBillingMismatches(t *testing.T) {
	fx := newSurfaceFixture(t, api.Options{})
	ctx := context.Background()
	p, err := fx.client.BillingMismatches(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Count != 5 || p.Totals.Count != 5 {
		t.Fatalf("open mismatches: %d, totals %d", p.Count, p.Totals.Count)
	}
	want := []apitypes.MoneyTotal{
		{Currency: "", Count: 1, AmountAtRisk: "0", RatedAmount: "0", LedgerAmount: "0", Unpriced: 1},
		// 0.10 + 0.20 + |1234567890123.123456 - 1234567890123.000001|
		{Currency: "EUR", Count: 3, AmountAtRisk: "0.423455", RatedAmount: "1234567890123.423456", LedgerAmount: "1234567890123.000001"},
		{Currency: "USD", Count: 1, AmountAtRisk: "99999999999999.99", RatedAmount: "99999999999999.99", LedgerAmount: "0.00"},
	}
	if !slices.Equal(p.Totals.ByCurrency, want) {
		t.Errorf("by currency:\n got %+v\nwant %+v", p.Totals.ByCurrency, want)
	}
	byID := map[string]apitypes.BillingMismatch{}
	for _, m := range p.Mismatches {
		byID[m.MismatchID] = m
	}
	if byID["b3"].AmountAtRisk != "0.123455" || byID["b1"].AmountAtRisk != "0.10" || byID["b4"].AmountAtRisk != "" {
		t.Errorf("row at risk: %+v", byID)
	}
	check := idChecker(t, fx.client.BillingMismatches, func(p *apitypes.BillingPage) []string {
		var out []string
		for _, m := range p.Mismatches {
			out = append(out, m.MismatchID)
		}
		return out
	}, func(q string, p *apitypes.BillingPage, want []string) {
		if int(p.Totals.Count) != len(want) {
			t.Errorf("%s: totals %d want %d", q, p.Totals.Count, len(want))
		}
	})
	check("kind=rated_not_ledgered", "b1", "b2", "b5")
	check("tenant=t2", "b3", "b4")
	check("tenant_id=t2&kind=usage_not_rated", "b4")
	check("product=gpu&currency=USD", "b5")
	check("unit=req", "b3", "b4")
	check("status=resolved", "b6")
	check("status=all&day=2026-11-20", "b1", "b4", "b6")
	check("day=2026-11-21", "b2", "b3", "b5")
	check("age=20h", "b1", "b4") // t0 - 20h = 11-20 16:00
	check("sort=first_seen_at&limit=10", "b1", "b4", "b2", "b3", "b5")

	// Pages carry totals over the whole selection.
	p, err = fx.client.BillingMismatches(ctx, url.Values{"limit": {"2"}, "sort": {"first_seen_at"}})
	if err != nil || p.Count != 2 || p.NextCursor == "" || p.Totals.Count != 5 {
		t.Fatalf("page: %+v %v", p, err)
	}
	p, err = fx.client.BillingMismatches(ctx, url.Values{"limit": {"2"}, "sort": {"first_seen_at"}, "cursor": {p.NextCursor}})
	if err != nil || p.Count != 2 || p.Mismatches[0].MismatchID != "b2" {
		t.Fatalf("second page: %+v %v", p, err)
	}
}

func TestBillingCSV(t *testing.T) {
	fx := newSurfaceFixture(t, api.Options{})
	req, _ := http.NewRequest("GET", fx.url+"/v1/billing/mismatches?status=all", nil)
	req.Header.Set("Accept", "text/csv")
	req.Header.Set("Authorization", "Bearer "+testenv.LocalKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/csv") {
		t.Fatalf("content type %q", ct)
	}
	recs, err := csv.NewReader(resp.Body).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 7 || recs[0][0] != "mismatch_id" || recs[3][0] != "b3" || recs[3][12] != "0.123455" {
		t.Errorf("csv: %v", recs)
	}
}

func TestRatedTotals(t *testing.T) {
	fx := newSurfaceFixture(t, api.Options{})
	ctx := context.Background()
	r, err := fx.client.Rated(ctx, url.Values{"group_by": {"tenant"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []apitypes.RatedTotal{
		{TenantID: "t1", Currency: "EUR", Lines: 3, Quantity: "4.75", Amount: "0.6"},
		{TenantID: "t2", Currency: "EUR", Lines: 1, Quantity: "1000", Amount: "2345678901234.000001"},
	}
	if !slices.Equal(r.Totals, want) {
		t.Errorf("by tenant:\n got %+v\nwant %+v", r.Totals, want)
	}
	r, err = fx.client.Rated(ctx, url.Values{"tenant": {"t1"}, "group_by": {"unit,day"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Totals) != 2 || r.Totals[0].Day != "2026-11-20" || r.Totals[0].Amount != "0.3" || r.Totals[0].UnitID != "gpu_hour" ||
		r.Totals[1].Day != "2026-11-21" || r.Totals[1].Amount != "0.3" {
		t.Errorf("t1 by unit, day: %+v", r.Totals)
	}
	r, err = fx.client.Rated(ctx, url.Values{"day": {"2026-11-21"}, "group_by": {"product"}})
	if err != nil || len(r.Totals) != 2 || r.Totals[0].ProductID != "apps" {
		t.Errorf("day filter: %+v %v", r, err)
	}
	r, err = fx.client.Rated(ctx, url.Values{"from": {"2026-11-21"}, "to": {"2026-11-21"}, "group_by": {"tenant"}, "limit": {"1"}})
	if err != nil || len(r.Totals) != 1 || !r.Truncated {
		t.Errorf("range, limit: %+v %v", r, err)
	}
}

func TestSurfaceBadParameters(t *testing.T) {
	fx := newSurfaceFixture(t, api.Options{})
	for _, tc := range []struct{ path, param string }{
		{"/v1/nodes?gate=open", "gate"},
		{"/v1/nodes?connectivity_mode=live", "connectivity_mode"},
		{"/v1/nodes?sort=score", "sort"},
		{"/v1/nodes?colour=red", "colour"},
		{"/v1/nodes?sort=attention_score&cursor=" + url.QueryEscape("garbage"), "cursor"},
		{"/v1/attention?n=0", "n"},
		{"/v1/attention?by=region", "by"},
		{"/v1/attention?status=resolved", "status"},
		{"/v1/connectivity?connectivity_mode=LIVE", "connectivity_mode"},
		{"/v1/billing/mismatches?kind=bogus", "kind"},
		{"/v1/billing/mismatches?day=21-11-2026", "day"},
		{"/v1/billing/mismatches?format=xml", "format"},
		{"/v1/billing/rated?group_by=region", "group_by"},
		{"/v1/billing/rated?from=yesterday", "from"},
		{"/v1/bundle", "evidence_id"},
		{"/v1/bundle?format=zip&evidence_id=x", "format"},
		{"/v1/drift?sort=severity", "sort"},
		{"/v1/drift?wait_watermark=soon", "wait_watermark"},
		{"/v1/drift?wait_watermark=2026-11-21T00:00:00Z&wait_timeout=1h", "wait_timeout"},
	} {
		eb := decode[apitypes.ErrorBody](t, testenv.GetJSON(t, fx.url+tc.path, http.StatusBadRequest))
		if eb.Parameter != tc.param {
			t.Errorf("%s: %+v", tc.path, eb)
		}
	}
	// A cursor of one sort is refused under another.
	p, err := fx.client.Nodes(context.Background(), url.Values{"sort": {"attention_score"}, "limit": {"1"}})
	if err != nil {
		t.Fatal(err)
	}
	eb := decode[apitypes.ErrorBody](t, testenv.GetJSON(t, fx.url+"/v1/nodes?sort=last_seen_at&cursor="+p.NextCursor, 400))
	if !strings.Contains(eb.Error, "sort=attention_score") {
		t.Errorf("cursor of another sort: %+v", eb)
	}
}

// readArrowStream reads an Arrow IPC stream answer, returning the column
// values of name and the number of record batches.
func readArrowStream(t *testing.T, u string, name string) ([]string, int) {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	req.Header.Set("Accept", export.MediaArrowStream)
	req.Header.Set("Authorization", "Bearer "+testenv.LocalKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != export.MediaArrowStream {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s: %s", u, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	rd, err := ipc.NewReader(resp.Body, ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Release()
	var (
		vals    []string
		batches int
	)
	idx := rd.Schema().FieldIndices(name)
	if len(idx) != 1 {
		t.Fatalf("no column %s in %v", name, rd.Schema())
	}
	for rd.Next() {
		batches++
		col := rd.RecordBatch().Column(idx[0]).(*array.String)
		for i := range col.Len() {
			vals = append(vals, col.Value(i))
		}
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	return vals, batches
}

func TestArrowStream(t *testing.T) {
	fx := newSurfaceFixture(t, api.Options{})
	// Enough findings for several record batches, in one insert.
	const bulk = 20000
	rows := make([][]any, bulk)
	for i := range rows {
		rows[i] = []any{fmt.Sprintf("zz:bulk/%06d", i), "bulk", "orphan_provider_resource", "warning", "open", t0, t0, uint64(1)}
	}
	testenv.Insert(t, fx.db, `INSERT INTO drift_evidence (evidence_id, owning_domain,
		classification, severity, status, first_seen_at, last_seen_at, version)`, rows...)
	ids, batches := readArrowStream(t, fx.url+"/v1/drift?owning_domain=bulk", "evidence_id")
	if len(ids) != bulk || batches < 3 || ids[0] != "zz:bulk/000000" || !slices.IsSorted(ids) {
		t.Errorf("drift stream: %d rows in %d batches", len(ids), batches)
	}
	ids, _ = readArrowStream(t, fx.url+"/v1/drift?severity=critical", "evidence_id")
	if !slices.Equal(ids, sorted(idMissing, idIdentity, idQuota)) {
		t.Errorf("filtered stream: %v", ids)
	}
	ids, _ = readArrowStream(t, fx.url+"/v1/billing/mismatches?status=all", "amount_at_risk")
	if len(ids) != 6 || ids[2] != "0.123455" {
		t.Errorf("billing stream: %v", ids)
	}
	// JSON stays the default.
	testenv.GetJSON(t, fx.url+"/v1/drift?owning_domain=bulk&limit=1", 200)
}

func TestBundle(t *testing.T) {
	fx := newSurfaceFixture(t, api.Options{})
	get := func(q string) []byte {
		t.Helper()
		resp, err := testenv.Do(fx.url+"/v1/bundle?"+q, testenv.LocalKey)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("bundle %s: %d %s", q, resp.StatusCode, b)
		}
		if !strings.Contains(resp.Header.Get("Content-Disposition"), "evidence-bundle-") {
			t.Errorf("disposition %q", resp.Header.Get("Content-Disposition"))
		}
		return b
	}
	// Arrow file: the node's finding and another by correlation_id.
	raw := get("node_id=n1&correlation_id=corr-a2")
	fr, err := ipc.NewFileReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	defer fr.Close()
	rec, err := fr.RecordBatch(0)
	if err != nil {
		t.Fatal(err)
	}
	checkBundle(t, rec)

	// Parquet: the same content.
	raw = get("evidence_id=" + url.QueryEscape(idMissing) + "&evidence_id=" + url.QueryEscape(idQuota) + "&format=parquet")
	pf, err := file.NewParquetReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	ar, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := ar.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	tr := array.NewTableReader(tbl, -1)
	defer tr.Release()
	if !tr.Next() {
		t.Fatal("empty parquet")
	}
	checkBundle(t, tr.RecordBatch())

	resp, err := testenv.Do(fx.url+"/v1/bundle?correlation_id=nope", testenv.LocalKey)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("empty bundle: %d", resp.StatusCode)
	}
}

// checkBundle wants the missing finding of n1 (two history entries), then
// the quota finding of a2 (none).
func checkBundle(t *testing.T, rec arrow.RecordBatch) {
	t.Helper()
	if rec.NumRows() != 2 {
		t.Fatalf("bundle rows %d", rec.NumRows())
	}
	col := func(name string) arrow.Array {
		idx := rec.Schema().FieldIndices(name)
		if len(idx) != 1 {
			t.Fatalf("no column %s", name)
		}
		return rec.Column(idx[0])
	}
	ids := col("evidence_id").(*array.String)
	if ids.Value(0) != idMissing || ids.Value(1) != idQuota {
		t.Errorf("bundle ids %v", ids)
	}
	hist := col("history").(*array.List)
	s0, e0 := hist.ValueOffsets(0)
	s1, e1 := hist.ValueOffsets(1)
	if e0-s0 != 2 || e1-s1 != 0 {
		t.Errorf("history lengths %d %d", e0-s0, e1-s1)
	}
	tr := hist.ListValues().(*array.Struct).Field(1).(*array.String)
	if tr.Value(int(s0)) != "opened" || tr.Value(int(s0)+1) != "updated" {
		t.Errorf("history transitions %v", tr)
	}
	if a := col("recommended_action").(*array.String); !strings.Contains(a.Value(0), "Block admissions") {
		t.Errorf("action %q", a.Value(0))
	}
}

func TestWaitWatermark(t *testing.T) {
	reg := prometheus.NewRegistry()
	fx := newSurfaceFixture(t, api.Options{WaitConsumer: "joiner", WaitPartitions: 3, Registry: reg})
	// The joiner's lowest partition watermark: partition 2 never advanced
	// (epoch), so nothing past 1970 is reached yet.
	u := fx.url + "/v1/drift?severity=critical&wait_watermark=" + t0.Add(-2*time.Minute).Format(time.RFC3339) + "&wait_timeout=300ms"
	start := time.Now()
	eb := decode[apitypes.ErrorBody](t, testenv.GetJSON(t, u, http.StatusGatewayTimeout))
	if el := time.Since(start); el < 300*time.Millisecond || el > 5*time.Second {
		t.Errorf("wait took %v", el)
	}
	if !strings.Contains(eb.Error, "not reached") || eb.Parameter != "wait_watermark" {
		t.Errorf("timeout body: %+v", eb)
	}
	// Partition 2 catches up while a request waits.
	done := make(chan []byte)
	go func() {
		resp, err := testenv.Do(strings.Replace(u, "300ms", "10s", 1), testenv.LocalKey)
		if err != nil {
			done <- []byte(err.Error())
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		done <- append([]byte(fmt.Sprint(resp.StatusCode, " ")), b...)
	}()
	testenv.CheckFor(t, 10*time.Second, func() error {
		if n := gauge(t, reg, "driftline_query_watermark_waiting"); n != 1 {
			return fmt.Errorf("%v requests waiting, want 1", n)
		}
		return nil
	})
	insert(t, fx.db, `INSERT INTO consumer_progress (consumer, partition, watermark, events, findings_open, updated_at, version)`,
		"joiner", uint32(2), t0.Add(-90*time.Second), uint64(1), uint64(0), t0, uint64(2))
	if got := string(<-done); !strings.HasPrefix(got, "200 ") || !strings.Contains(got, idMissing) {
		t.Errorf("wait then answer: %s", got)
	}
	// Already reached: answers at once.
	testenv.GetJSON(t, fx.url+"/v1/status?wait_watermark="+t0.Add(-time.Hour).Format(time.RFC3339), 200)
}

// gauge reads the value of an unlabelled gauge from reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}
