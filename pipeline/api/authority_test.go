package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/api"
	"github.com/driftline/driftline/pipeline/api/access"
	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/readmodel/reader"
)

// commandSink is a commands topic that keeps what it is given.
type commandSink struct {
	mu   sync.Mutex // protects recs
	recs []*kgo.Record
}

func (c *commandSink) ProduceSync(_ context.Context, rs ...*kgo.Record) kgo.ProduceResults {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(kgo.ProduceResults, len(rs))
	for i, r := range rs {
		c.recs = append(c.recs, r)
		out[i].Record = r
	}
	return out
}

func (c *commandSink) keys() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, r := range c.recs {
		out = append(out, string(r.Key))
	}
	return out
}

// findingsRead answers the reads of an action from fixed findings, and
// the nodes' masters of record from levels; any other read panics on the
// nil ReadModel it embeds.
type findingsRead struct {
	api.ReadModel
	findings []apitypes.Finding
	levels   map[string]string // node id -> master_of_record
}

func (f *findingsRead) Finding(_ context.Context, id string) (apitypes.Finding, bool, error) {
	for _, x := range f.findings {
		if x.EvidenceID == id {
			return x, true, nil
		}
	}
	return apitypes.Finding{}, false, nil
}

func (f *findingsRead) FindingsOf(_ context.Context, provider, providerID string) ([]apitypes.Finding, error) {
	var out []apitypes.Finding
	for _, x := range f.findings {
		if x.Provider == provider && x.ProviderID == providerID {
			out = append(out, x)
		}
	}
	return out, nil
}

func (f *findingsRead) Findings(context.Context, reader.Filter, reader.Sort, *reader.Keyset, int) ([]apitypes.Finding, error) {
	return f.findings, nil
}

func (f *findingsRead) NodeQuarantined(context.Context, []string) (bool, error) { return false, nil }

func (f *findingsRead) NodeAuthority(_ context.Context, ids []string) (map[string]string, error) {
	out := map[string]string{}
	for _, id := range ids {
		if l, ok := f.levels[id]; ok {
			out[id] = l
		}
	}
	return out, nil
}

// memActionLog is an action log in memory that keeps the first answer
// of each key.
type memActionLog struct {
	mu sync.Mutex // protects m
	m  map[string]reader.AcceptedCommand
}

func (l *memActionLog) Accepted(_ context.Context, key string) (reader.AcceptedCommand, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.m[key]
	return c, ok, nil
}

func (l *memActionLog) Accept(_ context.Context, c reader.AcceptedCommand) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]reader.AcceptedCommand{}
	}
	if _, ok := l.m[c.IdempotencyKey]; !ok {
		l.m[c.IdempotencyKey] = c
	}
	return nil
}

