package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/api"
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
