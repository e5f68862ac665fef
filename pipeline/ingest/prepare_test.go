package ingest

import (
	"bytes"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	json "github.com/segmentio/encoding/json"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/contract/keys"
)

// offlineGateway is a gateway without a producer, enough for prepare.
func offlineGateway(t testing.TB) *Gateway {
	opts := Options{Environment: contract.EnvLocalParity, Brokers: []string{"unused:1"}, Keys: keys.LocalKeyring("k"),
		Registry: prometheus.NewRegistry(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := opts.validate(); err != nil {
		t.Fatal(err)
	}
	g := &Gateway{opts: opts, validator: contract.Validator{Environment: opts.Environment, ZeroCopy: true}, recent: newRecentSet(16)}
	g.pol.Store(g.newPolicy(opts.Keys))
	g.m = newMetrics(opts.Registry, nil, func() float64 { return 0 }, func() float64 { return 0 })
	return g
}

// FuzzPrepare feeds arbitrary bodies to the line splitter and validator:
// no panic, one receipt per non-blank line in order, every line either
// routed to a known topic or quarantined with a known reason.
func FuzzPrepare(f *testing.F) {
	f.Add([]byte(`{"event_id":"e1","event_type":"provider.scan_completed","schema_version":1,"producer":"p","occurred_at":"2026-11-21T10:15:30Z","environment":"local_parity","payload":{"provider":"maas","scan_id":"s1","scan_started_at":"2026-11-21T10:00:00Z"}}` + "\r\n\n{\"bad\n  \n"))
	f.Add([]byte("\n\n\n"))
	f.Add([]byte(`{"event_id":"e1"}`))
	g := offlineGateway(f)
	p, err := g.opts.Keys.Authenticate("k")
	if err != nil {
		f.Fatal(err)
	}
	known := map[contract.Reason]bool{}
	for _, r := range append(contract.Reasons, contract.ProducerReasons...) {
		known[r] = true
	}
	g.opts.now = func() time.Time { return time.Unix(0, 0) }
	f.Fuzz(func(t *testing.T, body []byte) {
		b := g.prepare(g.pol.Load(), p, body)
		want := 0
		for _, l := range bytes.Split(body, []byte("\n")) {
			if len(bytes.TrimSpace(l)) > 0 {
				want++
			}
		}
		if len(b.lines) != want {
			t.Fatalf("%d receipts for %d non-blank lines", len(b.lines), want)
		}
		last := 0
		for _, l := range b.lines {
			if l.receipt.Line <= last {
				t.Fatalf("line numbers out of order: %d after %d", l.receipt.Line, last)
			}
			last = l.receipt.Line
			switch l.receipt.Status {
			case StatusRejected:
				if !known[l.receipt.Reason] || l.topic != g.opts.Topics.Quarantine {
					t.Fatalf("rejected line %+v", l.receipt)
				}
			case StatusAccepted:
				if l.topic == "" || len(l.key) == 0 || l.dedupeID == "" {
					t.Fatalf("accepted line without route: %+v", l)
				}
			case StatusDuplicate:
			default:
				t.Fatalf("status %q", l.receipt.Status)
			}
		}
	})
}

// TestPrepareConflicts: a line that repeats an accepted dedupe identity
// with the same content (in the request or in an earlier one) is a
// duplicate, whatever its key order; with other content it is rejected
// as conflicting_duplicate, naming both digests, and quarantined. A line
// repeating an earlier line of its request takes that line's final
// outcome, so a copy of a conflicting line is a conflict too.
func TestPrepareConflicts(t *testing.T) {
	g := offlineGateway(t)
	p, err := g.opts.Keys.Authenticate("k")
	if err != nil {
		t.Fatal(err)
	}
	obs := func(id string, seq int, providerID string, reorder bool) string {
		payload := `{"provider":"maas","provider_id":"` + providerID + `","resource_family":"gpuaas_allocation","observed_state":"running","observed_version":"v1"}`
		if reorder {
			payload = `{ "observed_version":"v1", "observed_state":"running","resource_family":"gpuaas_allocation","provider_id":"` + providerID + `","provider":"maas"}`
		}
		return `{"event_id":"` + id + `","event_type":"provider.observation","schema_version":1,"producer":"scanner","seq":` + strconv.Itoa(seq) +
			`,"occurred_at":"2026-11-21T10:15:30Z","environment":"local_parity","payload":` + payload + `}`
	}
	first := obs("e1", 1, "n-1", false)
	env, _, verr := g.validator.DecodeEvent([]byte(first))
	if verr != nil {
		t.Fatal(verr)
	}
	firstDigest := contract.EventDigest(&env).String()
	check := func(body string, want ...Status) *batch {
		t.Helper()
		b := g.prepare(g.pol.Load(), p, []byte(body))
		if len(b.lines) != len(want) {
			t.Fatalf("%d lines, want %d", len(b.lines), len(want))
		}
		for i, l := range b.lines {
			if l.receipt.Status != want[i] {
				t.Fatalf("line %d: %+v, want %s", i+1, l.receipt, want[i])
			}
			if l.receipt.Status != StatusRejected {
				continue
			}
			if l.receipt.Reason != contract.ReasonConflictingDuplicate || l.receipt.Field != "seq" ||
				l.receipt.FirstDigest != firstDigest || l.receipt.Digest == firstDigest || l.topic != g.opts.Topics.Quarantine {
				t.Fatalf("line %d: %+v to %s, want a conflict with %s", i+1, l.receipt, l.topic, firstDigest)
			}
			var q contract.Quarantined
			if err := json.Unmarshal(l.value, &q); err != nil || q.Reason != contract.ReasonConflictingDuplicate {
				t.Fatalf("line %d: quarantine record %s (%v)", i+1, l.value, err)
			}
		}
		return b
	}
	// In one request: a redelivery (reordered), a conflict by content, a
	// conflict by a new event_id with other content under the seen seq.
	b := check(strings.Join([]string{first, obs("e1", 1, "n-1", true), obs("e1", 1, "n-2", false), obs("e9", 1, "n-3", false)}, "\n"),
		StatusAccepted, StatusDuplicate, StatusRejected, StatusRejected)
	g.commit(b)
	// In a later request, against the recent set.
	check(strings.Join([]string{obs("e1", 1, "n-1", true), obs("e1", 1, "n-2", false), obs("e2", 2, "n-1", false)}, "\n"),
		StatusDuplicate, StatusRejected, StatusAccepted)
	// A conflict with the recent set sent twice, then the accepted event
	// and a third content: each copy takes its first line's outcome, and
	// every conflict names the accepted digest, not another line's.
	b = check(strings.Join([]string{obs("e1", 1, "n-2", false), obs("e1", 1, "n-2", true), obs("e1", 1, "n-1", false), obs("e1", 1, "n-3", false)}, "\n"),
		StatusRejected, StatusRejected, StatusDuplicate, StatusRejected)
	if b.lines[1].receipt.Digest != b.lines[0].receipt.Digest {
		t.Fatalf("a copy of line 1 names digest %s, line 1 %s", b.lines[1].receipt.Digest, b.lines[0].receipt.Digest)
	}
	// A line rejected for another reason holds no identity: the valid
	// event after it under the same identity is judged on its own.
	bad := strings.Replace(obs("e7", 7, "n-7", false), `"local_parity"`, `"prod"`, 1)
	b = g.prepare(g.pol.Load(), p, []byte(strings.Join([]string{bad, obs("e7", 7, "n-7", false), obs("e7", 7, "n-7", true)}, "\n")))
	if got := []Status{b.lines[0].receipt.Status, b.lines[1].receipt.Status, b.lines[2].receipt.Status}; got[0] != StatusRejected ||
		b.lines[0].receipt.Reason != contract.ReasonWrongEnvironment || got[1] != StatusAccepted || got[2] != StatusDuplicate {
		t.Fatalf("statuses %v (line 1 %+v), want rejected wrong_environment, accepted, duplicate", got, b.lines[0].receipt)
	}
}
