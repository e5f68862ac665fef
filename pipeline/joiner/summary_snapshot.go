package joiner

import (
	"fmt"

	"github.com/driftline/driftline/pipeline/readmodel/sink"
	"github.com/driftline/driftline/pipeline/stream/snap"
)

// appendSnapshot appends the summary's state to w (part of the
// partition's checkpoint: a partition restored from a checkpoint replays
// none of the transitions the summary was built from).
func (s *summary) appendSnapshot(w *snap.Writer) {
	w.Header("joiner.summary", 1)
	w.Uvarint(s.ver)
	w.Uvarint(uint64(len(s.groups)))
	for _, g := range s.groups {
		k := g.key
		for _, v := range [...]string{k.OwningDomain, k.Classification, k.Severity, k.Status, k.Posture, k.ProductID, k.ResourceFamily, k.Provider, k.DomainID} {
			w.String(v)
		}
		w.Uvarint(g.n)
		w.Bool(g.dirty)
	}
	w.Uvarint(uint64(len(s.findings)))
	for id, i := range s.findings {
		f := &s.slots[i]
		w.String(id)
		w.Uvarint(uint64(f.group))
		w.Float64(f.score)
	}
	w.Uvarint(uint64(len(s.tops)))
	for sc, t := range s.tops {
		w.Bool(sc.perDomain)
		w.String(sc.domain)
		w.Uvarint(uint64(len(t.entries)))
		for _, e := range t.entries {
			w.String(e.id)
			w.Float64(e.score)
		}
		w.Uvarint(uint64(t.open))
		w.Uvarint(uint64(t.written))
		w.Bool(t.dirty)
	}
}

// loadSnapshot restores what appendSnapshot wrote into an empty summary.
// The next flush rewrites every row, as after any restore.
func (s *summary) loadSnapshot(r *snap.Reader) error {
	r.Header("joiner.summary", 1)
	s.ver = r.Uvarint()
	ng := r.Count(10)
	for range ng {
		var k sink.CountKey
		for _, v := range [...]*string{&k.OwningDomain, &k.Classification, &k.Severity, &k.Status, &k.Posture, &k.ProductID, &k.ResourceFamily, &k.Provider, &k.DomainID} {
			*v = r.String()
		}
		g := s.group(k)
		s.groups[g].n, s.groups[g].dirty = r.Uvarint(), r.Bool()
	}
	nf := r.Count(10)
	for range nf {
		id := r.String()
		g := r.Uvarint()
		score := r.Float64()
		if g >= uint64(len(s.groups)) {
			r.Fail(fmt.Errorf("summary snapshot: finding %q in group %d of %d", id, g, len(s.groups)))
			break
		}
		_, sl := s.slot(id)
		sl.group, sl.score = int32(g), score
	}
	nt := r.Count(4)
	for range nt {
		sc := scope{perDomain: r.Bool(), domain: r.String()}
		t := s.top(sc)
		ne := r.Count(9)
		t.entries = make([]topEntry, 0, ne)
		for range ne {
			t.entries = append(t.entries, topEntry{id: r.String(), score: r.Float64()})
		}
		t.open, t.written, t.dirty = int(r.Uvarint()), int(r.Uvarint()), r.Bool()
	}
	if err := r.Err(); err != nil {
		return fmt.Errorf("summary snapshot: %w", err)
	}
	s.all = true
	return nil
}
