package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/api"
	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/api/client"
	"github.com/driftline/driftline/pipeline/readmodel/sink"
	"github.com/driftline/driftline/pipeline/service"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// t0 is the server's wall clock in these tests.
var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func openDB(t *testing.T) driver.Conn {
	t.Helper()
	conn, _ := testenv.ClickHouseConn(t)
	return conn
}

// row is one drift_evidence row version; zero times stay the zero DateTime.
type row struct {
	id, family, product, domain, domainID, provider, providerID string
	observedState                                               string
	observedAt                                                  time.Time
	class, severity, status, posture                            string
	first, last, resolved, next                                 time.Time
	retries                                                     uint32
	version                                                     uint64
}

func epoch(t time.Time) time.Time {
	if t.IsZero() {
		return time.Unix(0, 0).UTC()
	}
	return t
}

// insertEvidence writes each row in its own INSERT, so superseded versions
// sit in separate parts and only FINAL hides them.
func insertEvidence(t *testing.T, db driver.Conn, rows ...row) {
	t.Helper()
	ctx := context.Background()
	for _, r := range rows {
		b, err := db.PrepareBatch(ctx, `INSERT INTO drift_evidence (evidence_id, correlation_id,
			resource_family, product_id, owning_domain, owning_package, domain_id, record_type,
			record_id, expected_state, expected_version, provider, provider_id, observed_state,
			observed_version, observed_at, classification, severity, status, first_seen_at,
			last_seen_at, resolved_at, retry_count, posture, next_attempt_at, runbook,
			attention_score, version, updated_at)`)
		if err != nil {
			t.Fatalf("prepare: %v", err)
		}
		err = b.Append(r.id, "corr-"+r.providerID, r.family, r.product, r.domain, "pkg-"+r.domain, r.domainID,
			"resource", "rec-"+r.providerID, "running", "v1", r.provider, r.providerID, r.observedState,
			"v1", epoch(r.observedAt), r.class, r.severity, r.status, r.first,
			r.last, epoch(r.resolved), r.retries, r.posture, epoch(r.next), "runbooks/"+r.class+".md",
			float64(r.version), r.version, r.last)
		if err != nil {
			t.Fatalf("append %s: %v", r.id, err)
		}
		if err := b.Send(); err != nil {
			t.Fatalf("insert %s: %v", r.id, err)
		}
	}
}

// insert writes one row in its own INSERT (a part of its own).
func insert(t *testing.T, db driver.Conn, sql string, values ...any) {
	t.Helper()
	testenv.Insert(t, db, sql, values)
}

const (
	idMissing  = "missing_provider_resource:maas/n1"
	idStaleRes = "stale_lifecycle_state:app_runtime/a1"
	idOrphan   = "orphan_provider_resource:storage_provider/s1"
	idIdentity = "identity_mismatch:maas/n2"
	idQuota    = "quota_or_capacity_mismatch:app_runtime/a2"
	idStale    = "stale_lifecycle_state:maas/n3"
)

