package ownerstate

import (
	"fmt"
	"strings"

	"github.com/driftline/driftline/pipeline/snap"
)

const snapshotVersion = 1

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
	w.Uvarint(uint64(len(t.recs)))
	for _, r := range t.recs[1:] {
		for _, v := range [...]Sym{r.RecordType, r.ResourceFamily, r.ProductID, r.OwningDomain, r.OwningPackage,
			r.DomainID, r.ExpectedState, r.ExpectedVersion, r.Quota, r.RouteTarget} {
			w.Uvarint(uint64(v))
		}
	}
	w.Uvarint(uint64(len(t.obss)))
	for _, o := range t.obss[1:] {
		for _, v := range [...]Sym{o.ResourceFamily, o.ObservedState, o.ObservedVersion, o.OwnerRef, o.Usage, o.RouteTarget} {
			w.Uvarint(uint64(v))
		}
	}
	w.Uvarint(uint64(t.compactAt))

	w.Uvarint(uint64(s.n))
	s.Each("", func(id *Identity) {
		w.String(id.ks)
		w.Uvarint(uint64(id.klen))
		w.Byte(id.flags)
		w.Byte(id.disagreements)
		for _, v := range [...]uint32{id.findings, id.rec, id.obs, uint32(id.recCorr), uint32(id.obsCorr)} {
			w.Uvarint(uint64(v))
		}
		for _, v := range [...]int64{id.queued, id.RecordVersion, id.RecordAt, id.ObsAt, id.OrphanSince} {
			w.Varint(v)
		}
	})
	w.Uvarint(uint64(len(s.findings)))
	for i := range s.findings {
		for _, f := range s.findings[i] {
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
		w.Varint(t.at)
		w.Uvarint(uint64(t.idx))
	}
	w.Uvarint(uint64(s.armed))
}

// LoadSnapshot replaces the store's state with the one r holds. The
// deadline rule (SetDeadline) is kept.
func (s *Store) LoadSnapshot(r *snap.Reader) error {
	r.Header("ownerstate", snapshotVersion)
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
	nrec := r.Count(10)
	for i := 1; i < nrec; i++ {
		sh := RecordShape{RecordType: sym(), ResourceFamily: sym(), ProductID: sym(), OwningDomain: sym(), OwningPackage: sym(),
			DomainID: sym(), ExpectedState: sym(), ExpectedVersion: sym(), Quota: sym(), RouteTarget: sym()}
		if r.Err() == nil && t.recShape(sh) != uint32(i) {
			r.Fail(fmt.Errorf("ownerstate snapshot: record shape %d repeats", i))
		}
	}
	nobs := r.Count(6)
	for i := 1; i < nobs; i++ {
		sh := ObsShape{ResourceFamily: sym(), ObservedState: sym(), ObservedVersion: sym(), OwnerRef: sym(), Usage: sym(), RouteTarget: sym()}
		if r.Err() == nil && t.obsShape(sh) != uint32(i) {
			r.Fail(fmt.Errorf("ownerstate snapshot: observation shape %d repeats", i))
		}
	}
	t.compactAt = int(r.Uvarint())

	n := r.Count(16)
	fresh.index = make(map[uint64]uint32, n)
	for range n {
		if r.Err() != nil {
			break
		}
		ks := r.String()
		klen := r.Uvarint()
		if klen > uint64(len(ks)) {
			r.Fail(fmt.Errorf("ownerstate snapshot: key length %d of %q", klen, ks))
			break
		}
		id := fresh.add(ks[:klen])
		id.ks, id.flags, id.disagreements = ks, r.Byte(), r.Byte()
		id.findings, id.rec, id.obs = uint32(r.Uvarint()), uint32(r.Uvarint()), uint32(r.Uvarint())
		id.recCorr, id.obsCorr = sym(), sym()
		id.queued, id.RecordVersion, id.RecordAt, id.ObsAt, id.OrphanSince = r.Varint(), r.Varint(), r.Varint(), r.Varint(), r.Varint()
		if id.rec >= uint32(len(t.recs)) || id.obs >= uint32(len(t.obss)) {
			r.Fail(fmt.Errorf("ownerstate snapshot: identity %q has shape %d/%d", id.Key(), id.rec, id.obs))
			break
		}
		k := id.Key()
		prov, pid := splitKey(k)
		// One map access per identity: an assignment that does not grow
		// the map hit another key's hash, which goes back, and this key
		// goes to collided (as Get filed it).
		h, before := hashKey(prov, pid), len(fresh.index)
		fresh.index[h] = id.idx
		if len(fresh.index) == before {
			fresh.index[h] = fresh.firstWithHash(h)
			fresh.collided[k] = id.idx
		}
	}
	nf := r.Count(7 * len(Findings{}))
	fresh.findings = make([]Findings, nf)
	for i := range fresh.findings {
		for k := range fresh.findings[i] {
			f := &fresh.findings[i][k]
			f.Status, f.RetryCount, f.Version = r.Byte(), uint32(r.Uvarint()), r.Uvarint()
			f.FirstSeen, f.LastSeen, f.ResolvedAt = r.Varint(), r.Varint(), r.Varint()
			f.Correlation = sym()
		}
	}
	fresh.Each("", func(id *Identity) {
		if id.findings > uint32(nf) {
			r.Fail(fmt.Errorf("ownerstate snapshot: identity %q has findings %d of %d", id.Key(), id.findings, nf))
		}
	})
	ns := r.Count(2)
	for range ns {
		p := r.String()
		fresh.scans[p] = r.Varint()
	}
	nt := r.Count(2)
	fresh.timers = make(timerHeap, 0, nt)
	for range nt {
		at, idx := r.Varint(), r.Uvarint()
		if idx >= uint64(fresh.n) {
			r.Fail(fmt.Errorf("ownerstate snapshot: timer of identity %d of %d", idx, fresh.n))
			break
		}
		fresh.timers = append(fresh.timers, timer{at: at, idx: uint32(idx)})
	}
	fresh.armed = int(r.Uvarint())
	if err := r.Err(); err != nil {
		return fmt.Errorf("ownerstate snapshot: %w", err)
	}
	*s = *fresh
	return nil
}

// splitKey splits an identity key into provider and provider_id.
func splitKey(k string) (provider, providerID string) {
	if i := strings.IndexByte(k, '/'); i >= 0 {
		return k[:i], k[i+1:]
	}
	return k, ""
}

// firstWithHash returns the first identity whose key hashes to h (a
// collision, which a 64-bit hash makes all but impossible: a linear scan).
func (s *Store) firstWithHash(h uint64) uint32 {
	for i := range uint32(s.n) {
		if hashKey(splitKey(s.At(i).Key())) == h {
			return i
		}
	}
	panic("BUG: ownerstate: no identity with the hash")
}
