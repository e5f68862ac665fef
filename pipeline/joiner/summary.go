package joiner

import (
	"container/heap"
	"slices"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/joiner/drift"
	"github.com/driftline/driftline/pipeline/readmodel/sink"
)

// summary is a partition's share of the small read models: finding counts
// per group (finding_counts) and the open findings of highest attention,
// over all domains and per owning domain (attention_top). It is kept from
// the finding transitions the partition applies, during a restore too, so
// a restored partition holds the same summary as its previous owner.
//
// Every row it writes is an absolute value stamped with ver, which grows
// with every transition applied (and never falls below a transition's own
// version, which follows event time): the state at a log position, and so
// every row written for it, is the same however often the position is
// replayed, and a later position always writes a higher version.
type summary struct {
	ver    uint64
	groups []countGroup
	index  map[sink.CountKey]int32
	// findings finds a finding's slot (its group, score and row of the
	// round) by evidence id: for its first transition, and its first
	// after a restore; the engine's word per finding keeps the slot's
	// number for the later ones (see apply).
	findings map[string]int32
	slots    []findingSlot
	ranking
	// all makes the next flush write every group and top: a fresh or
	// restored partition rewrites its whole summary once, which also fills
	// the tables for findings written before they existed.
	all bool
}

// scope is what a top ranks: all open findings, or those of one domain.
type scope struct {
	perDomain bool
	domain    string
}

var global = scope{}

type countGroup struct {
	key   sink.CountKey
	n     uint64
	dirty bool
	dtop  *top // the top of the group's owning domain, once looked up
}

type findingSlot struct {
	group int32
	score float64
	at    rowSlot // the finding's current row of the round (output.add)
}

func newSummary() *summary {
	return &summary{
		index:    make(map[sink.CountKey]int32),
		findings: make(map[string]int32),
		ranking:  newRanking(),
		all:      true,
	}
}

func countKey(f *drift.Finding) sink.CountKey {
	return sink.CountKey{
		OwningDomain:   f.OwningDomain,
		Classification: f.Class.String(),
		Severity:       string(f.Severity),
		Status:         string(f.Status),
		Posture:        string(f.Posture),
		ProductID:      f.ProductID,
		ResourceFamily: f.ResourceFamily,
		Provider:       f.Provider,
		DomainID:       f.DomainID,
	}
}

func (s *summary) group(k sink.CountKey) int32 {
	if g, ok := s.index[k]; ok {
		return g
	}
	g := int32(len(s.groups))
	s.groups = append(s.groups, countGroup{key: k})
	s.index[k] = g
	return g
}

func (s *summary) open(g int32) bool { return s.groups[g].key.Status == string(contract.StatusOpen) }

// domainTop returns the top of group g's owning domain.
func (s *summary) domainTop(g int32) *top {
	cg := &s.groups[g]
	if cg.dtop == nil {
		cg.dtop = s.top(scope{true, cg.key.OwningDomain})
	}
	return cg.dtop
}

// apply moves one finding to the group and score of its transition and
// returns its slot. aux, when not nil, is the finding's word in the
// partition's engine: it keeps the slot's number, so that later
// transitions find the slot without a lookup by evidence id (the engine
// and the summary of a partition are created and restored together).
func (s *summary) apply(f *drift.Finding, aux *uint32) *findingSlot {
	s.ver = max(s.ver+1, f.Version)
	var sl *findingSlot
	if aux != nil && *aux != 0 {
		sl = &s.slots[*aux-1]
	} else {
		var i int32
		i, sl = s.slot(f.EvidenceID)
		if aux != nil {
			*aux = uint32(i) + 1
		}
	}
	had := sl.group >= 0
	// Most transitions keep the finding in its group (a retry, a new
	// score): comparing the key with the group's (strings mostly
	// interned, so compared by pointer) is cheaper than hashing it.
	k := countKey(f)
	g := sl.group
	if !had || s.groups[g].key != k {
		g = s.group(k)
	}
	score := f.AttentionScore
	if had && sl.group == g && sl.score == score {
		return sl
	}
	if had {
		s.groups[sl.group].n--
		s.groups[sl.group].dirty = true
		if s.open(sl.group) && sl.score > 0 {
			e := topEntry{sl.score, f.EvidenceID}
			s.global().remove(e)
			s.domainTop(sl.group).remove(e)
		}
	}
	sl.group, sl.score = g, score
	s.groups[g].n++
	s.groups[g].dirty = true
	// A suppressed finding scores 0 and leaves the tops (docs/actions.md).
	if s.open(g) && score > 0 {
		e := topEntry{score, f.EvidenceID}
		s.global().add(e)
		s.domainTop(g).add(e)
	}
	return sl
}

// slot returns the number and the slot of the finding id, a new one
// (group -1) if the summary has none. The pointer is valid until the next
// call.
func (s *summary) slot(id string) (int32, *findingSlot) {
	i, ok := s.findings[id]
	if !ok {
		i = int32(len(s.slots))
		s.slots = append(s.slots, findingSlot{group: -1})
		s.findings[id] = i
	}
	return i, &s.slots[i]
}

// flush appends the rows changed since the last flush to b.
func (s *summary) flush(p int32, b *sink.Batch) {
	s.refill()
	for i := range s.groups {
		g := &s.groups[i]
		if g.dirty || s.all {
			b.Counts = append(b.Counts, sink.Count{Partition: p, Key: g.key, Findings: g.n, Version: s.ver})
			g.dirty = false
		}
	}
	b.Top = s.ranking.flush(p, s.ver, s.all, b.Top)
	s.all = false
}