// seed writes six findings, three of them with superseded versions, their
// history and consumer progress.
func seed(t *testing.T, db driver.Conn) {
	t.Helper()
	h := func(d time.Duration) time.Time { return t0.Add(-d) }
	insertEvidence(t, db,
		// Open, then updated: still open, retry_count 1, never observed.
		row{idMissing, "gpuaas_allocation", "gpu", "compute", "d-eu1", "maas", "n1", "", time.Time{},
			"missing_provider_resource", "critical", "open", "block_admission", h(2 * time.Hour), h(2 * time.Hour), time.Time{}, time.Time{}, 0, 1},
		row{idMissing, "gpuaas_allocation", "gpu", "compute", "d-eu1", "maas", "n1", "", time.Time{},
			"missing_provider_resource", "critical", "open", "block_admission", h(2 * time.Hour), h(90 * time.Minute), time.Time{}, time.Time{}, 1, 2},
		// Open with a retry, then resolved: the open version must not show.
		row{idStaleRes, "app_runtime", "apps", "apps", "d-eu1", "app_runtime", "a1", "starting", h(3 * time.Hour),
			"stale_lifecycle_state", "warning", "open", "retry", h(3 * time.Hour), h(3 * time.Hour), time.Time{}, h(3*time.Hour - time.Minute), 0, 1},
		row{idStaleRes, "app_runtime", "apps", "apps", "d-eu1", "app_runtime", "a1", "running", h(170 * time.Minute),
			"stale_lifecycle_state", "warning", "resolved", "retry", h(3 * time.Hour), h(170 * time.Minute), h(170 * time.Minute), time.Time{}, 0, 2},
		row{idOrphan, "storage", "blob", "storage", "d-us1", "storage_provider", "s1", "attached", h(10 * time.Minute),
			"orphan_provider_resource", "warning", "open", "quarantine", h(10 * time.Minute), h(10 * time.Minute), time.Time{}, time.Time{}, 0, 1},
		// Resolved, then reopened: open.
		row{idIdentity, "gpuaas_allocation", "gpu", "compute", "d-eu1", "maas", "n2", "running", h(4 * time.Hour),
			"identity_mismatch", "critical", "resolved", "quarantine", h(5 * time.Hour), h(4 * time.Hour), h(4 * time.Hour), time.Time{}, 0, 3},
		row{idIdentity, "gpuaas_allocation", "gpu", "compute", "d-eu1", "maas", "n2", "running", h(time.Hour),
			"identity_mismatch", "critical", "open", "quarantine", h(5 * time.Hour), h(time.Hour), time.Time{}, time.Time{}, 0, 4},
		row{idQuota, "app_runtime", "apps", "apps", "d-us1", "app_runtime", "a2", "running", h(30 * time.Minute),
			"quota_or_capacity_mismatch", "critical", "open", "block_admission", h(30 * time.Minute), h(30 * time.Minute), time.Time{}, time.Time{}, 0, 1},
		row{idStale, "gpuaas_allocation", "gpu", "compute", "d-us1", "maas", "n3", "provisioning", h(5 * time.Minute),
			"stale_lifecycle_state", "warning", "open", "retry", h(5 * time.Minute), h(5 * time.Minute), time.Time{}, t0.Add(time.Minute), 2, 1},
	)
	for _, hr := range []uint64{1, 2, 1} { // the repeated version 1 is a replay
		transition := map[uint64]string{1: "opened", 2: "updated"}[hr]
		insert(t, db, `INSERT INTO drift_history (evidence_id, version, transition, classification, severity,
			status, posture, expected_state, observed_state, observed_version, retry_count, at, correlation_id)`,
			idMissing, hr, transition, "missing_provider_resource", "critical", "open", "block_admission",
			"running", "", "", uint32(hr-1), t0.Add(-2*time.Hour+time.Duration(hr)*time.Minute), "corr-n1")
	}
	progress := func(consumer string, partition uint32, watermark, updated time.Time, events, open, version uint64) {
		insert(t, db, `INSERT INTO consumer_progress (consumer, partition, watermark, events, findings_open, updated_at, version)`,
			consumer, partition, epoch(watermark), events, open, updated, version)
	}
	progress("joiner", 0, h(10*time.Minute), h(time.Minute), 50, 1, 1) // superseded
	progress("joiner", 0, h(time.Minute), h(5*time.Second), 100, 2, 2)
	progress("joiner", 1, h(30*time.Second), h(10*time.Second), 40, 3, 1)
	progress("joiner", 2, time.Time{}, h(20*time.Second), 0, 0, 1) // idle partition
	progress("rater", 0, h(2*time.Minute), h(3*time.Second), 7, 0, 1)
	// The summaries the joiner would keep for these findings.
	if err := sink.RebuildSummaries(context.Background(), db, 2); err != nil {
		t.Fatal(err)
	}
}

type fixture struct {
	db     driver.Conn
	url    string
	client *client.Client
}

