package joiner

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/joiner/drift"
	"github.com/driftline/driftline/pipeline/joiner/nodeagent"
	"github.com/driftline/driftline/pipeline/readmodel/sink"
	"github.com/driftline/driftline/pipeline/stream"
	"github.com/driftline/driftline/pipeline/stream/snap"
)

// summaryTables is what ClickHouse holds after the flushes: the row of
// highest version per key, as FINAL reads it.
type summaryTables struct {
	counts map[sink.CountKey]sink.Count
	top    map[[2]any]sink.TopSlot
}

// summaryDomains are the owning domains of randomTransitions.
var summaryDomains = []string{"domain-0", "domain-1", "domain-2", "domain-3", "domain-4"}

func newSummaryTables() *summaryTables {
	return &summaryTables{counts: map[sink.CountKey]sink.Count{}, top: map[[2]any]sink.TopSlot{}}
}

// flush flushes the rows of s, as partition p's, and writes them.
func (t *summaryTables) flush(s *summary, p int32) {
	var b sink.Batch
	s.flush(p, &b)
	t.write(&b)
}

func (t *summaryTables) write(b *sink.Batch) {
	for _, c := range b.Counts {
		if old, ok := t.counts[c.Key]; !ok || c.Version >= old.Version {
			t.counts[c.Key] = c
		}
	}
	for _, s := range b.Top {
		k := [2]any{scope{s.PerDomain, s.OwningDomain}, s.Rank}
		if old, ok := t.top[k]; !ok || s.Version >= old.Version {
			t.top[k] = s
		}
	}
}

// ranked returns the ids in the written top of sc, best first.
func (t *summaryTables) ranked(sc scope) []string {
	var slots []sink.TopSlot
	for k, s := range t.top {
		if k[0] == sc && s.ID != "" {
			slots = append(slots, s)
		}
	}
	slices.SortFunc(slots, func(a, b sink.TopSlot) int { return int(a.Rank) - int(b.Rank) })
	out := make([]string, len(slots))
	for i, s := range slots {
		out[i] = s.ID
	}
	return out
}

// truth is the current state of every finding, from which the summary is
// recomputed by brute force.
type truth map[string]drift.Finding

func (tr truth) counts() map[sink.CountKey]uint64 {
	out := map[sink.CountKey]uint64{}
	for _, f := range tr {
		out[countKey(&f)]++
	}
	return out
}

