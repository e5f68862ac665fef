package joiner

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/joiner/nodeagent"
	"github.com/driftline/driftline/pipeline/readmodel/sink"
	"github.com/driftline/driftline/pipeline/stream/snap"
)

// randomNodeRows returns a deterministic random sequence of node rows over
// ids nodes, as a tracker emits them: gates that start and stop passing,
// new scores (often equal ones), owners that change, and refreshes that
// change nothing the ranking reads. Versions grow per node.
func randomNodeRows(seed uint64, ids, n int) []nodeagent.Status {
	r := rand.New(rand.NewPCG(seed, 3))
	state := map[string]*nodeagent.Status{}
	var out []nodeagent.Status
	at := uint64(1_000_000)
	for range n {
		at += uint64(r.IntN(3))
		id := fmt.Sprintf("node-%d", r.IntN(ids))
		s := state[id]
		if s == nil {
			s = &nodeagent.Status{NodeID: id, OwningDomain: summaryDomains[r.IntN(len(summaryDomains))], Gate: string(contract.GatePass)}
			state[id] = s
		}
		switch r.IntN(6) {
		case 0:
			s.Gate = string(contract.Gates[r.IntN(len(contract.Gates))])
		case 1:
			s.AttentionScore = float64(r.IntN(40)) // ties happen
		case 2:
			s.OwningDomain = summaryDomains[r.IntN(len(summaryDomains))]
		default: // a refresh of the node's figures
			s.RTTMs = float64(r.IntN(100))
		}
		s.Version = max(s.Version+1, at)
		out = append(out, *s)
	}
	return out
}

// nodeTruth is the last row of every node, from which the node tops are
// recomputed by brute force.
type nodeTruth map[string]nodeagent.Status

func (tr nodeTruth) top(sc scope) []string {
	var es []topEntry
	for id, s := range tr {
		if s.Gate != string(contract.GatePass) && (!sc.perDomain || s.OwningDomain == sc.domain) {
			es = append(es, topEntry{s.AttentionScore, id})
		}
	}
	slices.SortFunc(es, func(a, b topEntry) int {
		if a.before(b) {
			return -1
		}
		return 1
	})
	out := []string{}
	for _, e := range es[:min(len(es), sink.AttentionSlots)] {
		out = append(out, e.id)
	}
	return out
}

// flushNodes flushes the node top rows of r, as partition p's, and
// writes them.
func (t *summaryTables) flushNodes(r *nodeRanking, p int32) {
	var b sink.Batch
	r.flush(p, &b)
	if len(b.Top) != 0 {
		panic("node rows in attention_top")
	}
	b.Top, b.NodeTop = b.NodeTop, nil
	t.write(&b)
}

func checkNodeTops(t *testing.T, step int, tab *summaryTables, tr nodeTruth) {
	t.Helper()
	ranked := 0
	for _, sc := range append([]scope{global}, domainScopes()...) {
		got, want := tab.ranked(sc), tr.top(sc)
		if !slices.Equal(got, want) {
			t.Fatalf("step %d: node top %+v:\n got %v\nwant %v", step, sc, got, want)
		}
		ranked += len(want)
	}
	if ranked == 0 {
		t.Fatalf("step %d: no node ranked: the check checks nothing", step)
	}
}

func domainScopes() []scope {
	var out []scope
	for _, d := range summaryDomains {
		out = append(out, scope{true, d})
	}
	return out
}

// TestNodeRankingMatchesBruteForce flushes a node ranking at random points
// of a random row stream and checks that the written slots, read as FINAL
// would, equal the tops recomputed from the nodes' last rows. From 300
// to 3,300 nodes over five domains keep the tops below and above
// AttentionSlots and beyond what a top holds (TestNodeRankingRefills
// empties them).
func TestNodeRankingMatchesBruteForce(t *testing.T) {
	for seed := range uint64(4) {
		rows := randomNodeRows(seed, 300+1000*int(seed), 30000)
		r := rand.New(rand.NewPCG(seed, 4))
		nr, tab, tr := newNodeRanking(), newSummaryTables(), nodeTruth{}
		aux := auxWords{}
		for i := range rows {
			nr.apply(&rows[i], aux.of(rows[i].NodeID))
			tr[rows[i].NodeID] = rows[i]
			if r.IntN(200) == 0 || i == len(rows)-1 {
				tab.flushNodes(nr, 3)
				checkNodeTops(t, i, tab, tr)
			}
		}
	}
}

