package joiner

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/joiner/drift"
	"github.com/driftline/driftline/pipeline/joiner/nodeagent"
	"github.com/driftline/driftline/pipeline/readmodel/sink"
	"github.com/driftline/driftline/pipeline/stream"
)

// TestRowsHeldWhileBehind checks when a seal writes a partition's
// current rows (its findings' and its nodes'): a round that is behind
// holds them (the next row of a finding or node overwrites its row)
// until CatchUpHold has passed since the last ones were written, or the
// partition is checkpointed, or the round is caught up or final;
// whenever they are written, there is one row per finding and node
// changed since the last ones, its newest. Transitions are written every
// round. Past CatchUpHoldRows held rows, they are written. The
// partition's progress row and summaries wait with the rows:
// consumer_progress never claims a watermark whose rows are not written,
// nor a top a finding drift_evidence does not hold.
func TestRowsHeldWhileBehind(t *testing.T) {
	j, part := benchJoiner(t)
	j.opts.CatchUpHold = 30 * time.Second
	aux := auxWords{}
	nodes, findings := map[string]nodeagent.Status{}, map[string]drift.Finding{}
	transitions, version, opened := 0, uint64(0), map[string]bool{}
	policy := drift.PolicyOf(drift.Orphan)
	change := func(ids ...int) {
		for _, n := range ids {
			version++
			s := nodeagent.Status{NodeID: fmt.Sprintf("node-%d", n), Version: version}
			part.addNode(&s, aux.of(s.NodeID))
			nodes[s.NodeID] = s
			f := drift.Finding{EvidenceID: drift.EvidenceID(drift.Orphan, fmt.Sprintf("maas/node-%d", n)), Class: drift.Orphan,
				Severity: policy.Severity, Posture: policy.Posture, OwningDomain: "domain-0", ProductID: "p", Provider: "maas",
				Status: contract.StatusOpen, Transition: contract.TransitionUpdated, RetryCount: uint32(version), Version: version}
			if !opened[f.EvidenceID] {
				f.Transition, opened[f.EvidenceID] = contract.TransitionOpened, true
			}
			f.AttentionScore = drift.AttentionScore(f.Class, f.Status, f.RetryCount)
			part.out.add(part, &f, aux.of(f.EvidenceID))
			findings[f.EvidenceID] = f
			transitions++
		}
		part.dirty = true // as apply leaves it
	}
	start := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	seal := func(name string, r stream.Round, at time.Duration, checkpoint, written bool) {
		t.Helper()
		b := &batch{}
		if checkpoint {
			b.saves = append(b.saves, save{part: part})
		}
		out := sealPart(j, part, b, r, start.Add(at))
		if out.History.Len() != transitions {
			t.Fatalf("%s: %d transitions written, want %d", name, out.History.Len(), transitions)
		}
		transitions = 0
		gotNodes, gotFindings := out.Nodes.All(), out.Current.All()
		if g, want := testutil.ToFloat64(j.m.held), float64(part.held.len()); g != want {
			t.Fatalf("%s: driftline_joiner_held_rows %v, want %v", name, g, want)
		}
		if !written {
			if part.held.len() == 0 {
				t.Fatalf("%s: nothing held", name)
			}
			if len(gotNodes) != 0 || len(gotFindings) != 0 || len(out.Progress) != 0 || len(out.Top) != 0 || len(out.Counts) != 0 {
				t.Fatalf("%s: %d node rows, %d finding rows, %d progress rows, %d top slots and %d counts written, want them held",
					name, len(gotNodes), len(gotFindings), len(out.Progress), len(out.Top), len(out.Counts))
			}
			return
		}
		if p := min(len(nodes), 1); len(out.Progress) != p || len(out.Counts) < p {
			t.Fatalf("%s: %d progress rows and %d counts written with %d rows, want %d and some", name, len(out.Progress), len(out.Counts), len(nodes), p)
		}
		if len(gotNodes) != len(nodes) || len(gotFindings) != len(findings) {
			t.Fatalf("%s: %d node rows and %d finding rows written, want %d and %d", name, len(gotNodes), len(gotFindings), len(nodes), len(findings))
		}
		for _, s := range gotNodes {
			if !reflect.DeepEqual(s, nodes[s.NodeID]) {
				t.Fatalf("%s: row of %s: got %+v, want %+v", name, s.NodeID, s, nodes[s.NodeID])
			}
		}
		for _, f := range gotFindings {
			if !reflect.DeepEqual(f, findings[f.EvidenceID]) {
				t.Fatalf("%s: row of %s: got %+v, want %+v", name, f.EvidenceID, f, findings[f.EvidenceID])
			}
		}
		clear(nodes)
		clear(findings)
		if part.held.len() != 0 {
			t.Fatalf("%s: %d rows left after the seal", name, part.held.len())
		}
	}
	behind := stream.Round{CatchUp: true, Behind: true}
	part.held.at = start // as if created then
	change(1, 2, 3)
	seal("behind", behind, 10*time.Second, false, false)
	change(1, 2, 1)
	seal("behind again", behind, 20*time.Second, false, false)
	change(2, 4)
	seal("behind, CatchUpHold after the partition's start", behind, 30*time.Second, false, true)
	change(1)
	seal("behind", behind, 31*time.Second, false, false)
	seal("behind, CatchUpHold after the last ones", behind, 60*time.Second, false, true)
	change(5, 5)
	seal("behind, checkpointed", behind, 61*time.Second, true, true)
	change(6)
	seal("behind", behind, 62*time.Second, false, false)
	change(6, 7)
	seal("caught up", stream.Round{CatchUp: true}, 63*time.Second, false, true)
	change(8)
	seal("behind", behind, 64*time.Second, false, false)
	seal("final", stream.Round{Behind: true, Final: true}, 65*time.Second, false, true)
	seal("nothing changed", stream.Round{}, 66*time.Second, false, true)

	j.opts.CatchUpHold = -1
	change(9)
	seal("behind, CatchUpHold negative", behind, 67*time.Second, false, true)

	j.opts.CatchUpHold, j.opts.CatchUpHoldRows = 30*time.Second, 4
	change(10) // a node row and a finding row
	seal("behind, rows under CatchUpHoldRows", behind, 68*time.Second, false, false)
	change(10, 11)
	seal("behind, rows at CatchUpHoldRows", behind, 69*time.Second, false, false)
	change(12)
	seal("behind, rows past CatchUpHoldRows", behind, 70*time.Second, false, true)
}

