package api_test

import (
	"context"
	"encoding/csv"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/driftline/driftline/internal/chserver"
	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/api"
	"github.com/driftline/driftline/pipeline/api/access"
	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/contract/keys"
	"github.com/driftline/driftline/pipeline/readmodel"
)

// The keys of the access tests, by what they hold.
const (
	keyViewer    = "k-viewer"
	keyFinance   = "k-finance"
	keyFinT1     = "k-finance-t1"
	keyFinNone   = "k-finance-t9"        // scoped to a tenant with no rows
	keyViewFinT1 = "k-viewer-finance-t1" // fleet reads, and billing reads scoped to t1
	keyOperator  = "k-operator"          // scoped to authority level LOCAL
	keyOpAll     = "k-operator-all"
	keyAuditor   = "k-auditor"
	keyRevoked   = "k-revoked"
	keyIngest    = "k-ingest" // a gateway key: event types, no role
)

func spec(key, actor string, g keys.Grant) keys.KeySpec {
	g.ActorID = actor
	g.SourceType, _, _ = strings.Cut(actor, "::")
	return keys.KeySpec{SHA256: keys.HashKey(key), Grant: g}
}

// accessKeyring is the keys file of the access tests: the local key as
// admin beside one key per role and scope.
func accessKeyring(t *testing.T) *keys.Keyring {
	t.Helper()
	kr, err := keys.NewKeyring([]keys.KeySpec{
		spec(testenv.LocalKey, "SYSTEM::local-fleet", keys.Grant{Roles: []string{contract.RoleAdmin}}),
		spec(keyViewer, "HUMAN::vera", keys.Grant{Roles: []string{contract.RoleViewer}}),
		spec(keyFinance, "HUMAN::fin", keys.Grant{Roles: []string{contract.RoleFinance}}),
		spec(keyFinT1, "HUMAN::fin-t1", keys.Grant{Roles: []string{contract.RoleFinance}, TenantIDs: []string{"t1"}}),
		spec(keyFinNone, "HUMAN::fin-t9", keys.Grant{Roles: []string{contract.RoleFinance}, TenantIDs: []string{"t9"}}),
		spec(keyViewFinT1, "HUMAN::vf-t1", keys.Grant{Roles: []string{contract.RoleViewer, contract.RoleFinance}, TenantIDs: []string{"t1"}}),
		spec(keyOperator, "HUMAN::ops", keys.Grant{Roles: []string{contract.RoleOperator}, AuthorityLevels: []string{contract.AuthorityLocal}}),
		spec(keyOpAll, "HUMAN::ops-all", keys.Grant{Roles: []string{contract.RoleOperator}}),
		spec(keyAuditor, "HUMAN::audrey", keys.Grant{Roles: []string{contract.RoleAuditor}}),
		spec(keyRevoked, "HUMAN::gone", keys.Grant{Roles: []string{contract.RoleAdmin}, Revoked: true}),
		spec(keyIngest, "SYSTEM::scanner", keys.Grant{EventTypes: []string{contract.TypeProviderObservation}}),
	})
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

func accessGuard(t *testing.T) *access.Guard {
	t.Helper()
	g, err := access.NewGuard(access.GuardOptions{Environment: contract.EnvLocalParity, LocalKey: testenv.LocalKey}, accessKeyring(t))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// seedWindows adds one conservation window per tenant of seedBilling.
func seedWindows(t *testing.T, fx *fixture) {
	t.Helper()
	at := time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC)
	for i, tenant := range []string{"t1", "t2"} {
		insert(t, fx.db, `INSERT INTO billing_window (tenant_id, product_id, currency, window_start, partition, accepted, rated, rated_amount, rating_pending, version)`,
			tenant, "p", "EUR", at, uint32(i), uint64(2), uint64(1), "1.00", uint64(1), uint64(1))
	}
}

func getAs(t *testing.T, u, key string, header ...string) (int, []byte, http.Header) {
	t.Helper()
	resp := testenv.Get(t, u, key, header...)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b, resp.Header
}

// TestAccessTable runs every (key, endpoint) pair against the real read
// model: the status, and for the billing surfaces the rows the key sees.
func TestAccessTable(t *testing.T) {
	guard := accessGuard(t)
	fx := newSurfaceFixture(t, api.Options{Guard: guard})
	seedWindows(t, fx)
	bundle := "/v1/bundle?evidence_id=" + url.QueryEscape(idMissing)

	type want map[string]int // key -> status
	all := func(code int) want {
		return want{testenv.LocalKey: code, keyViewer: code, keyFinance: code, keyFinT1: code, keyFinNone: code,
			keyOperator: code, keyAuditor: code, keyIngest: code}
	}
	fleet := want{testenv.LocalKey: 200, keyViewer: 200, keyFinance: 403, keyFinT1: 403, keyFinNone: 403, keyOperator: 200, keyAuditor: 403, keyIngest: 403}
	billing := want{testenv.LocalKey: 200, keyViewer: 403, keyFinance: 200, keyFinT1: 200, keyFinNone: 200, keyOperator: 403, keyAuditor: 403, keyIngest: 403}
	statusW := want{testenv.LocalKey: 200, keyViewer: 200, keyFinance: 200, keyFinT1: 200, keyFinNone: 200, keyOperator: 200, keyAuditor: 403, keyIngest: 403}
	auditW := want{testenv.LocalKey: 200, keyViewer: 403, keyFinance: 403, keyFinT1: 403, keyFinNone: 403, keyOperator: 403, keyAuditor: 200, keyIngest: 403}
	for _, tc := range []struct {
		path string
		want want
	}{
		{"/healthz", all(200)},
		{"/v1/session", all(200)},
		{"/v1/status", statusW},
		{"/v1/drift?status=all", fleet},
		{"/v1/drift/" + url.PathEscape(idMissing), fleet},
		{"/v1/heatmap", fleet},
		{"/v1/attention", fleet},
		{"/v1/connectivity", fleet},
		{"/v1/nodes", fleet},
		{"/v1/nodes/n1", fleet},
		{"/v1/nodes/n1/timeline", fleet},
		{"/v1/rollouts", fleet},
		{"/v1/relays", fleet},
		{"/v1/syncdebt", fleet},
		{bundle, fleet},
		{"/metrics", fleet},
		{"/v1/billing/mismatches?status=all", billing},
		{"/v1/billing/rated", billing},
		{"/v1/billing/conservation", billing},
		{"/v1/billing/automation?tenant_id=t2", billing},
		{"/v1/audit", auditW},
	} {
		for key, code := range tc.want {
			got, body, h := getAs(t, fx.url+tc.path, key)
			if got != code {
				t.Errorf("%s as %s: %d, want %d: %.200s", tc.path, key, got, code, body)
			}
			if h.Get(access.HeaderPolicyRev) != guard.PolicyRev() || h.Get(access.HeaderPolicyRev) == "" {
				t.Errorf("%s as %s: policy rev %q, want %q", tc.path, key, h.Get(access.HeaderPolicyRev), guard.PolicyRev())
			}
		}
		// No key, an unknown key, a revoked key: 401 everywhere but the
		// health check.
		for _, key := range []string{"", "nope", keyRevoked} {
			want := http.StatusUnauthorized
			if tc.path == "/healthz" {
				want = http.StatusOK
			}
			got, body, h := getAs(t, fx.url+tc.path, key)
			if got != want {
				t.Errorf("%s with key %q: %d, want %d: %.200s", tc.path, key, got, want, body)
			}
			if want == http.StatusUnauthorized && !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s with key %q: no WWW-Authenticate", tc.path, key)
			}
		}
	}

	// Visible rows: a finance key scoped to t1 sees t1's rows only, in
	// lists, totals, exports, rated totals, conservation and automation.
	mismatchIDs := func(key string) ([]string, uint64) {
		_, body, _ := getAs(t, fx.url+"/v1/billing/mismatches?status=all", key)
		p := decode[apitypes.BillingPage](t, body)
		var ids []string
		for _, m := range p.Mismatches {
			ids = append(ids, m.MismatchID)
		}
		sort.Strings(ids)
		return ids, p.Totals.Count
	}
	for _, tc := range []struct {
		key   string
		ids   []string
		total uint64
	}{
		{testenv.LocalKey, []string{"b1", "b2", "b3", "b4", "b5", "b6"}, 6},
		{keyFinance, []string{"b1", "b2", "b3", "b4", "b5", "b6"}, 6},
		{keyFinT1, []string{"b1", "b2", "b5", "b6"}, 4},
		{keyFinNone, nil, 0},
	} {
		ids, total := mismatchIDs(tc.key)
		if !slices.Equal(ids, tc.ids) || total != tc.total {
			t.Errorf("mismatches as %s: %v (total %d), want %v (total %d)", tc.key, ids, total, tc.ids, tc.total)
		}
	}
	// A filter naming another tenant widens nothing.
	_, body, _ := getAs(t, fx.url+"/v1/billing/mismatches?status=all&tenant=t2", keyFinT1)
	if p := decode[apitypes.BillingPage](t, body); len(p.Mismatches) != 0 || p.Totals.Count != 0 {
		t.Errorf("t1 key asking for t2: %+v", p)
	}
	// CSV export.
	code, body, h := getAs(t, fx.url+"/v1/billing/mismatches?status=all", keyFinT1, "Accept", "text/csv")
	recs, err := csv.NewReader(strings.NewReader(string(body))).ReadAll()
	if code != 200 || err != nil || len(recs) != 1+4 {
		t.Errorf("CSV as the t1 key: %d, %v, %d lines, want a header and 4 rows:\n%s", code, err, len(recs), body)
	}
	if h.Get(api.HeaderExportRowCap) == "" {
		t.Errorf("an export without limit carries no %s", api.HeaderExportRowCap)
	}
	for _, r := range recs[1:] {
		if slices.Contains(r, "t2") {
			t.Errorf("CSV as the t1 key holds a t2 row: %v", r)
		}
	}
	// Rated totals.
	_, body, _ = getAs(t, fx.url+"/v1/billing/rated?group_by=tenant", keyFinT1)
	rt := decode[apitypes.RatedTotals](t, body)
	if len(rt.Totals) != 1 || rt.Totals[0].TenantID != "t1" || rt.Totals[0].Lines != 3 {
		t.Errorf("rated as the t1 key: %+v", rt.Totals)
	}
	// Conservation windows and the status's billing section.
	for _, tc := range []struct {
		key     string
		tenants []string
	}{{testenv.LocalKey, []string{"t1", "t2"}}, {keyFinT1, []string{"t1"}}, {keyFinNone, nil}} {
		_, body, _ := getAs(t, fx.url+"/v1/billing/conservation", tc.key)
		var got []string
		for _, w := range decode[apitypes.ConservationPage](t, body).Windows {
			got = append(got, w.TenantID)
		}
		sort.Strings(got)
		if !slices.Equal(got, tc.tenants) {
			t.Errorf("conservation windows as %s: tenants %v, want %v", tc.key, got, tc.tenants)
		}
		_, body, _ = getAs(t, fx.url+"/v1/status", tc.key)
		got = nil
		st := decode[apitypes.Status](t, body)
		for _, c := range st.Billing.Tenants {
			got = append(got, c.TenantID)
		}
		if !slices.Equal(got, tc.tenants) || st.Billing.Windows != uint64(len(tc.tenants)) {
			t.Errorf("status billing as %s: tenants %v (%d windows), want %v", tc.key, got, st.Billing.Windows, tc.tenants)
		}
	}
	_, body, _ = getAs(t, fx.url+"/v1/status", keyViewer)
	if st := decode[apitypes.Status](t, body); len(st.Billing.Tenants) != 0 || st.Billing.Error == "" {
		t.Errorf("a viewer sees the status's billing section: %+v", st.Billing)
	}
	// Automation: t2's open mismatches stop its automation for an
	// unscoped key; to the t1 key t2's rows are invisible.
	for _, tc := range []struct {
		key  string
		stop bool
	}{{keyFinance, true}, {keyFinT1, false}} {
		_, body, _ := getAs(t, fx.url+"/v1/billing/automation?tenant_id=t2", tc.key)
		a := decode[apitypes.Automation](t, body)
		if a.Stopped != tc.stop || (!tc.stop && len(a.Reasons) != 0) {
			t.Errorf("automation of t2 as %s: stopped %v, reasons %+v; want %v", tc.key, a.Stopped, a.Reasons, tc.stop)
		}
	}

	// The session names the key's roles, scopes and endpoints.
	_, body, _ = getAs(t, fx.url+"/v1/session", keyFinT1)
	s := decode[apitypes.Session](t, body)
	if s.ActorID != "HUMAN::fin-t1" || !slices.Equal(s.TenantIDs, []string{"t1"}) || s.PolicyRev != guard.PolicyRev() ||
		!slices.Contains(s.Endpoints, "billing_mismatches") || slices.Contains(s.Endpoints, "drift") {
		t.Errorf("session of the t1 key: %+v", s)
	}

	// The audit log holds the bundle and export reads and the denials,
	// and only auditors (and admin) read it.
	checkFor(t, 10*time.Second, func() string {
		_, body, _ := getAs(t, fx.url+"/v1/audit?limit=10000", keyAuditor)
		p := decode[apitypes.AuditPage](t, body)
		var bundleRead, csvRead, denied401, denied403 bool
		for _, e := range p.Entries {
			bundleRead = bundleRead || (e.Endpoint == "bundle" && e.Result == access.ResultAllowed && e.ActorID == "HUMAN::vera")
			csvRead = csvRead || (e.Endpoint == "billing_mismatches" && e.Result == access.ResultAllowed && e.ActorID == "HUMAN::fin-t1" &&
				slices.Equal(e.TenantIDs, []string{"t1"}))
			denied401 = denied401 || (e.Result == access.ResultDenied && e.Status == 401 && e.ActorID == "HUMAN::gone")
			denied403 = denied403 || (e.Result == access.ResultDenied && e.Status == 403 && e.ActorID == "HUMAN::audrey" && e.Endpoint == "drift")
			if e.PolicyRev != guard.PolicyRev() || e.RequestID == "" {
				return "entry without policy_rev or request_id: " + e.RequestID
			}
		}
		if !bundleRead || !csvRead || !denied401 || !denied403 {
			return "audit log lacks an entry: bundle " + boolS(bundleRead) + " csv " + boolS(csvRead) + " 401 " + boolS(denied401) + " 403 " + boolS(denied403)
		}
		return ""
	})
	_, body, _ = getAs(t, fx.url+"/v1/audit?result=denied&endpoint=drift&actor_id=HUMAN::audrey", keyAuditor)
	for _, e := range decode[apitypes.AuditPage](t, body).Entries {
		if e.Result != access.ResultDenied || e.Endpoint != "drift" || e.ActorID != "HUMAN::audrey" {
			t.Errorf("audit filter let through %+v", e)
		}
	}
}

