package ownerstate

import (
	"fmt"
	"math"

	"github.com/driftline/driftline/pipeline/joiner/drift"
	"github.com/driftline/driftline/pipeline/stream/snap"
)

// snapshotVersion 2: no per-identity queue time, and a timer heap without
// superseded entries. Version 3: eight findings per identity (the fleet
// core's authority_conflict and supply_chain_violation) and the tags of
// each record shape. LoadSnapshot also
// reads versions 1 and 2 (six findings each, the two new ones none), so
// checkpoints written before stay usable.
const snapshotVersion = 3

// findingsBefore3 is the number of findings per identity of snapshot
// versions 1 and 2.
const findingsBefore3 = 6

// AppendSnapshot appends the store's state to w. Call it between events;
// LoadSnapshot restores exactly this state, timers and interned tables
// included, so a restored store behaves as the original would.
func (s *Store) AppendSnapshot(w *snap.Writer) {
	w.Header("ownerstate", snapshotVersion)
	t := &s.syms
	w.Uvarint(uint64(t.Len()))
	for i := range t.Len() {
		w.String(t.Str(Sym(i)))
	}
	w.Uvarint(uint64(t.recs.Len()))
	for i := 1; i < t.recs.Len(); i++ {
		r := t.recs.At(uint32(i))
		for _, v := range [...]Sym{r.RecordType, r.ResourceFamily, r.ProductID, r.OwningDomain, r.OwningPackage,
			r.DomainID, r.ExpectedState, r.ExpectedVersion, r.Quota, r.RouteTarget, r.Tags} {
			w.Uvarint(uint64(v))
		}
	}
	w.Uvarint(uint64(t.obss.Len()))
	for i := 1; i < t.obss.Len(); i++ {
		o := t.obss.At(uint32(i))
		for _, v := range [...]Sym{o.ResourceFamily, o.ObservedState, o.ObservedVersion, o.OwnerRef, o.Usage, o.RouteTarget} {
			w.Uvarint(uint64(v))
		}
	}
	w.Uvarint(uint64(t.compactAt))

	w.Uvarint(uint64(s.n))
	s.Each("", func(id *Identity) {
		// The key and the record id as one string, then the key's length.
		key, rid := id.Key(), id.RecordID()
		w.Uvarint(uint64(len(key) + len(rid)))
		w.B = append(append(w.B, key...), rid...)
		w.Uvarint(uint64(id.klen))
		w.Byte(id.flags)
		w.Byte(id.disagreements)
		findings := uint32(0) // 1 + index in s.slots
		if id.flags&flagFindings != 0 {
			findings = 1 + s.findingsOf[id.idx]
		}
		for _, v := range [...]uint32{findings, id.rec, id.obs, uint32(id.recCorr), uint32(id.obsCorr)} {
			w.Uvarint(uint64(v))
		}
		for _, v := range [...]int64{id.RecordVersion, id.LiveSince, id.ObsAt, id.OrphanSince} {
			w.Varint(v)
		}
	})
	// Each identity's findings as eight, those it never had as such
	// (noFinding): the format of when every identity with findings held
	// all eight.
	w.Uvarint(uint64(s.slots.Len()))
	for i := range s.slots.Len() {
		for _, j := range s.slots.At(uint32(i)) {
			f := &noFinding
			if j != 0 {
				f = s.findings.At(j - 1)
			}
			w.Byte(f.Status)
			w.Uvarint(uint64(f.RetryCount))
			w.Uvarint(f.Version)
			w.Varint(f.FirstSeen)
			w.Varint(f.LastSeen)
			w.Varint(f.ResolvedAt)
			w.Uvarint(uint64(f.Correlation))
		}
	}
	w.Uvarint(uint64(len(s.scans)))
	for p, at := range s.scans {
		w.String(p)
		w.Varint(at)
	}
	w.Uvarint(uint64(len(s.timers)))
	for _, t := range s.timers {
		w.Varint(t.at())
		w.Uvarint(uint64(t.idx))
	}
	w.Uvarint(uint64(s.armed))
}