func newFixture(t *testing.T, opts api.Options) *fixture {
	t.Helper()
	db := openDB(t)
	seed(t, db)
	opts.DB = db
	opts.Now = func() time.Time { return t0 }
	if opts.Guard == nil {
		opts.Guard = testenv.LocalGuard(t)
	}
	srv, err := api.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close) // before the database closes: the audit log's last batch
	mux := http.NewServeMux()
	mux.Handle("/", srv.Handler())
	mux.HandleFunc("GET /test/signin", signInPage)
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return &fixture{db: db, url: hs.URL, client: &client.Client{BaseURL: hs.URL, APIKey: service.DefaultLocalAPIKey}}
}

func ids(fs []apitypes.Finding) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.EvidenceID
	}
	return out
}

// idChecker returns a check that lists a query through list and compares
// the ids of the page, in order, with want; more, if not nil, checks the
// rest of the page.
func idChecker[P any](t *testing.T, list func(context.Context, url.Values) (*P, error), ids func(*P) []string,
	more func(q string, p *P, want []string)) func(q string, want ...string) {
	return func(q string, want ...string) {
		t.Helper()
		v, err := url.ParseQuery(q)
		if err != nil {
			t.Fatal(err)
		}
		p, err := list(context.Background(), v)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if got := ids(p); !slices.Equal(got, want) {
			t.Errorf("%s:\n got %v\nwant %v", q, got, want)
		}
		if more != nil {
			more(q, p, want)
		}
	}
}

func sorted(s ...string) []string {
	slices.Sort(s)
	return s
}

func TestDriftList(t *testing.T) {
	fx := newFixture(t, api.Options{})
	ctx := context.Background()
	list := idChecker(t, fx.client.Drift, func(p *apitypes.DriftPage) []string { return ids(p.Findings) },
		func(q string, p *apitypes.DriftPage, _ []string) {
			if p.Count != len(p.Findings) || p.NextCursor != "" {
				t.Errorf("%s: count %d next_cursor %q", q, p.Count, p.NextCursor)
			}
		})
	// The page is in evidence_id order.
	check := func(q string, want ...string) {
		t.Helper()
		list(q, sorted(want...)...)
	}
	open := []string{idMissing, idOrphan, idIdentity, idQuota, idStale}
	check("", open...)
	check("status=open", open...)
	check("status=resolved", idStaleRes)
	check("status=all", append(open, idStaleRes)...)
	check("severity=critical", idMissing, idIdentity, idQuota)
	check("severity=warning&status=all", idOrphan, idStale, idStaleRes)
	check("classification=stale_lifecycle_state,identity_mismatch", idIdentity, idStale)
	check("classification=stale_lifecycle_state&classification=identity_mismatch", idIdentity, idStale)
	check("owning_domain=compute", idMissing, idIdentity, idStale)
	check("domain_id=d-us1", idOrphan, idQuota, idStale)
	check("product=apps&status=all", idQuota, idStaleRes)
	check("product_id=blob", idOrphan)
	check("resource_family=gpuaas_allocation&severity=critical", idMissing, idIdentity)
	check("provider=app_runtime", idQuota)
	check("provider=gateway")
	check("age=1h", idMissing, idIdentity)
	check("age=30m", idMissing, idIdentity, idQuota) // first_seen exactly now-30m counts
	check("age=1h&status=all", idMissing, idIdentity, idStaleRes)

	// Current rows, not superseded ones.
	p, err := fx.client.Drift(ctx, url.Values{"provider": {"maas"}, "owning_domain": {"compute"}, "severity": {"critical"}})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]apitypes.Finding{}
	for _, f := range p.Findings {
		byID[f.EvidenceID] = f
	}
	m := byID[idMissing]
	if m.Version != 2 || m.RetryCount != 1 || !m.LastSeenAt.Equal(t0.Add(-90*time.Minute)) {
		t.Errorf("missing finding is not its current version: %+v", m)
	}
	if m.ObservedAt != nil || m.ResolvedAt != nil || m.NextAttemptAt != nil {
		t.Errorf("zero times must be null: %+v", m)
	}
	if m.Posture != "block_admission" || m.Runbook != "runbooks/missing_provider_resource.md" || m.DomainID != "d-eu1" {
		t.Errorf("missing finding fields: %+v", m)
	}
	if id := byID[idIdentity]; id.Status != "open" || id.Version != 4 || id.ResolvedAt != nil {
		t.Errorf("reopened finding: %+v", id)
	}
}