// TestNodeRankingReplayWritesSameRows replays a stream with other flush
// points into a fresh ranking over the tables a first run left, as a
// crash between a write and the offset commit does, and checks the tables
// end equal to the truth (no stale slot outranks a newer one).
func TestNodeRankingReplayWritesSameRows(t *testing.T) {
	rows := randomNodeRows(7, 400, 10000)
	tab, tr := newSummaryTables(), nodeTruth{}
	first, firstAux := newNodeRanking(), auxWords{}
	for i := range rows[:7000] {
		first.apply(&rows[i], firstAux.of(rows[i].NodeID))
		if i%97 == 0 {
			tab.flushNodes(first, 0)
		}
	}
	next, nextAux := newNodeRanking(), auxWords{}
	for i := range rows {
		tr[rows[i].NodeID] = rows[i]
		next.apply(&rows[i], nextAux.of(rows[i].NodeID))
		if i >= 5000 && (i%61 == 0 || i == len(rows)-1) {
			tab.flushNodes(next, 0)
		}
	}
	checkNodeTops(t, len(rows), tab, tr)
}

// TestNodeRankingRebuild: a ranking rebuilt from a restored tracker's
// nodes (their last rows, with aux words 0 again) and the version saved
// with the checkpoint writes the same tables as the one that kept
// running, from its first flush on. Rebuilt without that version (the
// checkpoint of a joiner that kept no node tops, and so wrote none), it
// writes them too.
func TestNodeRankingRebuild(t *testing.T) {
	for _, saved := range []bool{true, false} {
		rows := randomNodeRows(11, 400, 8000)
		tab, tr := newSummaryTables(), nodeTruth{}
		first, firstAux := newNodeRanking(), auxWords{}
		for i := range rows[:5000] {
			first.apply(&rows[i], firstAux.of(rows[i].NodeID))
			tr[rows[i].NodeID] = rows[i]
			if saved && i%97 == 0 {
				tab.flushNodes(first, 0)
			}
		}
		var ver uint64
		if saved {
			ver = first.ver
		}
		next, nextAux := newNodeRanking(), auxWords{}
		next.rebuild(func(fn func(*nodeagent.Status, *uint32)) {
			for id, s := range tr {
				fn(&s, nextAux.of(id))
			}
		}, ver)
		if saved && next.ver != first.ver {
			t.Fatalf("rebuilt at version %d, saved %d", next.ver, first.ver)
		}
		tab.flushNodes(next, 0)
		checkNodeTops(t, 5000, tab, tr)
		for i := range rows[5000:] {
			s := &rows[5000+i]
			next.apply(s, nextAux.of(s.NodeID))
			tr[s.NodeID] = *s
			if i%61 == 0 || 5000+i == len(rows)-1 {
				tab.flushNodes(next, 0)
			}
		}
		checkNodeTops(t, len(rows), tab, tr)
	}
}

// TestNodeRankingRefills empties the tops from their best end: 600 nodes
// that do not pass, then the best 550 of them passing one by one. Each
// top holds at most 2 x AttentionSlots nodes, so once those passed the
// tops must be refilled from the partition's nodes to hold the 50 left.
func TestNodeRankingRefills(t *testing.T) {
	nr, tab, tr, aux := newNodeRanking(), newSummaryTables(), nodeTruth{}, auxWords{}
	apply := func(s nodeagent.Status) {
		nr.apply(&s, aux.of(s.NodeID))
		tr[s.NodeID] = s
	}
	const nodes = 600
	for i := range nodes {
		apply(nodeagent.Status{NodeID: fmt.Sprintf("node-%03d", i), OwningDomain: summaryDomains[i%2],
			Gate: string(contract.GateRetry), AttentionScore: float64(i), Version: uint64(i + 1)})
	}
	tab.flushNodes(nr, 0)
	checkNodeTops(t, 0, tab, tr)
	for i := nodes - 1; i >= 50; i-- {
		s := tr[fmt.Sprintf("node-%03d", i)]
		s.Gate, s.Version = string(contract.GatePass), s.Version+nodes
		apply(s)
		if i%37 == 0 {
			tab.flushNodes(nr, 0)
			checkNodeTops(t, i, tab, tr)
		}
	}
	tab.flushNodes(nr, 0)
	checkNodeTops(t, nodes, tab, tr)
	if got := tab.ranked(global); len(got) != 50 || got[0] != "node-049" {
		t.Fatalf("global top after the best passed: %v", got)
	}
}