// LoadSnapshot replaces the store's state with the one r holds. The
// deadline rule (SetDeadline) is kept.
func (s *Store) LoadSnapshot(r *snap.Reader) error {
	name, version := string(r.Bytes()), r.Byte()
	if r.Err() == nil && (name != "ownerstate" || version < 1 || version > snapshotVersion) {
		r.Fail(fmt.Errorf("snap: section %q version %d, want %q version 1 to %d", name, version, "ownerstate", snapshotVersion))
	}
	fresh := New()
	fresh.deadline = s.deadline
	t := &fresh.syms
	nstr := r.Count(1)
	for i := range nstr {
		str := r.String()
		if i == 0 {
			continue // "" is interned already
		}
		if t.Intern(str) != Sym(i) {
			r.Fail(fmt.Errorf("ownerstate snapshot: string %d repeats", i))
		}
	}
	sym := func() Sym {
		v := r.Uvarint()
		if v >= uint64(t.Len()) {
			r.Fail(fmt.Errorf("ownerstate snapshot: symbol %d of %d", v, t.Len()))
			return 0
		}
		return Sym(v)
	}
	// A shape table's entry 0, the empty shape, is counted but not
	// written: bound the count by the entries that follow, so that a
	// store's snapshot loads also where nothing follows it.
	shapes := func(min int) int {
		n := r.Uvarint()
		if r.Err() == nil && n > 1 && n-1 > uint64(r.Len()/min) {
			r.Fail(snap.ErrShort)
			return 0
		}
		return int(n)
	}
	recSyms := 11
	if version < 3 {
		recSyms = 10 // no tags
	}
	nrec := shapes(recSyms)
	for i := 1; i < nrec; i++ {
		sh := RecordShape{RecordType: sym(), ResourceFamily: sym(), ProductID: sym(), OwningDomain: sym(), OwningPackage: sym(),
			DomainID: sym(), ExpectedState: sym(), ExpectedVersion: sym(), Quota: sym(), RouteTarget: sym()}
		if version >= 3 {
			sh.Tags = sym()
		}
		if r.Err() == nil && t.recShape(sh) != uint32(i) {
			r.Fail(fmt.Errorf("ownerstate snapshot: record shape %d repeats", i))
		}
	}
	nobs := shapes(6)
	for i := 1; i < nobs; i++ {
		sh := ObsShape{ResourceFamily: sym(), ObservedState: sym(), ObservedVersion: sym(), OwnerRef: sym(), Usage: sym(), RouteTarget: sym()}
		if r.Err() == nil && t.obsShape(sh) != uint32(i) {
			r.Fail(fmt.Errorf("ownerstate snapshot: observation shape %d repeats", i))
		}
	}
	t.compactAt = int(r.Uvarint())
	// How much of the tables is garbage is not in the snapshot: count all
	// of it, so the next doubling rebuilds them.
	t.garbage = t.Len() + t.recs.Len() + t.obss.Len()

	n := r.Count(14)
	fresh.index.Init(n)
	var queued []int64 // version 1: the time of each identity's live heap entry
	if version == 1 {
		queued = make([]int64, n)
	}
	for range n {
		if r.Err() != nil {
			break
		}
		entry := r.Bytes()
		klen := r.Uvarint()
		if klen == 0 || klen > uint64(len(entry)) || klen > MaxKeyLen || uint64(len(entry))-klen > MaxRecordIDLen {
			r.Fail(fmt.Errorf("ownerstate snapshot: key length %d of %q", klen, entry))
			break
		}
		ref := put(fresh.keys, entry[:klen], entry[klen:])
		id := fresh.add(ref, int(klen))
		id.flags, id.disagreements = r.Byte()&^flagFindings, r.Byte()
		if f := r.Uvarint(); f != 0 {
			if f > uint64(math.MaxUint32) {
				r.Fail(fmt.Errorf("ownerstate snapshot: identity %q has findings %d", id.Key(), f))
				break
			}
			id.flags |= flagFindings
			fresh.findingsOf[id.idx] = uint32(f - 1)
		}
		id.rec, id.obs = uint32(r.Uvarint()), uint32(r.Uvarint())
		id.recCorr, id.obsCorr = sym(), sym()
		if version == 1 {
			queued[id.idx] = r.Varint()
		}
		// A snapshot written before LiveSince was kept holds the occurred_at
		// of the newest record version in its place: the same, unless a
		// version that kept the record live-expecting (a new tag, say)
		// followed the one that began its stretch.
		id.RecordVersion, id.LiveSince, id.ObsAt, id.OrphanSince = r.Varint(), r.Varint(), r.Varint(), r.Varint()
		if id.rec >= uint32(t.recs.Len()) || id.obs >= uint32(t.obss.Len()) {
			r.Fail(fmt.Errorf("ownerstate snapshot: identity %q has shape %d/%d", id.Key(), id.rec, id.obs))
			break
		}
		if !fresh.fileNew(id) {
			r.Fail(fmt.Errorf("ownerstate snapshot: identity %q repeats", id.Key()))
			break
		}
	}
	perIdentity := int(drift.NumClasses)
	if version < 3 {
		perIdentity = findingsBefore3 // the others: none
	}
	nf := r.Count(7 * perIdentity)
	fresh.slots.Grow(nf)
	fresh.findings.Grow(nf)
	for range nf {
		var sl findingSlots
		for k := range perIdentity {
			var f FindingState
			f.Status, f.RetryCount, f.Version = r.Byte(), uint32(r.Uvarint()), r.Uvarint()
			f.FirstSeen, f.LastSeen, f.ResolvedAt = r.Varint(), r.Varint(), r.Varint()
			f.Correlation = sym()
			if f != noFinding {
				sl[k] = 1 + fresh.findings.Append(f)
			}
		}
		fresh.slots.Append(sl)
	}
	for i, f := range fresh.findingsOf {
		if f >= uint32(nf) {
			r.Fail(fmt.Errorf("ownerstate snapshot: identity %q has findings %d of %d", fresh.At(i).Key(), f+1, nf))
			break
		}
	}
	ns := r.Count(2)
	for range ns {
		p := r.String()
		fresh.scans[p] = r.Varint()
	}
	nt := r.Count(2)
	fresh.timers = make(timerHeap, 0, nt)
	for range nt {
		at, idx := r.Varint(), r.Uvarint()
		if r.Err() != nil {
			break
		}
		if version == 1 && idx < uint64(fresh.n) && (queued[idx] != at || fresh.At(uint32(idx)).hpos != 0) {
			continue // superseded (or its twin: one entry per identity now)
		}
		if idx >= uint64(fresh.n) || fresh.At(uint32(idx)).hpos != 0 {
			r.Fail(fmt.Errorf("ownerstate snapshot: timer of identity %d of %d (repeated or out of range)", idx, fresh.n))
			break
		}
		fresh.timers = append(fresh.timers, newTimer(at, uint32(idx)))
		fresh.At(uint32(idx)).hpos = uint32(len(fresh.timers))
	}
	if version == 1 && r.Err() == nil { // after an error queued may name identities never loaded
		for i, q := range queued {
			if q != NoTime && fresh.At(uint32(i)).hpos == 0 {
				r.Fail(fmt.Errorf("ownerstate snapshot: identity %d queued at %d has no timer", i, q))
				break
			}
		}
	}
	if r.Err() == nil {
		fresh.initTimers()
	}
	fresh.armed = int(r.Uvarint())
	if err := r.Err(); err != nil {
		return fmt.Errorf("ownerstate snapshot: %w", err)
	}
	*s = *fresh
	return nil
}
