package joiner

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/driftline/driftline/pipeline/joiner/nodeagent"
	"github.com/driftline/driftline/pipeline/readmodel/sink"
	"github.com/driftline/driftline/pipeline/stream"
)

// TestNodeRowsHeldWhileBehind checks when a seal writes a partition's
// node rows: a round that is behind holds them (the next rows of a node
// overwrite its row) until NodeRowsDelay has passed since the last ones
// were written, or the partition is checkpointed, or the round is
// caught up or final; whenever they are written, there is one row per
// node changed since the last ones, its newest. The partition's progress
// row waits with them: consumer_progress never claims a watermark whose
// node rows are not written.
func TestNodeRowsHeldWhileBehind(t *testing.T) {
	j, part := benchJoiner(t)
	j.opts.NodeRowsDelay = 30 * time.Second
	aux := auxWords{}
	want := map[string]nodeagent.Status{}
	version := uint64(0)
	change := func(nodes ...int) {
		for _, n := range nodes {
			version++
			s := nodeagent.Status{NodeID: fmt.Sprintf("node-%d", n), Version: version}
			part.addNode(&s, aux.of(s.NodeID))
			want[s.NodeID] = s
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
		got := out.Nodes.All()
		if !written {
			if len(got) != 0 || len(out.Progress) != 0 {
				t.Fatalf("%s: %d node rows and %d progress rows written, want them held", name, len(got), len(out.Progress))
			}
			return
		}
		if p := len(want); min(p, 1) != len(out.Progress) {
			t.Fatalf("%s: %d progress rows written with %d node rows, want %d", name, len(out.Progress), p, min(p, 1))
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d node rows written, want %d", name, len(got), len(want))
		}
		for _, s := range got {
			if !reflect.DeepEqual(s, want[s.NodeID]) {
				t.Fatalf("%s: row of %s: got %+v, want %+v", name, s.NodeID, s, want[s.NodeID])
			}
		}
		clear(want)
		if part.nodeRows.Len() != 0 {
			t.Fatalf("%s: %d node rows left after the seal", name, part.nodeRows.Len())
		}
	}
	behind := stream.Round{CatchUp: true, Behind: true}
	part.nodeRowsAt = start // as if created then
	change(1, 2, 3)
	seal("behind", behind, 10*time.Second, false, false)
	change(1, 2, 1)
	seal("behind again", behind, 20*time.Second, false, false)
	change(2, 4)
	seal("behind, NodeRowsDelay after the partition's start", behind, 30*time.Second, false, true)
	change(1)
	seal("behind", behind, 31*time.Second, false, false)
	seal("behind, NodeRowsDelay after the last ones", behind, 60*time.Second, false, true)
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

	j.opts.NodeRowsDelay = -1
	change(9)
	seal("behind, NodeRowsDelay negative", behind, 67*time.Second, false, true)
}

// TestNodeRowsHeldSurviveACrash applies a generated fleet's records to a
// partition in rounds that are behind, so that its node rows are held:
// they are written with its checkpoint, a third of the way, and held
// again after it until it crashes, two thirds of the way, with rows
// unwritten. A partition restored from the checkpoint replays the
// records after it; the node rows it then writes, with those written
// before the crash, leave node_agent_status (the newest row per node) as
// an uninterrupted partition leaves it.
func TestNodeRowsHeldSurviveACrash(t *testing.T) {
	recs := fleetRecords(t, 20_000)
	cp, crash := len(recs)/3, 2*len(recs)/3
	j, a := benchJoiner(t)
	j.opts.NodeRowsDelay = time.Hour
	table := map[string]nodeagent.Status{} // node_agent_status FINAL
	write := func(out *sink.Batch) int {
		for _, s := range out.Nodes.All() {
			if w, ok := table[s.NodeID]; !ok || s.Version >= w.Version {
				table[s.NodeID] = s
			}
		}
		return out.Nodes.Len()
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
				t.Fatal("no node rows written with the checkpoint")
			}
			blob = a.snapshot()
		} else if n != 0 {
			t.Fatalf("after %d records: %d node rows written while behind", i+1, n)
		}
	}
	if a.nodeRows.Len() == 0 {
		t.Fatal("no node rows held when the partition crashed: the test tests nothing")
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
	want := u.nodeRows.All()
	if len(table) != len(want) {
		t.Fatalf("node_agent_status holds %d nodes after the crash, %d without it", len(table), len(want))
	}
	for _, w := range want {
		if got := table[w.NodeID]; !reflect.DeepEqual(got, w) {
			t.Fatalf("node %s after the crash:\n got %+v\nwant %+v", w.NodeID, got, w)
		}
	}
}