// TestTenantScopeOfFindings: the billing mismatches that count and list
// as findings of classification billing_mismatch (the status's counts,
// the heat map, the attention queue) are the key's tenants' only, as in
// the billing reads. seedBilling holds open mismatches b1, b2, b5 of t1
// and b3, b4 of t2.
func TestTenantScopeOfFindings(t *testing.T) {
	fx := newSurfaceFixture(t, api.Options{Guard: accessGuard(t)})
	for _, tc := range []struct {
		key  string
		want uint64
	}{{keyFinance, 5}, {keyFinT1, 3}, {keyFinNone, 0}, {keyViewFinT1, 3}} {
		code, body, _ := getAs(t, fx.url+"/v1/status", tc.key)
		if code != 200 {
			t.Fatalf("status as %s: %d %s", tc.key, code, body)
		}
		st := decode[apitypes.Status](t, body)
		if got := st.Findings.OpenByClassification[string(contract.ClassBilling)]; got != tc.want {
			t.Errorf("status as %s: %d open billing mismatches, want %d", tc.key, got, tc.want)
		}
	}

	for _, tc := range []struct {
		key  string
		want uint64
	}{{testenv.LocalKey, 5}, {keyViewFinT1, 3}} {
		code, body, _ := getAs(t, fx.url+"/v1/heatmap", tc.key)
		if code != 200 {
			t.Fatalf("heatmap as %s: %d %s", tc.key, code, body)
		}
		var got uint64
		for _, c := range decode[apitypes.Heatmap](t, body).Cells {
			if c.Classification == string(contract.ClassBilling) {
				got += c.Count
			}
		}
		if got != tc.want {
			t.Errorf("heatmap as %s: %d billing mismatches, want %d", tc.key, got, tc.want)
		}
	}

	// The attention queue read from attention_top (n within its slots)
	// and from a scan (a filter attention_top does not answer).
	for _, tc := range []struct {
		key, query string
		want       []string
	}{
		{testenv.LocalKey, "kind=finding&n=100", []string{"b1", "b2", "b3", "b4", "b5"}},
		{keyViewFinT1, "kind=finding&n=100", []string{"b1", "b2", "b5"}},
		{keyViewFinT1, "kind=finding&n=100&product=gpu", []string{"b1", "b2", "b5"}},
		{keyViewFinT1, "kind=finding&n=100&product=apps", nil},
	} {
		code, body, _ := getAs(t, fx.url+"/v1/attention?"+tc.query, tc.key)
		if code != 200 {
			t.Fatalf("attention?%s as %s: %d %s", tc.query, tc.key, code, body)
		}
		var got []string
		for _, it := range decode[apitypes.Attention](t, body).Global {
			if id, ok := strings.CutPrefix(it.ID, string(contract.ClassBilling)+":"); ok {
				got = append(got, id)
			}
		}
		sort.Strings(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("attention?%s as %s lists billing mismatches %v, want %v", tc.query, tc.key, got, tc.want)
		}
	}
}