func TestDriftJSONShape(t *testing.T) {
	fx := newFixture(t, api.Options{})
	body := testenv.GetJSON(t, fx.url+"/v1/drift?status=all&classification=stale_lifecycle_state", 200)
	var page struct {
		Findings []map[string]any `json:"findings"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Findings) != 2 {
		t.Fatalf("findings: %s", body)
	}
	res, open := page.Findings[0], page.Findings[1] // app_runtime/a1 sorts before maas/n3
	if res["evidence_id"] != idStaleRes || open["evidence_id"] != idStale {
		t.Fatalf("order: %s", body)
	}
	for k, want := range map[string]any{
		"status":          "resolved",
		"resolved_at":     "2026-11-21T09:10:00Z",
		"first_seen_at":   "2026-11-21T09:00:00Z",
		"next_attempt_at": nil,
	} {
		if res[k] != want {
			t.Errorf("%s = %#v, want %#v", k, res[k], want)
		}
	}
	if open["next_attempt_at"] != "2026-11-21T12:01:00Z" || open["resolved_at"] != nil || open["retry_count"] != 2.0 {
		t.Errorf("open stale finding: %v", open)
	}
	for _, k := range []string{"evidence_id", "correlation_id", "resource_family", "product_id", "owning_domain",
		"owning_package", "domain_id", "record_type", "record_id", "expected_state", "expected_version",
		"provider", "provider_id", "observed_state", "observed_version", "observed_at", "classification",
		"severity", "status", "first_seen_at", "last_seen_at", "resolved_at", "retry_count", "posture",
		"next_attempt_at", "runbook", "attention_score"} {
		if _, ok := open[k]; !ok {
			t.Errorf("field %s missing", k)
		}
	}
}

func TestDriftPagination(t *testing.T) {
	fx := newFixture(t, api.Options{})
	ctx := context.Background()
	q := url.Values{"status": {"all"}, "limit": {"2"}}
	var got []string
	pages := 0
	for {
		p, err := fx.client.Drift(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if p.Count > 2 {
			t.Fatalf("page of %d", p.Count)
		}
		got = append(got, ids(p.Findings)...)
		if p.NextCursor == "" {
			break
		}
		q.Set("cursor", p.NextCursor)
	}
	want := sorted(idMissing, idStaleRes, idOrphan, idIdentity, idQuota, idStale)
	if !slices.Equal(got, want) || pages != 3 {
		t.Errorf("%d pages %v, want 3 pages %v", pages, got, want)
	}
	all, err := fx.client.DriftAll(ctx, url.Values{"severity": {"critical"}, "limit": {"1"}})
	if err != nil || !slices.Equal(ids(all), sorted(idMissing, idIdentity, idQuota)) {
		t.Errorf("DriftAll: %v %v", ids(all), err)
	}
}

func TestBadParameters(t *testing.T) {
	fx := newFixture(t, api.Options{})
	for _, tc := range []struct {
		path, param, allowed string
	}{
		{"/v1/drift?severity=bogus", "severity", "critical"},
		{"/v1/drift?severity=critical,", "severity", ""},
		{"/v1/drift?classification=orphan", "classification", "orphan_provider_resource"},
		{"/v1/drift?resource_family=vm", "resource_family", "gpuaas_allocation"},
		{"/v1/drift?provider=aws", "provider", "maas"},
		{"/v1/drift?status=closed", "status", "resolved"},
		{"/v1/drift?status=", "status", "open"},
		{"/v1/drift?age=abc", "age", ""},
		{"/v1/drift?age=-5m", "age", ""},
		{"/v1/drift?limit=0", "limit", ""},
		{"/v1/drift?limit=10001", "limit", ""},
		{"/v1/drift?limit=ten", "limit", ""},
		{"/v1/drift?cursor=garbage!", "cursor", ""},
		{"/v1/drift?cursor=" + url.QueryEscape("bm90LWEtY3Vyc29y"), "cursor", ""},
		{"/v1/drift?sevrity=critical", "sevrity", "severity"},
		{"/v1/heatmap?limit=5", "limit", "status"},
		{"/v1/heatmap?severity=high", "severity", "warning"},
		{"/v1/status?verbose=1", "verbose", ""},
	} {
		body := testenv.GetJSON(t, fx.url+tc.path, http.StatusBadRequest)
		var eb apitypes.ErrorBody
		if err := json.Unmarshal(body, &eb); err != nil {
			t.Fatalf("%s: %v", tc.path, err)
		}
		if eb.Parameter != tc.param || !strings.Contains(eb.Error, tc.param) {
			t.Errorf("%s: %s", tc.path, body)
		}
		if tc.allowed != "" && !slices.Contains(eb.Allowed, tc.allowed) {
			t.Errorf("%s: allowed %v lacks %s", tc.path, eb.Allowed, tc.allowed)
		}
	}
	var ae *client.APIError
	_, err := fx.client.Drift(context.Background(), url.Values{"severity": {"bogus"}})
	if !errors.As(err, &ae) || ae.StatusCode != 400 || ae.Body.Parameter != "severity" {
		t.Errorf("client error: %v", err)
	}
}

func TestDriftDetail(t *testing.T) {
	fx := newFixture(t, api.Options{})
	ctx := context.Background()
	d, err := fx.client.DriftDetail(ctx, idMissing)
	if err != nil {
		t.Fatal(err)
	}
	if d.Finding.EvidenceID != idMissing || d.Finding.Version != 2 {
		t.Errorf("finding: %+v", d.Finding)
	}
	if len(d.History) != 2 || d.History[0].Version != 1 || d.History[0].Transition != "opened" ||
		d.History[1].Version != 2 || d.History[1].Transition != "updated" {
		t.Errorf("history: %+v", d.History)
	}
	if !d.History[0].At.Equal(t0.Add(-2*time.Hour + time.Minute)) {
		t.Errorf("history time %v", d.History[0].At)
	}
	if !d.Action.Required || d.Action.Posture != "block_admission" || d.Action.Runbook == "" || d.Action.Summary == "" {
		t.Errorf("action: %+v", d.Action)
	}

	// The id unescaped in the path works as well.
	body := testenv.GetJSON(t, fx.url+"/v1/drift/"+idStale, 200)
	var dd apitypes.DriftDetail
	if err := json.Unmarshal(body, &dd); err != nil {
		t.Fatal(err)
	}
	if dd.Finding.EvidenceID != idStale || dd.Action.Posture != "retry" || dd.Action.NextAttemptAt == nil || len(dd.History) != 0 {
		t.Errorf("unescaped detail: %s", body)
	}

	r, err := fx.client.DriftDetail(ctx, idStaleRes)
	if err != nil || r.Action.Required || r.Finding.ResolvedAt == nil {
		t.Errorf("resolved detail: %+v %v", r, err)
	}

	_, err = fx.client.DriftDetail(ctx, "missing_provider_resource:maas/nope")
	if !errors.Is(err, client.ErrNotFound) {
		t.Errorf("unknown id: %v", err)
	}
	testenv.GetJSON(t, fx.url+"/v1/nothing", 404)
}

func TestHeatmap(t *testing.T) {
	fx := newFixture(t, api.Options{})
	ctx := context.Background()
	h, err := fx.client.Heatmap(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if h.Status != "open" || !slices.Equal(h.Domains, []string{"apps", "compute", "storage"}) ||
		!slices.Equal(h.Classifications, apitypes.Classifications) {
		t.Errorf("axes: %+v", h)
	}
	want := []apitypes.HeatCell{
		{OwningDomain: "apps", Classification: "quota_or_capacity_mismatch", Count: 1, Critical: 1, MaxSeverity: "critical"},
		{OwningDomain: "compute", Classification: "missing_provider_resource", Count: 1, Critical: 1, MaxSeverity: "critical"},
		{OwningDomain: "compute", Classification: "stale_lifecycle_state", Count: 1, Critical: 0, MaxSeverity: "warning"},
		{OwningDomain: "compute", Classification: "identity_mismatch", Count: 1, Critical: 1, MaxSeverity: "critical"},
		{OwningDomain: "storage", Classification: "orphan_provider_resource", Count: 1, Critical: 0, MaxSeverity: "warning"},
	}
	if !slices.Equal(h.Cells, want) {
		t.Errorf("cells:\n got %+v\nwant %+v", h.Cells, want)
	}
	h, err = fx.client.Heatmap(ctx, url.Values{"status": {"all"}, "owning_domain": {"apps"}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(h.Domains, []string{"apps"}) || len(h.Cells) != 2 || h.Cells[0].Classification != "stale_lifecycle_state" {
		t.Errorf("filtered heatmap: %+v", h)
	}
}

func TestStatus(t *testing.T) {
	fx := newFixture(t, api.Options{})
	st, err := fx.client.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	f := st.Findings
	if f.Open != 5 || f.Resolved != 1 || f.CriticalOpen != 3 || f.BlockedAdmissions != 2 {
		t.Errorf("counts: %+v", f)
	}
	if f.OpenByClassification["stale_lifecycle_state"] != 1 || f.OpenByClassification["billing_mismatch"] != 0 ||
		f.OpenBySeverity["warning"] != 2 || f.OpenByPosture["quarantine"] != 2 {
		t.Errorf("breakdown: %+v", f)
	}
	if _, ok := f.OpenByClassification["billing_mismatch"]; !ok {
		t.Errorf("known classifications must be present with 0")
	}
	if st.LastRun == nil || !st.LastRun.Equal(t0.Add(-3*time.Second)) {
		t.Errorf("last run %v", st.LastRun)
	}
	if len(st.Consumers) != 2 {
		t.Fatalf("consumers: %+v", st.Consumers)
	}
	j := st.Consumers[0]
	if j.Consumer != "joiner" || j.Partitions != 3 || j.Events != 140 || j.FindingsOpen != 5 ||
		!j.Watermark.Equal(t0.Add(-time.Minute)) || !j.MaxWatermark.Equal(t0.Add(-30*time.Second)) ||
		*j.WatermarkAgeSeconds != 60 || !j.UpdatedAt.Equal(t0.Add(-5*time.Second)) {
		t.Errorf("joiner: %+v", j)
	}
	if st.Watermark == nil || !st.Watermark.Equal(t0.Add(-2*time.Minute)) || *st.WatermarkAgeSeconds != 120 {
		t.Errorf("watermark %v age %v", st.Watermark, st.WatermarkAgeSeconds)
	}
	if st.Lag.State != apitypes.LagNotConfigured || st.Lag.Groups == nil {
		t.Errorf("lag: %+v", st.Lag)
	}
}

func TestStatusEmpty(t *testing.T) {
	hs := serveAPI(t, api.Options{Guard: testenv.LocalGuard(t), DB: openDB(t)})
	body := testenv.GetJSON(t, hs+"/v1/status", 200)
	for _, frag := range []string{`"last_run":null`, `"watermark":null`, `"consumers":[]`, `"open":0`} {
		if !strings.Contains(string(body), frag) {
			t.Errorf("status lacks %s: %s", frag, body)
		}
	}
	body = testenv.GetJSON(t, hs+"/v1/drift", 200)
	if !strings.Contains(string(body), `"findings":[]`) {
		t.Errorf("empty drift: %s", body)
	}
}

func TestStatusLag(t *testing.T) {
	brokers, names := testenv.Kafka(t, 2)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	for i := range 5 {
		r := &kgo.Record{Topic: names.Observations, Partition: 0, Value: []byte("x")}
		if i >= 3 {
			r.Partition = 1
		}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	adm := kadm.NewClient(cl)
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: names.Observations, Partition: 0, At: 1, LeaderEpoch: -1})
	offsets.Add(kadm.Offset{Topic: names.Observations, Partition: 1, At: 2, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, "driftline-joiner", offsets); err != nil {
		t.Fatal(err)
	}

	fx := newFixture(t, api.Options{Lag: adm, LagGroups: []string{"driftline-joiner", "never-started"}})
	var st *apitypes.Status
	testenv.CheckFor(t, 10*time.Second, func() error {
		st, err = fx.client.Status(ctx)
		if err != nil {
			return err
		}
		if len(st.Lag.Groups) != 2 || st.Lag.Groups[0].Total == nil || *st.Lag.Groups[0].Total != 2 {
			b, _ := json.Marshal(st.Lag)
			return errors.New("lag not yet 2: " + string(b))
		}
		return nil
	})
	if ns := st.Lag.Groups[1]; ns.Group != "never-started" || ns.Total != nil || ns.Error == "" ||
		st.Lag.State != apitypes.LagUnknown || !strings.Contains(st.Lag.Error, "never-started") {
		t.Errorf("group without commits: %+v", st.Lag)
	}
	g := st.Lag.Groups[0]
	if g.Group != "driftline-joiner" || len(g.Topics) != 1 || g.Topics[0].Topic != names.Observations || len(g.Topics[0].Partitions) != 2 ||
		g.Topics[0].Partitions[0].Lag != 2 || g.Topics[0].Partitions[0].End != 3 || g.Topics[0].Partitions[1].Lag != 0 {
		t.Errorf("lag: %+v", g)
	}
}

func TestStatusBrokerDown(t *testing.T) {
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	fx := newFixture(t, api.Options{Lag: kadm.NewClient(cl), LagTimeout: 300 * time.Millisecond})
	st, err := fx.client.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Lag.State != apitypes.LagUnknown || st.Lag.Error == "" || st.Findings.Open != 5 {
		t.Errorf("status with broker down: %+v", st)
	}
}

func TestHealthAndMetrics(t *testing.T) {
	fx := newFixture(t, api.Options{})
	testenv.GetJSON(t, fx.url+"/healthz", 200)
	testenv.GetJSON(t, fx.url+"/v1/drift", 200)
	testenv.GetJSON(t, fx.url+"/v1/drift?limit=0", 400)
	resp, err := testenv.Do(fx.url+"/metrics", testenv.LocalKey)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`driftline_query_requests_total{code="200",endpoint="drift"} 1`,
		`driftline_query_requests_total{code="400",endpoint="drift"} 1`,
		`driftline_query_requests_total{code="200",endpoint="healthz"} 1`,
		`driftline_query_request_duration_seconds_count{endpoint="drift"} 2`,
		`# TYPE driftline_query_clickhouse_errors_total counter`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func TestClickHouseDown(t *testing.T) {
	fx := newFixture(t, api.Options{})
	fx.db.Close()
	testenv.GetJSON(t, fx.url+"/healthz", 503)
	testenv.GetJSON(t, fx.url+"/v1/drift", 503)
}

func TestMissingTableHint(t *testing.T) {
	fx := newFixture(t, api.Options{})
	if err := fx.db.Exec(context.Background(), "DROP TABLE consumer_progress"); err != nil {
		t.Fatal(err)
	}
	body := testenv.GetJSON(t, fx.url+"/v1/status", 503)
	if !strings.Contains(string(body), "Possible solutions") {
		t.Errorf("no hint: %s", body)
	}
}

// uiKeys are the keys the UI test signs in with, by name.
var uiKeys = map[string]string{"admin": testenv.LocalKey, "viewer": keyViewer, "finance-t1": keyFinT1}

// signInPage does what a person does on the UI's sign-in form: it puts
// the key of ?as= in the tab's session storage. Headless Chromium cannot
// type, so the UI test opens this page: the UI's own index.html with that
// one script before it, under the UI's base URL, so the hash routes work
// without a navigation.
func signInPage(w http.ResponseWriter, r *http.Request) {
	key, ok := uiKeys[r.URL.Query().Get("as")]
	if !ok {
		http.Error(w, "unknown key name", http.StatusBadRequest)
		return
	}
	index, err := os.ReadFile(filepath.Join("web", "index.html"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	pre := fmt.Sprintf(`<head><base href="/ui/"><script>sessionStorage.setItem("driftline.apiKey", %q);</script>`, key)
	w.Header().Set("Content-Type", "text/html")
	_, _ = io.WriteString(w, strings.Replace(string(index), "<head>", pre, 1))
}
