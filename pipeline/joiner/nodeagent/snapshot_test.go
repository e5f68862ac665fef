package nodeagent_test

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/driftline/driftline/internal/fleet"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/joiner/nodeagent"
	"github.com/driftline/driftline/pipeline/stream/snap"
)

// fleetStep is one event of a fleet as a single-partition joiner applies
// it to its tracker, with the watermark it advances to afterwards.
type fleetStep struct {
	rec  *contract.PlatformRecord
	hb   *contract.Heartbeat
	at   time.Time
	corr string
	w    time.Time
}

func fleetSteps(t *testing.T, edit func(*fleet.Config)) (nodeagent.Options, []fleetStep) {
	t.Helper()
	cfg := fleet.DefaultConfig()
	if edit != nil {
		edit(&cfg)
	}
	g, err := fleet.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	opts := nodeagent.DefaultOptions()
	opts.DisconnectedAfter, opts.HostWindow = cfg.Windows.Staleness, cfg.Windows.Staleness
	v := contract.Validator{Environment: cfg.Environment}
	var steps []fleetStep
	var maxAt time.Time
	err = g.Emit(func(e *fleet.Event) error {
		switch e.Type {
		case contract.TypePlatformRecord, contract.TypeProviderObservation, contract.TypeScanCompleted, contract.TypeHeartbeat:
		default:
			return nil
		}
		env, payload, verr := v.DecodeEvent(e.Line)
		if verr != nil {
			t.Fatalf("decode: %v", verr)
		}
		s := fleetStep{at: env.OccurredAt.UTC(), corr: env.CorrelationID}
		switch pl := payload.(type) {
		case *contract.PlatformRecord:
			s.rec = pl
		case *contract.Heartbeat:
			s.hb = pl
		}
		if s.at.After(maxAt) {
			maxAt = s.at
		}
		s.w = maxAt.Add(-cfg.Windows.AllowedLateness)
		steps = append(steps, s)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return opts, steps
}

func (s *fleetStep) apply(tr *nodeagent.Tracker) {
	switch {
	case s.rec != nil:
		tr.ApplyRecord(s.rec, s.at)
	case s.hb != nil:
		tr.ApplyHeartbeat(s.hb, s.at, s.corr)
	}
	tr.Advance(s.w)
}

func trackerSnapshot(tr *nodeagent.Tracker) []byte {
	var w snap.Writer
	tr.AppendSnapshot(&w)
	return w.B
}

// TestSnapshotRestoresExactly applies a fleet's events to tracker A,
// snapshots it at several points, loads the snapshot into B, applies the
// remaining events to both and checks that they emit identical Status
// sequences and end identical.
func TestSnapshotRestoresExactly(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*fleet.Config)
	}{
		{"default", nil},
		{"sparse heartbeats", func(c *fleet.Config) { c.RoundInterval = 9 * time.Minute }},
		{"seed 7", func(c *fleet.Config) { c.Seed = 7 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts, steps := fleetSteps(t, tc.edit)
			for _, frac := range []int{0, 1, 2, 3, 4} {
				cut := len(steps) * frac / 6
				var rowsA, rowsB []nodeagent.Status
				a := nodeagent.New(opts, func(s *nodeagent.Status, _ *uint32) { rowsA = append(rowsA, *s) })
				for i := range steps[:cut] {
					steps[i].apply(a)
				}
				snapA := trackerSnapshot(a)
				b := nodeagent.New(opts, func(s *nodeagent.Status, _ *uint32) { rowsB = append(rowsB, *s) })
				r := snap.NewReader(snapA)
				if err := b.LoadSnapshot(r); err != nil || r.Len() != 0 {
					t.Fatalf("cut %d: load: %v, %d bytes left", cut, err, r.Len())
				}
				if got := trackerSnapshot(b); !bytes.Equal(got, snapA) {
					t.Fatalf("cut %d: the restored tracker snapshots differently", cut)
				}
				if b.Len() != a.Len() || !b.Watermark().Equal(a.Watermark()) {
					t.Fatalf("cut %d: restored %d nodes at %v, original %d at %v", cut, b.Len(), b.Watermark(), a.Len(), a.Watermark())
				}
				rowsA = nil
				for i := range steps[cut:] {
					steps[cut+i].apply(a)
					steps[cut+i].apply(b)
					if len(rowsA) != len(rowsB) {
						t.Fatalf("cut %d, step %d after it: %d rows from the original, %d from the restored", cut, i, len(rowsA), len(rowsB))
					}
				}
				if !reflect.DeepEqual(rowsA, rowsB) {
					for i := range rowsA {
						if !reflect.DeepEqual(rowsA[i], rowsB[i]) {
							t.Fatalf("cut %d: row %d differs:\noriginal %+v\nrestored %+v", cut, i, rowsA[i], rowsB[i])
						}
					}
				}
				t.Logf("cut %d of %d: %d rows after it", cut, len(steps), len(rowsA))
				if len(rowsA) == 0 {
					t.Fatalf("cut %d: no rows after the cut: the test checks nothing", cut)
				}
				statuses := func(tr *nodeagent.Tracker) map[string]nodeagent.Status {
					m := map[string]nodeagent.Status{}
					tr.Each(func(s *nodeagent.Status) { m[s.NodeID] = *s })
					return m
				}
				if !reflect.DeepEqual(statuses(a), statuses(b)) {
					t.Fatalf("cut %d: final statuses differ", cut)
				}
				if !bytes.Equal(trackerSnapshot(a), trackerSnapshot(b)) {
					t.Fatalf("cut %d: final snapshots differ", cut)
				}
			}
		})
	}
}