func boolS(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// checkFor polls check until it returns "" or d passes.
func checkFor(t *testing.T, d time.Duration, check func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		msg := check()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(msg)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestAuditFailsClosed: an evidence bundle or export whose audit entry
// cannot be written is not served.
func TestAuditFailsClosed(t *testing.T) {
	sink := &access.MemorySink{}
	aud, err := access.NewAuditor(sink, access.AuditorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(aud.Close)
	fx := newSurfaceFixture(t, api.Options{Auditor: aud})
	bundle := fx.url + "/v1/bundle?evidence_id=" + url.QueryEscape(idMissing)
	if code, body, _ := getAs(t, bundle, testenv.LocalKey); code != 200 {
		t.Fatalf("bundle: %d %.200s", code, body)
	}
	if n := len(sink.Entries()); n != 1 {
		t.Fatalf("%d audit entries after one bundle read, want 1", n)
	}
	sink.Fail = context.DeadlineExceeded
	for _, u := range []string{bundle, fx.url + "/v1/drift?status=all&format=csv", fx.url + "/v1/billing/mismatches?format=arrow"} {
		code, body, _ := getAs(t, u, testenv.LocalKey)
		if code != http.StatusServiceUnavailable || !strings.Contains(string(body), "audit log") || !strings.Contains(string(body), "request_id") {
			t.Errorf("%s with the audit log down: %d %.200s", u, code, body)
		}
	}
	// Plain reads go on.
	if code, _, _ := getAs(t, fx.url+"/v1/drift", testenv.LocalKey); code != 200 {
		t.Errorf("drift page with the audit log down: %d", code)
	}
}

// TestHardening: the concurrency cap, CORS closed by default, ClickHouse
// errors hidden behind a request id.
func TestHardening(t *testing.T) {
	reg := prometheus.NewRegistry()
	fx := newFixture(t, api.Options{MaxConcurrent: 1, AllowOrigins: []string{"https://ops.example"}, WaitConsumer: "joiner", WaitPartitions: 3, Registry: reg})
	// CORS: only the allowed origin gets the headers.
	_, _, h := getAs(t, fx.url+"/v1/drift", testenv.LocalKey, "Origin", "https://evil.example")
	if h.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("CORS open to another origin: %v", h)
	}
	_, _, h = getAs(t, fx.url+"/v1/drift", testenv.LocalKey, "Origin", "https://ops.example")
	if h.Get("Access-Control-Allow-Origin") != "https://ops.example" {
		t.Errorf("CORS closed to the allowed origin: %v", h)
	}
	// The cap: a request waiting for its watermark holds the one slot.
	wm := t0.Add(-2 * time.Minute).Format(time.RFC3339) // partition 2 never reaches it
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := testenv.Do(fx.url+"/v1/drift?wait_watermark="+wm+"&wait_timeout=4s", testenv.LocalKey)
		if err == nil {
			resp.Body.Close()
		}
	}()
	checkFor(t, 5*time.Second, func() string {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "driftline_query_watermark_waiting" && mf.GetMetric()[0].GetGauge().GetValue() == 1 {
				return ""
			}
		}
		return "the waiting request never started waiting"
	})
	if code, _, h := getAs(t, fx.url+"/v1/heatmap", testenv.LocalKey); code != http.StatusServiceUnavailable || h.Get("Retry-After") == "" {
		t.Errorf("a second request while the first held the only slot: %d, want 503 with Retry-After", code)
	}
	<-done
	// ClickHouse's text stays in the log.
	if err := fx.db.Exec(context.Background(), "DROP TABLE drift_evidence"); err != nil {
		t.Fatal(err)
	}
	code, body, _ := getAs(t, fx.url+"/v1/drift?status=all", testenv.LocalKey)
	eb := decode[apitypes.ErrorBody](t, body)
	if code != http.StatusServiceUnavailable || eb.RequestID == "" || strings.Contains(eb.Error, "drift_evidence") ||
		strings.Contains(eb.Error, "DB::Exception") || !strings.Contains(eb.Error, eb.RequestID) {
		t.Errorf("error answer: %d %s", code, body)
	}
}