// TestHeldRowsSurviveACrash applies a generated fleet's records to a
// partition in rounds that are behind, so that its current rows are
// held: they are written with its checkpoint, a third of the way, and
// held again after it until it crashes, two thirds of the way, with rows
// unwritten. A partition restored from the checkpoint replays the
// records after it; the rows it then writes, with those written before
// the crash, leave drift_evidence and node_agent_status (the newest row
// per key) as an uninterrupted partition leaves them.
func TestHeldRowsSurviveACrash(t *testing.T) {
	recs := fleetRecords(t, 20_000)
	cp, crash := len(recs)/3, 2*len(recs)/3
	j, a := benchJoiner(t)
	j.opts.CatchUpHold = time.Hour
	nodes, findings := map[string]nodeagent.Status{}, map[string]drift.Finding{} // the tables, FINAL
	write := func(out *sink.Batch) int {
		for _, s := range out.Nodes.All() {
			if w, ok := nodes[s.NodeID]; !ok || s.Version >= w.Version {
				nodes[s.NodeID] = s
			}
		}
		for _, f := range out.Current.All() {
			if w, ok := findings[f.EvidenceID]; !ok || f.Version >= w.Version {
				findings[f.EvidenceID] = f
			}
		}
		return out.Nodes.Len() + out.Current.Len()
	}
	behind, now := stream.Round{CatchUp: true, Behind: true}, time.Now()
	var blob []byte
	for i, r := range recs[:crash] {
		j.apply(a, r)
		b := &batch{}
		switch {
		case i+1 == cp:
			b.saves = append(b.saves, save{part: a})
		case i%500 != 499:
			continue
		}
		n := write(sealPart(j, a, b, behind, now))
		if i+1 == cp {
			if n == 0 {
				t.Fatal("no rows written with the checkpoint")
			}
			blob = a.snapshot()
		} else if n != 0 {
			t.Fatalf("after %d records: %d rows written while behind", i+1, n)
		}
	}
	if a.held.nodes.Len() == 0 || a.held.current.Len() == 0 {
		t.Fatalf("%d node rows and %d finding rows held when the partition crashed: the test tests little", a.held.nodes.Len(), a.held.current.Len())
	}

	// The restore: the checkpoint, then a silent replay of what was
	// committed after it.
	silent := &output{batch: &sink.Batch{}, m: j.m, emit: false}
	b := j.newPartition(0, silent)
	if err := b.loadSnapshot(blob); err != nil {
		t.Fatal(err)
	}
	b.out = silent
	for _, r := range recs[cp:crash] {
		j.apply(b, r)
	}
	b.out = &b.live
	write(sealPart(j, b, &batch{}, stream.Round{}, now))

	ju, u := benchJoiner(t)
	for _, r := range recs[:crash] {
		ju.apply(u, r)
	}
	wantNodes, wantFindings := u.held.nodes.All(), u.held.current.All()
	if len(nodes) != len(wantNodes) || len(findings) != len(wantFindings) {
		t.Fatalf("the tables hold %d nodes and %d findings after the crash, %d and %d without it", len(nodes), len(findings), len(wantNodes), len(wantFindings))
	}
	for _, w := range wantNodes {
		if got := nodes[w.NodeID]; !reflect.DeepEqual(got, w) {
			t.Fatalf("node %s after the crash:\n got %+v\nwant %+v", w.NodeID, got, w)
		}
	}
	for _, w := range wantFindings {
		if got := findings[w.EvidenceID]; !reflect.DeepEqual(got, w) {
			t.Fatalf("finding %s after the crash:\n got %+v\nwant %+v", w.EvidenceID, got, w)
		}
	}
}
