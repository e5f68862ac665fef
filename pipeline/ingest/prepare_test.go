package ingest

import (
	"bytes"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/driftline/driftline/pipeline/contract"
)

// offlineGateway is a gateway without a producer, enough for prepare.
func offlineGateway(t testing.TB) *Gateway {
	opts := Options{Environment: contract.EnvLocalParity, Brokers: []string{"unused:1"}, Keys: LocalKeyring("k"),
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
	for _, r := range append(contract.Reasons, contract.ReasonClockSkew) {
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