// TestGuardReload: a revoked key is refused after a reload, and the
// policy revision changes.
func TestGuardReload(t *testing.T) {
	guard := accessGuard(t)
	fx := newFixture(t, api.Options{Guard: guard})
	rev := guard.PolicyRev()
	if code, _, _ := getAs(t, fx.url+"/v1/drift", keyViewer); code != 200 {
		t.Fatalf("viewer: %d", code)
	}
	specs := slices.Clone(accessKeyring(t).Specs())
	for i := range specs {
		if specs[i].SHA256 == keys.HashKey(keyViewer) {
			specs[i].Revoked = true
		}
	}
	kr, err := keys.NewKeyring(specs)
	if err != nil {
		t.Fatal(err)
	}
	next, err := guard.SetKeys(kr)
	if err != nil || next == rev {
		t.Fatalf("SetKeys: %s, %v (was %s)", next, err, rev)
	}
	code, _, h := getAs(t, fx.url+"/v1/drift", keyViewer)
	if code != http.StatusUnauthorized || h.Get(access.HeaderPolicyRev) != next {
		t.Errorf("revoked viewer: %d under %s, want 401 under %s", code, h.Get(access.HeaderPolicyRev), next)
	}
	// dev refuses the local key.
	dev, err := access.NewGuard(access.GuardOptions{Environment: contract.EnvDev, LocalKey: testenv.LocalKey}, accessKeyring(t))
	if err == nil || dev != nil {
		t.Errorf("dev guard admitting the local key: %v", err)
	}
	if _, err := access.NewGuard(access.GuardOptions{Environment: contract.EnvProd, LocalKey: testenv.LocalKey}, keys.LocalKeyring("x")); err == nil {
		t.Error("prod guard without mTLS")
	}
}