// refill rebuilds, in one pass over the partition's findings, every top
// that lost entries below AttentionSlots while its scope holds more.
func (s *summary) refill() {
	s.ranking.refill(func(offer func(string, topEntry)) {
		for id, i := range s.findings {
			f := &s.slots[i]
			if s.open(f.group) {
				offer(s.groups[f.group].key.OwningDomain, topEntry{f.score, id})
			}
		}
	})
}

// ranking holds the tops of one kind of item a partition ranks by
// attention (its open findings, its nodes), over all domains and per
// owning domain, and writes their slots.
type ranking struct {
	tops map[scope]*top
	gtop *top // tops[global]
}

func newRanking() ranking { return ranking{tops: make(map[scope]*top)} }

// top returns the top of sc, a new empty one if there is none.
func (r *ranking) top(sc scope) *top {
	if sc == global && r.gtop != nil {
		return r.gtop
	}
	t := r.tops[sc]
	if t == nil {
		t = &top{}
		r.tops[sc] = t
	}
	if sc == global {
		r.gtop = t
	}
	return t
}

// global returns the top over all domains.
func (r *ranking) global() *top { return r.top(global) }

// flush appends to slots the slots of partition p's tops that changed
// since the last flush (of every top when all), stamped ver, and returns
// them.
func (r *ranking) flush(p int32, ver uint64, all bool, slots []sink.TopSlot) []sink.TopSlot {
	for sc, t := range r.tops {
		if !t.dirty && !all {
			continue
		}
		n := min(len(t.entries), sink.AttentionSlots)
		for i := range max(n, t.written) {
			slot := sink.TopSlot{PerDomain: sc.perDomain, OwningDomain: sc.domain, Partition: p, Rank: uint16(i), Version: ver}
			if i < n {
				slot.ID, slot.Score = t.entries[i].id, t.entries[i].score
			}
			slots = append(slots, slot)
		}
		t.written, t.dirty = n, false
	}
	return slots
}

// refill rebuilds every top that lost entries below AttentionSlots
// while its scope holds more, if any: each calls offer with the owning
// domain and the entry of every item the tops rank.
func (r *ranking) refill(each func(offer func(domain string, e topEntry))) {
	var stale map[scope]*topHeap
	for sc, t := range r.tops {
		if len(t.entries) < sink.AttentionSlots && len(t.entries) < t.open {
			if stale == nil {
				stale = make(map[scope]*topHeap)
			}
			stale[sc] = &topHeap{}
		}
	}
	if stale == nil {
		return
	}
	all := stale[global]
	each(func(domain string, e topEntry) {
		if all != nil {
			all.offer(e)
		}
		if h := stale[scope{true, domain}]; h != nil {
			h.offer(e)
		}
	})
	for sc, h := range stale {
		t := r.tops[sc]
		t.entries = h.sorted()
		t.dirty = true
	}
}

// topEntry ranks an open finding: higher score first, then evidence id.
type topEntry struct {
	score float64
	id    string
}

func (a topEntry) before(b topEntry) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	return a.id < b.id
}

// topCap bounds a top: twice the slots written, so that findings leaving
// the top rarely force a refill.
const topCap = 2 * sink.AttentionSlots

// top holds the best open findings of one scope in rank order: always the
// first len(entries) of the scope's open findings (a prefix), at most
// topCap of them. open counts the scope's open findings.
type top struct {
	entries []topEntry
	open    int
	written int  // slots written at the last flush
	dirty   bool // a written slot changed
}

func (t *top) search(e topEntry) int {
	i, _ := slices.BinarySearchFunc(t.entries, e, func(a, b topEntry) int {
		switch {
		case a.before(b):
			return -1
		case b.before(a):
			return 1
		}
		return 0
	})
	return i
}

func (t *top) add(e topEntry) {
	// The prefix stays a prefix if e ranks before its last entry, or if
	// the prefix held every open finding of the scope.
	complete := len(t.entries) == t.open
	t.open++
	if !complete && (len(t.entries) == 0 || !e.before(t.entries[len(t.entries)-1])) {
		return
	}
	i := t.search(e)
	t.entries = slices.Insert(t.entries, i, e)
	if len(t.entries) > topCap {
		t.entries = t.entries[:topCap]
	}
	if i < sink.AttentionSlots {
		t.dirty = true
	}
}

func (t *top) remove(e topEntry) {
	t.open--
	i := t.search(e)
	if i < len(t.entries) && t.entries[i] == e {
		t.entries = slices.Delete(t.entries, i, i+1)
		if i < sink.AttentionSlots {
			t.dirty = true
		}
	}
}

// topHeap keeps the topCap best entries offered, the worst on top.
type topHeap []topEntry

func (h topHeap) Len() int           { return len(h) }
func (h topHeap) Less(i, j int) bool { return h[j].before(h[i]) }
func (h topHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *topHeap) Push(x any)        { *h = append(*h, x.(topEntry)) }
func (h *topHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

func (h *topHeap) offer(e topEntry) {
	if len(*h) < topCap {
		heap.Push(h, e)
		return
	}
	if e.before((*h)[0]) {
		(*h)[0] = e
		heap.Fix(h, 0)
	}
}

// sorted returns the entries best first.
func (h *topHeap) sorted() []topEntry {
	out := slices.Clone(*h)
	slices.SortFunc(out, func(a, b topEntry) int {
		if a.before(b) {
			return -1
		}
		return 1
	})
	return out
}