func TestSnapshotCorrupt(t *testing.T) {
	opts, steps := fleetSteps(t, func(c *fleet.Config) { c.Rounds = 2 })
	a := nodeagent.New(opts, func(*nodeagent.Status, *uint32) {})
	for i := range steps {
		steps[i].apply(a)
	}
	b := trackerSnapshot(a)
	for n := 0; n < len(b); n += 1 + n/64 {
		tr := nodeagent.New(opts, func(*nodeagent.Status, *uint32) {})
		if err := tr.LoadSnapshot(snap.NewReader(b[:n])); err == nil {
			t.Fatalf("prefix %d of %d loaded", n, len(b))
		}
		if tr.Len() != 0 {
			t.Fatalf("prefix %d: failed load left %d nodes", n, tr.Len())
		}
	}
	// Flipped bytes: an error or a usable tracker, never a panic.
	for i := 0; i < len(b); i += 1 + i/256 {
		c := bytes.Clone(b)
		c[i] ^= 0x41
		tr := nodeagent.New(opts, func(*nodeagent.Status, *uint32) {})
		if tr.LoadSnapshot(snap.NewReader(c)) == nil {
			for j := range steps[len(steps)-50:] {
				steps[len(steps)-50+j].apply(tr)
			}
		}
	}
	tr := nodeagent.New(opts, func(*nodeagent.Status, *uint32) {})
	if err := tr.LoadSnapshot(snap.NewReader([]byte("\x09nodeagent\x07"))); err == nil || errors.Is(err, snap.ErrShort) {
		t.Fatalf("version mismatch: %v", err)
	}
}

// TestRebindGivesTheLastRows checks what a partition rebuilds its tables
// from after a restore: Rebind gives every node that has a row, with the
// place-deciding fields of its last row (gate, score, owning domain,
// version) and the aux word its emit callback stored, and after a
// snapshot is loaded the same fields with words that are 0 again.
func TestRebindGivesTheLastRows(t *testing.T) {
	opts, steps := fleetSteps(t, nil)
	type place struct {
		gate, domain string
		score        float64
		version      uint64
		aux          uint32
	}
	last := map[string]place{}
	words := 0
	tr := nodeagent.New(opts, func(s *nodeagent.Status, aux *uint32) {
		if *aux == 0 {
			words++
			*aux = uint32(words)
		}
		last[s.NodeID] = place{s.Gate, s.OwningDomain, s.AttentionScore, s.Version, *aux}
	})
	gates := map[string]int{}
	for i := range steps {
		steps[i].apply(tr)
	}
	for _, p := range last {
		gates[p.gate]++
	}
	if len(last) == 0 || len(gates) < 2 {
		t.Fatalf("%d nodes with rows, gates %v: the fleet tests too little", len(last), gates)
	}
	rebound := func(tr *nodeagent.Tracker) map[string]place {
		m := map[string]place{}
		tr.Rebind(func(s *nodeagent.Status, aux *uint32) {
			m[s.NodeID] = place{s.Gate, s.OwningDomain, s.AttentionScore, s.Version, *aux}
		})
		return m
	}
	if got := rebound(tr); !reflect.DeepEqual(got, last) {
		t.Fatalf("Rebind of the running tracker:\n got %v\nwant %v", got, last)
	}
	restored := nodeagent.New(opts, func(*nodeagent.Status, *uint32) {})
	if err := restored.LoadSnapshot(snap.NewReader(trackerSnapshot(tr))); err != nil {
		t.Fatal(err)
	}
	for id, p := range last {
		p.aux = 0
		last[id] = p
	}
	if got := rebound(restored); !reflect.DeepEqual(got, last) {
		t.Fatalf("Rebind of the restored tracker:\n got %v\nwant %v", got, last)
	}
	t.Logf("%d nodes, gates %v", len(last), gates)
}