// TestLeastPrivilege serves the API as the query service runs: reading as
// the read-only ClickHouse user, which can neither write nor create, and
// appending the audit log as the audit user.
func TestLeastPrivilege(t *testing.T) {
	if os.Getenv(testenv.EnvClickHouseAddr) != "" {
		t.Skip("an external ClickHouse: its users are its own")
	}
	admin, cfg := testenv.ClickHouseConn(t)
	seed(t, admin)
	rcfg, acfg := cfg, cfg
	rcfg.User, rcfg.Password = chserver.ReaderUser, ""
	acfg.User, acfg.Password = chserver.AuditUser, ""
	ctx := context.Background()
	if _, err := readmodel.Open(ctx, rcfg); err == nil {
		t.Error("the read-only user created (or was let create) the database")
	}
	reader := testenv.Open(t, rcfg, readmodel.NoCreate())
	if err := readmodel.WaitMigrated(ctx, reader, slog.New(slog.DiscardHandler), time.Millisecond); err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{
		"INSERT INTO audit_log (actor_id) VALUES ('x')",
		"CREATE TABLE nope (x UInt8) ENGINE = Memory",
		"ALTER TABLE audit_log DELETE WHERE 1",
		"DROP TABLE audit_log",
	} {
		if err := reader.Exec(ctx, sql); err == nil {
			t.Errorf("the read-only user ran %s", sql)
		}
	}
	aud, err := access.NewAuditor(access.NewClickHouseSink(testenv.Open(t, acfg, readmodel.NoCreate())), access.AuditorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(aud.Close)
	hs := serveAPI(t, api.Options{Guard: testenv.LocalGuard(t), DB: reader, Auditor: aud, Now: func() time.Time { return t0 }})
	testenv.GetJSON(t, hs+"/v1/drift?status=all", 200)
	if code, body, _ := getAs(t, hs+"/v1/bundle?evidence_id="+url.QueryEscape(idMissing), testenv.LocalKey); code != 200 {
		t.Fatalf("bundle as the read-only user: %d %.200s", code, body)
	}
	var n uint64
	if err := admin.QueryRow(ctx, "SELECT count() FROM audit_log WHERE endpoint = 'bundle'").Scan(&n); err != nil || n != 1 {
		t.Errorf("audit entries of the bundle read: %d, %v; want 1", n, err)
	}
}