func (tr truth) top(sc scope) []string {
	var es []topEntry
	for id, f := range tr {
		if f.Status == contract.StatusOpen && (!sc.perDomain || f.OwningDomain == sc.domain) {
			es = append(es, topEntry{f.AttentionScore, id})
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

// auxWords stands for the aux words a partition's engine keeps per
// finding (classify.Emit): zero at first, and new ones after a restore.
type auxWords map[string]*uint32

func (a auxWords) of(id string) *uint32 {
	w := a[id]
	if w == nil {
		w = new(uint32)
		a[id] = w
	}
	return w
}

// randomTransitions returns a deterministic random sequence of finding
// transitions over ids findings: opens, resolves, reopens, retries
// (score changes) and owner changes (group changes).
func randomTransitions(seed uint64, ids, n int) []drift.Finding {
	r := rand.New(rand.NewPCG(seed, 1))
	state := map[string]*drift.Finding{}
	var out []drift.Finding
	at := uint64(1_000_000)
	for range n {
		at += uint64(r.IntN(3)) // equal event times happen
		k := drift.Class(r.IntN(int(drift.NumClasses)))
		id := drift.EvidenceID(k, fmt.Sprintf("maas/n%d", r.IntN(ids)))
		f := state[id]
		if f == nil {
			p := drift.PolicyOf(k)
			f = &drift.Finding{EvidenceID: id, Class: k, Severity: p.Severity, Posture: p.Posture,
				OwningDomain: fmt.Sprintf("domain-%d", r.IntN(5)), ProductID: "p", Provider: "maas",
				Status: contract.StatusOpen, Transition: contract.TransitionOpened}
			state[id] = f
		} else {
			switch {
			case f.Status == contract.StatusResolved:
				f.Status, f.RetryCount, f.Transition = contract.StatusOpen, 0, contract.TransitionReopened
			case r.IntN(3) == 0:
				f.Status, f.Transition = contract.StatusResolved, contract.TransitionResolved
			case r.IntN(4) == 0:
				f.OwningDomain, f.Transition = fmt.Sprintf("domain-%d", r.IntN(5)), contract.TransitionUpdated
			default:
				f.RetryCount++
				f.Transition = contract.TransitionUpdated
			}
		}
		f.Version = max(f.Version+1, at)
		f.AttentionScore = drift.AttentionScore(k, f.Status, f.RetryCount)
		out = append(out, *f)
	}
	return out
}

func checkSummary(t *testing.T, step int, tab *summaryTables, tr truth) {
	t.Helper()
	want := tr.counts()
	for k, n := range want {
		if got := tab.counts[k].Findings; got != n {
			t.Fatalf("step %d: count %+v = %d, want %d", step, k, got, n)
		}
	}
	for k, c := range tab.counts {
		if c.Findings != want[k] {
			t.Fatalf("step %d: count %+v = %d, want %d", step, k, c.Findings, want[k])
		}
	}
	scopes := []scope{global}
	for _, d := range summaryDomains {
		scopes = append(scopes, scope{true, d})
	}
	for _, sc := range scopes {
		if got, want := tab.ranked(sc), tr.top(sc); !slices.Equal(got, want) {
			t.Fatalf("step %d: top %+v:\n got %v\nwant %v", step, sc, got, want)
		}
	}
}

// TestSummaryMatchesBruteForce flushes a summary at random points of a
// random transition stream and checks that the written rows, read as
// FINAL would, equal the counts and tops recomputed from the findings.
func TestSummaryMatchesBruteForce(t *testing.T) {
	for seed := range uint64(4) {
		ts := randomTransitions(seed, 600, 20000)
		r := rand.New(rand.NewPCG(seed, 2))
		s, tab, tr := newSummary(), newSummaryTables(), truth{}
		aux := auxWords{}
		for i := range ts {
			if seed%2 == 0 {
				s.apply(&ts[i], aux.of(ts[i].EvidenceID))
			} else {
				s.apply(&ts[i], nil) // found by evidence id every time
			}
			tr[ts[i].EvidenceID] = ts[i]
			if r.IntN(200) == 0 || i == len(ts)-1 {
				tab.flush(s, 3)
				checkSummary(t, i, tab, tr)
			}
		}
	}
}

// TestSummaryReplayWritesSameRows replays a stream with other flush points
// into a fresh summary over the tables a first run left, as a crash
// between a write and the offset commit does, and checks the tables end
// equal to the truth (no stale row outranks a newer one).
func TestSummaryReplayWritesSameRows(t *testing.T) {
	ts := randomTransitions(7, 400, 10000)
	tab, tr := newSummaryTables(), truth{}
	// First owner: flushes every 97 transitions, commits up to 5000, and
	// has written up to 7000 when it crashes.
	first, firstAux := newSummary(), auxWords{}
	for i := range ts[:7000] {
		first.apply(&ts[i], firstAux.of(ts[i].EvidenceID))
		if i%97 == 0 {
			tab.flush(first, 0)
		}
	}
	// Next owner: restores silently up to 5000, then flushes every 61.
	next, nextAux := newSummary(), auxWords{}
	for i := range ts[:5000] {
		next.apply(&ts[i], nextAux.of(ts[i].EvidenceID))
	}
	for i := range ts {
		tr[ts[i].EvidenceID] = ts[i]
		if i < 5000 {
			continue
		}
		next.apply(&ts[i], nextAux.of(ts[i].EvidenceID))
		if i%61 == 0 || i == len(ts)-1 {
			tab.flush(next, 0)
		}
	}
	checkSummary(t, len(ts), tab, tr)
}

// TestSummarySnapshot: a summary restored from a snapshot (a checkpoint)
// writes the same tables as the one that kept running.
func TestSummarySnapshot(t *testing.T) {
	ts := randomTransitions(11, 400, 8000)
	tab, tr := newSummaryTables(), truth{}
	first, firstAux := newSummary(), auxWords{}
	for i := range ts[:5000] {
		first.apply(&ts[i], firstAux.of(ts[i].EvidenceID))
		tr[ts[i].EvidenceID] = ts[i]
		if i%97 == 0 {
			tab.flush(first, 0)
		}
	}
	var w snap.Writer
	first.appendSnapshot(&w)
	next := newSummary()
	if err := next.loadSnapshot(snap.NewReader(w.B)); err != nil {
		t.Fatal(err)
	}
	nextAux := auxWords{} // a restored engine's words are 0
	for i := range ts[5000:] {
		f := &ts[5000+i]
		next.apply(f, nextAux.of(f.EvidenceID))
		tr[f.EvidenceID] = *f
		if i%61 == 0 || 5000+i == len(ts)-1 {
			tab.flush(next, 0)
		}
	}
	checkSummary(t, len(ts), tab, tr)
	if err := newSummary().loadSnapshot(snap.NewReader(w.B[:len(w.B)/2])); err == nil {
		t.Fatal("truncated snapshot loaded")
	}
}

// checkRounds applies the changes of values (n of them, values(i) the
// i-th) to a partition's output through add, seals its rounds at random
// points, and checks every round's rows (picked by rows): one row per key
// that changed in the round, holding its last value. extra checks more of
// a round's batch, given its changes.
func checkRounds[R any](t *testing.T, seed uint64, n int, value func(int) R, key func(*R) string,
	add func(*partition, *R, *uint32), rows func(*sink.Batch) []R, extra func(*sink.Batch, []R)) {
	t.Helper()
	j, part := benchJoiner(t)
	aux := auxWords{}
	r := rand.New(rand.NewPCG(seed, 2))
	var round []R
	check := func(b *sink.Batch) {
		t.Helper()
		last := map[string]R{}
		for i := range round {
			last[key(&round[i])] = round[i]
		}
		got := rows(b)
		if len(got) != len(last) {
			t.Fatalf("%d changes of %d keys: %d rows", len(round), len(last), len(got))
		}
		for i := range got {
			if want := last[key(&got[i])]; !reflect.DeepEqual(got[i], want) {
				t.Fatalf("row of %s:\n got %+v\nwant %+v", key(&got[i]), got[i], want)
			}
		}
		if extra != nil {
			extra(b, round)
		}
		round = round[:0]
	}
	for i := range n {
		v := value(i)
		add(part, &v, aux.of(key(&v)))
		round = append(round, v)
		if r.IntN(500) == 0 {
			check(sealPart(j, part, &batch{}, stream.Round{}, time.Now()))
		}
	}
	check(sealPart(j, part, &batch{}, stream.Round{}, time.Now()))
}

// sealPart seals part into b as seal does, without the checkpoints
// (those due are b.saves), and returns its part of b.
func sealPart(j *Joiner, part *partition, b *batch, r stream.Round, now time.Time) *sink.Batch {
	j.sealPartition(part, b, now)
	out := j.sealing[len(j.sealing)-1].out
	j.sealHeld(b, r, now)
	return out
}

// TestOutputRowsOnePerFinding checks the rows of a partition's rounds
// (sealed at random points of a random transition stream): one current
// row per finding that changed in the round, holding its last state, and
// every transition in the history.
func TestOutputRowsOnePerFinding(t *testing.T) {
	trs := randomTransitions(7, 300, 20_000)
	checkRounds(t, 7, len(trs), func(i int) drift.Finding { return trs[i] },
		func(f *drift.Finding) string { return f.EvidenceID },
		func(p *partition, f *drift.Finding, aux *uint32) { p.out.add(p, f, aux) },
		func(b *sink.Batch) []drift.Finding { return b.Current.All() },
		func(b *sink.Batch, round []drift.Finding) {
			if b.History.Len() != len(round) {
				t.Fatalf("%d transitions: %d history rows", len(round), b.History.Len())
			}
		})
}

// TestOutputNodeRowsOnePerNode is TestOutputRowsOnePerFinding for the
// node-agent rows: one row per node that changed in the round, holding
// its last status.
func TestOutputNodeRowsOnePerNode(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 1))
	checkRounds(t, 9, 20_000, func(i int) nodeagent.Status {
		return nodeagent.Status{NodeID: fmt.Sprintf("node-%d", r.IntN(300)), AttentionScore: float64(i), Version: uint64(i)}
	},
		func(s *nodeagent.Status) string { return s.NodeID },
		func(p *partition, s *nodeagent.Status, aux *uint32) { p.addNode(s, aux) },
		func(b *sink.Batch) []nodeagent.Status { return b.Nodes.All() }, nil)
}

// TestSummaryRefills empties the finding tops from their best end: 600
// open findings, then the best 550 of them resolved one by one. Each top
// holds at most 2 x AttentionSlots findings, so once those are resolved
// the tops must be refilled from the partition's findings to hold the 50
// left.
func TestSummaryRefills(t *testing.T) {
	s, tab, tr, aux := newSummary(), newSummaryTables(), truth{}, auxWords{}
	apply := func(f drift.Finding) {
		s.apply(&f, aux.of(f.EvidenceID))
		tr[f.EvidenceID] = f
	}
	const findings = 600
	p := drift.PolicyOf(drift.Orphan)
	for i := range findings {
		apply(drift.Finding{EvidenceID: drift.EvidenceID(drift.Orphan, fmt.Sprintf("maas/n%03d", i)), Class: drift.Orphan,
			Severity: p.Severity, Posture: p.Posture, OwningDomain: summaryDomains[i%2], ProductID: "p", Provider: "maas",
			Status: contract.StatusOpen, Transition: contract.TransitionOpened, AttentionScore: float64(i + 1), Version: uint64(i + 1)})
	}
	tab.flush(s, 0)
	checkSummary(t, 0, tab, tr)
	for i := findings - 1; i >= 50; i-- {
		f := tr[drift.EvidenceID(drift.Orphan, fmt.Sprintf("maas/n%03d", i))]
		f.Status, f.Transition, f.Version = contract.StatusResolved, contract.TransitionResolved, f.Version+findings
		apply(f)
		if i%37 == 0 {
			tab.flush(s, 0)
			checkSummary(t, i, tab, tr)
		}
	}
	tab.flush(s, 0)
	checkSummary(t, findings, tab, tr)
	if got := tab.ranked(global); len(got) != 50 || got[0] != drift.EvidenceID(drift.Orphan, "maas/n049") {
		t.Fatalf("global top after the best were resolved: %v", got)
	}
}
