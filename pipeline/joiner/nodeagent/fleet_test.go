package nodeagent_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/driftline/driftline/internal/fleet"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/joiner/nodeagent"
)

// run drives one tracker per partition with a generated fleet the way the
// joiner does: every event goes to the partition its key hashes to (scan
// markers to every partition), moves that partition's event time, and
// the partition's tracker advances to max event time minus the allowed
// lateness after each event. Records and heartbeats are applied; exact
// redeliveries are applied too (the tracker must be idempotent under
// them even without the joiner's dedupe).
func run(t *testing.T, g *fleet.Generator, parts int32) (rows []nodeagent.Status, trackers []*nodeagent.Tracker) {
	t.Helper()
	cfg := g.Config()
	opts := nodeagent.DefaultOptions()
	opts.DisconnectedAfter, opts.HostWindow = cfg.Windows.Staleness, cfg.Windows.Staleness
	lastVersion := map[string]uint64{}
	maxAt := make([]time.Time, parts)
	for p := range parts {
		trackers = append(trackers, nodeagent.New(opts, func(s *nodeagent.Status, _ *uint32) {
			if s.Version <= lastVersion[s.NodeID] {
				t.Fatalf("node %s: version %d after %d", s.NodeID, s.Version, lastVersion[s.NodeID])
			}
			lastVersion[s.NodeID] = s.Version
			if got := contract.Partition([]byte(contract.NodeKey(s.NodeID)), parts); got != p {
				t.Fatalf("node %s emitted by partition %d, owned by %d", s.NodeID, p, got)
			}
			rows = append(rows, *s)
		}))
	}
	v := contract.Validator{Environment: cfg.Environment}
	err := g.Emit(func(e *fleet.Event) error {
		switch e.Type {
		case contract.TypePlatformRecord, contract.TypeProviderObservation, contract.TypeScanCompleted, contract.TypeHeartbeat:
		default:
			return nil // not on the joiner's co-partitioned topics
		}
		env, payload, verr := v.DecodeEvent(e.Line)
		if verr != nil {
			t.Fatalf("decode: %v", verr)
		}
		at := env.OccurredAt.UTC()
		first, last := contract.Partition(e.Key, parts), contract.Partition(e.Key, parts)
		if e.Type == contract.TypeScanCompleted {
			first, last = 0, parts-1
		}
		for p := first; p <= last; p++ {
			tr := trackers[p]
			switch pl := payload.(type) {
			case *contract.PlatformRecord:
				tr.ApplyRecord(pl, at)
			case *contract.Heartbeat:
				tr.ApplyHeartbeat(pl, at, env.CorrelationID)
			}
			if at.After(maxAt[p]) {
				maxAt[p] = at
			}
			tr.Advance(maxAt[p].Add(-cfg.Windows.AllowedLateness))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return rows, trackers
}

// final returns the current status of every node, keyed by node_id.
func final(trackers []*nodeagent.Tracker) map[string]nodeagent.Status {
	out := map[string]nodeagent.Status{}
	for _, tr := range trackers {
		tr.Each(func(s *nodeagent.Status) { out[s.NodeID] = *s })
	}
	return out
}

func TestFleetTruth(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*fleet.Config)
	}{
		{"default", func(*fleet.Config) {}},
		{"one round", func(c *fleet.Config) { c.Rounds = 1 }},
		{"five rounds", func(c *fleet.Config) { c.Rounds = 5 }},
		// 9-minute rounds: every heartbeat comes after a gap that makes
		// the node RETURNING, and silence crosses DELAYED and AUTONOMOUS
		// between rounds.
		{"sparse heartbeats", func(c *fleet.Config) { c.RoundInterval = 9 * time.Minute }},
		{"seed 7", func(c *fleet.Config) { c.Seed = 7 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := fleet.DefaultConfig()
			tc.edit(&cfg)
			g, err := fleet.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			truth := g.Truth()
			rows, trackers := run(t, g, 6)
			got := final(trackers)
			if len(got) != len(truth.Nodes.Statuses) {
				t.Errorf("%d nodes have a status, truth has %d", len(got), len(truth.Nodes.Statuses))
			}
			findings := map[string]fleet.NodeFinding{}
			for _, f := range truth.Nodes.Nodes {
				findings[f.NodeID] = f
			}
			gates := map[string]int{}
			for _, want := range truth.Nodes.Statuses {
				s, ok := got[want.NodeID]
				if !ok {
					t.Errorf("node %s (%s): no status", want.NodeID, want.Kind)
					continue
				}
				gates[s.Gate]++
				gotNS := fleet.NodeStatus{NodeID: s.NodeID, Kind: want.Kind, State: s.State, Reason: s.Reason, Gate: s.Gate,
					Mode: s.ConnectivityMode, HostFingerprints: s.HostFingerprints, IdentityMismatch: s.IdentityMismatch}
				if gotNS != want {
					t.Errorf("node %s:\n got  %+v\n want %+v", want.NodeID, gotNS, want)
				}
				tr := trackers[contract.Partition([]byte(contract.NodeKey(s.NodeID)), 6)]
				if mm, reason := tr.IdentityMismatch(s.NodeID); mm != want.IdentityMismatch || (mm && reason != want.Reason) {
					t.Errorf("node %s: IdentityMismatch = %v %q, want %v", s.NodeID, mm, reason, want.IdentityMismatch)
				}
				if f, ok := findings[s.NodeID]; ok {
					if s.ObservedAgentVersion != f.ObservedAgentVersion || s.ExpectedAgentVersion != f.ExpectedAgentVersion {
						t.Errorf("node %s: agent versions %q/%q, want %q/%q", s.NodeID, s.ObservedAgentVersion,
							s.ExpectedAgentVersion, f.ObservedAgentVersion, f.ExpectedAgentVersion)
					}
					if (f.Classification == string(contract.ClassIdentity)) != s.IdentityMismatch {
						t.Errorf("node %s: identity mismatch %v, truth classification %q", s.NodeID, s.IdentityMismatch, f.Classification)
					}
				}
				// Ordering of the attention queue: identity first.
				if s.IdentityMismatch && s.AttentionScore < 1500 || !s.IdentityMismatch && s.AttentionScore >= 1000 {
					t.Errorf("node %s: attention score %v (identity %v)", s.NodeID, s.AttentionScore, s.IdentityMismatch)
				}
			}
			t.Logf("%d nodes, %d status rows, gates %v", len(got), len(rows), gates)
		})
	}
}

func TestFleetDeterminism(t *testing.T) {
	g, err := fleet.New(fleet.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	a, _ := run(t, g, 6)
	b, _ := run(t, g, 6)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("two replays of the same events emitted different Status sequences (%d and %d rows)", len(a), len(b))
	}
	// Partitioning changes when the watermark passes deadlines, never
	// where each node ends.
	_, one := run(t, g, 1)
	_, six := run(t, g, 6)
	f1, f6 := final(one), final(six)
	for id, s := range f1 {
		o := f6[id]
		s.Version, o.Version = 0, 0
		if !reflect.DeepEqual(s, o) {
			t.Errorf("node %s: 1 partition %+v\n6 partitions %+v", id, s, o)
		}
	}
}