// memAuditor is an auditor writing to sink, flushing queued entries
// every 10ms.
func memAuditor(t *testing.T, sink *access.MemorySink) *access.Auditor {
	t.Helper()
	aud, err := access.NewAuditor(sink, access.AuditorOptions{FlushInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(aud.Close)
	return aud
}

func postAs(t *testing.T, u, key, idem string, body any) (int, []byte) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, u, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+key)
	if idem != "" {
		req.Header.Set("Idempotency-Key", idem)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// TestActionAuthorityScope runs (key, scope, endpoint) against the nodes'
// masters of record: n1 LOCAL, n2 REGION, n3 GLOBAL (seedFleet). An
// operator key scoped to LOCAL acts on n1's findings and on findings of
// no node, is refused n2's with 403 and a reason, and a batch skips and
// reports the findings out of its scope.
func TestActionAuthorityScope(t *testing.T) {
	cmds := &commandSink{}
	fx := newSurfaceFixture(t, api.Options{Guard: accessGuard(t), Commands: cmds})
	seedFleet(t, fx.db)
	base := serveAPI(t, api.Options{DB: fx.db, Guard: accessGuard(t), Commands: cmds, Actions: reader.NewActionLog(fx.db)})
	ack := map[string]string{"action": "acknowledge", "reason": "seen"}
	for i, tc := range []struct {
		key, evidenceID string
		code            int
		reason          string
	}{
		{keyOperator, idMissing, 202, ""},                                     // n1 LOCAL: in scope
		{keyOperator, idIdentity, 403, string(contract.ReasonOutOfAuthority)}, // n2 REGION
		{keyOperator, idStale, 403, string(contract.ReasonOutOfAuthority)},    // n3 GLOBAL
		{keyOperator, idQuota, 202, ""},                                       // not a node: no authority
		{keyOpAll, idIdentity, 202, ""},                                       // unscoped operator
		{testenv.LocalKey, idStale, 202, ""},                                  // admin
		{keyViewer, idMissing, 403, ""},                                       // no operator role
		{keyAuditor, idMissing, 403, ""},
	} {
		code, body := postAs(t, base+"/v1/findings/"+tc.evidenceID+"/actions", tc.key, "idem-"+string(rune('a'+i)), ack)
		eb := decode[apitypes.ErrorBody](t, body)
		if code != tc.code || eb.Reason != tc.reason {
			t.Errorf("%s on %s: %d %s, want %d reason %q", tc.key, tc.evidenceID, code, body, tc.code, tc.reason)
		}
	}
	if got := cmds.keys(); len(got) != 4 {
		t.Errorf("commands written: %v, want the four accepted", got)
	}

	// A batch over every open maas finding: the LOCAL key's preview and
	// batch skip n2's and n3's and say why; the unscoped key's skip none.
	batch := func(key, idem string, preview bool) apitypes.BatchAccepted {
		body := map[string]any{"action": "assign", "reason": "triage", "assignee": "HUMAN::olu", "preview": preview}
		code, b := postAs(t, base+"/v1/actions/batch?provider=maas", key, idem, body)
		if code != 200 && code != 202 {
			t.Fatalf("batch as %s: %d %s", key, code, b)
		}
		return decode[apitypes.BatchAccepted](t, b)
	}
	skipped := func(a apitypes.BatchAccepted) []string {
		var out []string
		for _, s := range a.Skipped {
			if s.Reason != string(contract.ReasonOutOfAuthority) || s.Detail == "" {
				t.Errorf("skipped %+v: want reason %s with detail", s, contract.ReasonOutOfAuthority)
			}
			out = append(out, s.EvidenceID)
		}
		slices.Sort(out)
		return out
	}
	applied := func(a apitypes.BatchAccepted) []string {
		var out []string
		for _, x := range a.AppliedTo {
			out = append(out, x.EvidenceID)
		}
		slices.Sort(out)
		return out
	}
	for _, preview := range []bool{true, false} {
		a := batch(keyOperator, "batch-local", preview)
		if !slices.Equal(skipped(a), sorted(idIdentity, idStale)) || !slices.Equal(applied(a), []string{idMissing}) {
			t.Errorf("LOCAL batch (preview %v): applied %v skipped %v", preview, applied(a), skipped(a))
		}
	}
	a := batch(keyOpAll, "", true)
	if len(a.Skipped) != 0 || !slices.Equal(applied(a), sorted(idMissing, idIdentity, idStale)) {
		t.Errorf("unscoped batch preview: applied %v skipped %+v", applied(a), a.Skipped)
	}
}

// TestOutOfAuthorityAuditedDenied: an action refused 403 because its node
// is outside the key's authority_levels is written to the audit log as
// the guard writes its refusals, result denied with the reason, so that
// an auditor's search for denied requests finds it; an action in scope
// stays allowed.
func TestOutOfAuthorityAuditedDenied(t *testing.T) {
	sink := &access.MemorySink{}
	finding := func(node string) apitypes.Finding {
		return apitypes.Finding{EvidenceID: "identity_mismatch:maas/" + node, Provider: contract.ProviderMAAS, ProviderID: node,
			Classification: string(contract.ClassIdentity), Status: string(contract.StatusOpen)}
	}
	rm := &findingsRead{findings: []apitypes.Finding{finding("n1"), finding("n2")},
		levels: map[string]string{"n1": contract.AuthorityLocal, "n2": contract.AuthorityRegion}}
	reg := prometheus.NewRegistry()
	base := serveAPI(t, api.Options{Guard: accessGuard(t), Auditor: memAuditor(t, sink), ReadModel: rm, Commands: &commandSink{},
		Actions: &memActionLog{}, Registry: reg, Now: func() time.Time { return a0 }})
	quarantine := map[string]string{"action": "quarantine_node", "reason": "suspect"}
	for _, tc := range []struct {
		node, result string
		code         int
	}{{"n2", access.ResultDenied, 403}, {"n1", access.ResultAllowed, 202}} {
		id := finding(tc.node).EvidenceID
		if code, b := postAs(t, base+"/v1/findings/"+id+"/actions", keyOperator, "quarantine-"+tc.node, quarantine); code != tc.code {
			t.Fatalf("LOCAL operator quarantines %s: %d %s, want %d", tc.node, code, b, tc.code)
		}
		var outcome []access.Entry
		for _, e := range sink.Entries() {
			if e.Target == "finding:"+id {
				outcome = append(outcome, e)
			}
		}
		if len(outcome) != 1 || outcome[0].Result != tc.result || outcome[0].Status != tc.code || outcome[0].ActorID != "HUMAN::ops" {
			t.Errorf("outcome entries of the action on %s: %+v, want one of result %s, status %d", tc.node, outcome, tc.result, tc.code)
			continue
		}
		if tc.result == access.ResultDenied && !strings.Contains(outcome[0].Reason, "master_of_record "+contract.AuthorityRegion) {
			t.Errorf("denied entry of the action on %s: reason %q, want the refusal's", tc.node, outcome[0].Reason)
		}
	}
	if got := deniedCount(t, reg, "403"); got != 1 {
		t.Errorf("driftline_query_denied_total{code=\"403\"} = %v, want 1", got)
	}
}

// deniedCount reads driftline_query_denied_total of code from reg.
func deniedCount(t *testing.T, reg *prometheus.Registry, code string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "driftline_query_denied_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "code" && l.GetValue() == code {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no driftline_query_denied_total{code=%q}", code)
	return 0
}
