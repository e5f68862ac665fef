package ownerstate

import (
	"unsafe"

	"github.com/driftline/driftline/pipeline/joiner/drift"
	"github.com/driftline/driftline/pipeline/joiner/intern"
)

// Sym is an interned string of one Store. Sym 0 is the empty string.
type Sym = intern.Sym

// minCompactAt is the table size below which a store never compacts.
const minCompactAt = 1 << 14

// symtab interns the strings of a store and the shapes built from them.
// It only grows; Store.Maintain rebuilds it from the live identities once
// a table has doubled since the last rebuild and what was replaced since
// could be a good part of it.
type symtab struct {
	*intern.Table

	recIDs shapeIndex
	recs   chunked[RecordShape] // recs[0] is unused: shape 0 means none
	obsIDs shapeIndex
	obss   chunked[ObsShape] // obss[0] is unused

	// compactAt is the size of strs, recs or obss that triggers a rebuild.
	compactAt int
	// garbage bounds the entries that references replaced since the last
	// rebuild can have left unreferenced: a replaced string counts one, a
	// replaced shape itself and its strings. Entries added for new
	// identities are live, and a table grown by them only is not rebuilt.
	garbage int
	// rebuilds counts the rebuilds of this store's tables.
	rebuilds int
}

func (t *symtab) init() {
	t.Table = intern.New("")
	t.recIDs, t.recs = shapeIndex{}, chunked[RecordShape]{}
	t.obsIDs, t.obss = shapeIndex{}, chunked[ObsShape]{}
	t.recs.Append(RecordShape{})
	t.obss.Append(ObsShape{})
	t.compactAt = minCompactAt
}

// Key sizes of the shapes: their symbols, without the flags derived from
// them.
const (
	recKeySize = unsafe.Offsetof(RecordShape{}.liveExpecting)
	obsKeySize = unsafe.Offsetof(ObsShape{}.live)
)

func (t *symtab) recShape(r RecordShape) uint32 {
	h := hashShape(&r, recKeySize)
	i, slot := findShape(&t.recIDs, &t.recs, &r, recKeySize, h)
	if i != 0 {
		return i
	}
	state := t.Str(r.ExpectedState)
	r.liveExpecting, r.absentExpecting = LiveExpecting(state), AbsentExpecting(state)
	i = t.recs.Append(r)
	addShape(&t.recIDs, &t.recs, recKeySize, i, h, slot)
	return i
}

func (t *symtab) obsShape(o ObsShape) uint32 {
	h := hashShape(&o, obsKeySize)
	i, slot := findShape(&t.obsIDs, &t.obss, &o, obsKeySize, h)
	if i != 0 {
		return i
	}
	o.live = LiveExpecting(t.Str(o.ObservedState))
	i = t.obss.Append(o)
	addShape(&t.obsIDs, &t.obss, obsKeySize, i, h, slot)
	return i
}

// Weights of replaced references in symtab.garbage.
const (
	garbageSym = 1
	garbageRec = 1 + 10 // the shape and its strings
	garbageObs = 1 + 6
)

// replace returns sym, counting old as possibly garbage when sym
// replaces it.
func (t *symtab) replace(old, sym Sym) Sym {
	if old != 0 && old != sym {
		t.garbage += garbageSym
	}
	return sym
}

// replaceRec returns shape, counting old as possibly garbage when shape
// replaces it.
func (t *symtab) replaceRec(old, shape uint32) uint32 {
	if old != 0 && old != shape {
		t.garbage += garbageRec
	}
	return shape
}

// replaceObs is replaceRec for observation shapes.
func (t *symtab) replaceObs(old, shape uint32) uint32 {
	if old != 0 && old != shape {
		t.garbage += garbageObs
	}
	return shape
}

// due reports whether a rebuild is due: a table has doubled since the
// last one and the replaced references could have left a third of the
// tables unreferenced. A table that doubled with less garbage than that
// may double again first: rebuilding it would drop little and costs a
// pass over every identity (while a partition's platform records are
// first read, every doubling would).
func (t *symtab) due() bool {
	n := max(t.Len(), t.recs.Len(), t.obss.Len())
	if n <= t.compactAt {
		return false
	}
	if 3*t.garbage < t.Len()+t.recs.Len()+t.obss.Len() {
		t.compactAt = 2 * n
		return false
	}
	return true
}

// Maintain rebuilds the interned tables from the live identities when one
// has doubled since the last rebuild, and rewrites the key arena when
// more of it is garbage (record ids replaced) than live. Call it between
// events only: it renumbers every Sym and shape.
func (s *Store) Maintain() {
	if s.syms.due() {
		s.compact()
	}
	if s.keys.due() {
		s.compactKeys()
	}
}

// compactKeys rewrites the key arena with the live entries only. Strings
// read from the old chunks stay valid: the chunks are dropped, not
// reused.
func (s *Store) compactKeys() {
	old := *s.keys
	*s.keys = arena{}
	s.Each("", func(id *Identity) {
		_, n := old.rid(id.ref, int(id.klen))
		ref, b := s.keys.alloc(n)
		copy(b, old.bytes(id.ref, n))
		id.ref = ref
	})
}

func (s *Store) compact() {
	old := s.syms
	var t symtab
	t.init()
	str := func(sym Sym) Sym { return t.Intern(old.Str(sym)) }
	s.Each("", func(id *Identity) {
		if id.rec != 0 {
			r := old.recs.At(id.rec)
			id.rec = t.recShape(RecordShape{
				RecordType: str(r.RecordType), ResourceFamily: str(r.ResourceFamily), ProductID: str(r.ProductID),
				OwningDomain: str(r.OwningDomain), OwningPackage: str(r.OwningPackage), DomainID: str(r.DomainID),
				ExpectedState: str(r.ExpectedState), ExpectedVersion: str(r.ExpectedVersion),
				Quota: str(r.Quota), RouteTarget: str(r.RouteTarget), Tags: str(r.Tags),
			})
		}
		if id.obs != 0 {
			o := old.obss.At(id.obs)
			id.obs = t.obsShape(ObsShape{ResourceFamily: str(o.ResourceFamily), ObservedState: str(o.ObservedState),
				ObservedVersion: str(o.ObservedVersion), OwnerRef: str(o.OwnerRef), Usage: str(o.Usage), RouteTarget: str(o.RouteTarget)})
		}
		id.recCorr, id.obsCorr = str(id.recCorr), str(id.obsCorr)
		fs := s.Findings(id)
		for k := range drift.Class(drift.NumClasses) {
			if f := fs.Of(k); f != nil {
				f.Correlation = str(f.Correlation)
			}
		}
	})
	t.compactAt = max(minCompactAt, 2*max(t.Len(), t.recs.Len(), t.obss.Len()))
	t.rebuilds = old.rebuilds + 1
	s.syms = t
}