// TestPartitionRestoreKeepsNodeTop applies a generated fleet's records to
// a partition, takes its checkpoint part way, and applies the rest both
// to it and to a partition restored from the checkpoint: their node tops
// fill the same slots, with the same versions, from the first flush after
// the restore on (which also clears every slot past the end of each top,
// since the checkpoint does not say how many the previous owner wrote). A
// checkpoint of the version before 3 (without the top's version) restores
// a top that ranks the same.
func TestPartitionRestoreKeepsNodeTop(t *testing.T) {
	recs := fleetRecords(t, 20_000)
	cut := len(recs) / 2
	j, a := benchJoiner(t)
	for _, r := range recs[:cut] {
		j.apply(a, r)
	}
	blob := a.snapshot()
	// flushed returns the filled slots p flushes, in order, and how many
	// it clears.
	flushed := func(p *partition) ([]sink.TopSlot, int) {
		var b sink.Batch
		p.nodeTop.flush(p.p, &b)
		filled := slices.DeleteFunc(b.NodeTop, func(s sink.TopSlot) bool { return s.ID == "" })
		slices.SortFunc(filled, func(x, y sink.TopSlot) int {
			return strings.Compare(fmt.Sprint(x.PerDomain, x.OwningDomain, x.Rank), fmt.Sprint(y.PerDomain, y.OwningDomain, y.Rank))
		})
		return filled, len(b.NodeTop) - len(filled)
	}
	restore := func(blob []byte) *partition {
		t.Helper()
		b := j.newPartition(0, nil)
		if err := b.loadSnapshot(blob); err != nil {
			t.Fatal(err)
		}
		b.out = &b.live
		return b
	}
	b := restore(blob)
	a.nodeTop.all = true // a restored top writes every slot once, as a fresh one
	got, cleared := flushed(b)
	want, _ := flushed(a)
	if !slices.Equal(got, want) || len(got)+cleared != len(b.nodeTop.tops)*sink.AttentionSlots {
		t.Fatalf("after the restore, %d cleared:\n got %v\nwant %v", cleared, got, want)
	}
	for _, r := range recs[cut:] {
		j.apply(a, r)
		j.apply(b, r)
	}
	got, _ = flushed(b)
	want, _ = flushed(a)
	if !slices.Equal(got, want) {
		t.Fatalf("at the end:\n got %v\nwant %v", got, want)
	}
	ranked := 0
	for _, s := range want {
		if s.ID != "" {
			ranked++
		}
	}
	if ranked == 0 {
		t.Fatal("no node ranked: the fleet tests nothing")
	}

	// Version 2: the same blob without the top's version at its end.
	r := snap.NewReader(blob)
	r.Header("joiner.partition", snapshotVersion)
	v2 := bytes.Clone(blob)
	v2[len(blob)-r.Len()-1] = 2
	v2 = v2[:len(v2)-uvarintLen(a.nodeTop.ver)]
	old, cur := restore(v2), restore(blob)
	if old.nodeTop.ver == 0 || old.nodeTop.ver > cur.nodeTop.ver {
		t.Fatalf("restored from version 2 at %d, from version 3 at %d", old.nodeTop.ver, cur.nodeTop.ver)
	}
	if len(cur.nodeTop.tops) == 0 || len(old.nodeTop.tops) != len(cur.nodeTop.tops) {
		t.Fatalf("restored from version 2 with %d tops, from version 3 with %d", len(old.nodeTop.tops), len(cur.nodeTop.tops))
	}
	for sc, w := range cur.nodeTop.tops {
		if g := old.nodeTop.tops[sc]; g == nil || !slices.Equal(g.entries, w.entries) || g.open != w.open {
			t.Fatalf("restored from version 2: top %+v differs", sc)
		}
	}
}

func uvarintLen(v uint64) int { return len(binary.AppendUvarint(nil, v)) }
