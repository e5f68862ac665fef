// Package ownerstate holds what one joiner partition knows about each
// identity (provider/provider_id): the platform record that owns it, the
// latest provider observation, and the state of each of its drift
// findings. It also keeps the partition's event-time timers, so deadlines
// (staleness, orphan grace) fire in event time as the watermark advances.
//
// # Memory
//
// A partition may track millions of identities, so an identity is a flat
// 64-byte struct with no pointers: the string fields of records and
// observations repeat across identities (states, versions, domains,
// products, correlation ids of a scan), so they are interned once per
// partition (Sym), and the field combinations are interned again as shapes
// (RecordShape, ObsShape) that identities share. The identity key and the
// record id, which are unique, are one entry in a pointer-free byte arena
// (arena.go); the index from keys to identities is an open-addressing
// table of 8-byte slots (index.go); each provider's identities are listed
// by index, for the scans that complete per provider. Findings are kept
// only for the identities that ever had one, found through a map.
// Interned values no identity holds any more are dropped by a compaction
// that runs when a table has doubled since the last one, and the arena is
// rewritten when more of it is replaced record ids than live entries
// (Maintain), so the tables stay within about twice what the identities
// hold.
// docs/drift-model.md (memory) gives the measured bytes per identity.
//
// # Timers
//
// An identity arms at most one deadline per kind (missing, orphan). A
// deadline is a function of the identity's state that the classifier
// defines (SetDeadline); the timer queue holds at most one 12-byte entry
// per identity, at or before its earliest armed deadline, and moves it
// when it comes due. A deadline that moves later, as the missing deadline
// does with every observation, therefore costs no queue operation; one
// that moves earlier moves the entry in place (the identity knows its
// position in the queue). The queue keeps only its earliest entries in a
// heap, a few percent of them; the later ones wait unordered until the
// heap runs empty and the earliest of them move in, so that most entries,
// moved later long before they come due, are never sifted through a heap
// of all of them.
//
// A Store is owned by one partition worker and is not safe for concurrent
// use. Times are Unix nanoseconds of event time; NoTime marks none.
package ownerstate

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"unsafe"

	"github.com/driftline/driftline/pipeline/joiner/drift"
	"github.com/driftline/driftline/pipeline/joiner/keyindex"
	"github.com/driftline/driftline/pipeline/joiner/prefetch"
	"github.com/driftline/driftline/pipeline/stream/snap"
)

// NoTime marks an unset time.
const NoTime int64 = math.MinInt64

// Finding statuses in FindingState.
const (
	None uint8 = iota
	Open
	Resolved
)

// FindingState is the joiner's memory of one (identity, classification)
// finding.
type FindingState struct {
	Status      uint8
	RetryCount  uint32
	Version     uint64 // grows with every transition written
	FirstSeen   int64
	LastSeen    int64
	ResolvedAt  int64
	Correlation Sym
	// Aux is a word of the findings' consumer (see classify.Emit), in
	// what was padding: the store keeps it, never reads it, and leaves it
	// out of snapshots (0 after a restore).
	Aux uint32
}

// noFinding is a class's finding before it is first opened.
var noFinding = FindingState{FirstSeen: NoTime, LastSeen: NoTime, ResolvedAt: NoTime}

// findingSlots holds an identity's findings: per class, 1 + the index of
// its finding in Store.findings, 0 for none. An identity with findings
// mostly has one or two of the eight classes, and eight FindingStates
// each (384 bytes) were some 80 MB of a joiner's heap at 1.33M
// identities: the slots and the findings that exist are about a quarter
// of that.
type findingSlots [drift.NumClasses]uint32

// Findings are an identity's findings, at most one per classification,
// as the Store holds them (Store.Findings). The pointers Of and Make
// return are valid until the next Make of any identity.
type Findings struct {
	s     *Store
	id    *Identity
	slots *findingSlots // nil: the identity never had a finding
}

// Of returns the finding of class k, nil if the identity never had one.
func (f Findings) Of(k drift.Class) *FindingState {
	if f.slots == nil || f.slots[k] == 0 {
		return nil
	}
	return f.s.findings.At(f.slots[k] - 1)
}

// Make returns the finding of class k, a new one (status None, times
// NoTime) if the identity never had one.
func (f *Findings) Make(k drift.Class) *FindingState {
	s := f.s
	if f.slots == nil {
		i := s.slots.Append(findingSlots{})
		s.findingsOf[f.id.idx] = i
		f.id.flags |= flagFindings
		f.slots = s.slots.At(i)
	}
	if f.slots[k] == 0 {
		f.slots[k] = 1 + s.findings.Append(noFinding)
	}
	return s.findings.At(f.slots[k] - 1)
}

// Identity flags.
const (
	flagDeleted         uint8 = 1 << iota // deleted:true or a tombstone
	flagNodeMismatch                      // node-agent evidence contradicts the registry
	flagOwnerIsRecord                     // the observation's owner_ref equals the record id
	flagArmedMissing                      // a missing deadline is armed
	flagArmedOrphan                       // an orphan deadline is armed
	flagFindings                          // the identity has findings (Store.findingsOf)
	flagNodeAuthority                     // the node obeys a controller it should not (authority_conflict)
	flagNodeSupplyChain                   // the node runs an artifact the registry does not vouch for
)

// Identity is everything known about one provider resource. Its record
// and observation fields are read through the Store (Record, Obs, Str).
// An Identity lives in its store and is used through the pointer the
// store returns: it is never copied (its key is found from its address).
type Identity struct {
	_             noCopy // go vet reports copies (see keys)
	ref           uint32 // the key then the record id, in the store's arena
	klen          uint16 // length of the key
	flags         uint8
	disagreements uint8  // consecutive disagreeing observations, saturating
	idx           uint32 // index in the store
	rec, obs      uint32 // shape indexes; 0: none
	recCorr       Sym    // correlation_id of the record event
	obsCorr       Sym    // correlation_id of the observation event
	hpos          uint32 // 1 + position of the identity's timer in the queue (timers.go); 0: none

	// RecordVersion is the record_version of the applied record.
	RecordVersion int64
	// LiveSince is the occurred_at of the record version that began the
	// record's current live-expecting stretch (not deleted, expected_state
	// live-expecting): a later version that goes on expecting the resource
	// live (a new tag, say) keeps it, since the platform has expected it
	// since the earlier one. Any other version, and a tombstone, sets it
	// to its own occurred_at. NoTime: neither applied yet.
	LiveSince int64
	// ObsAt is the occurred_at of the newest observation.
	ObsAt int64
	// OrphanSince starts the current unowned-and-live stretch; NoTime
	// when the identity is owned or not observed live.
	OrphanSince int64
}

// noCopy makes go vet's copylocks check report an Identity copied by
// value; it takes no space (it comes first).
type noCopy struct{}

func (*noCopy) Lock()   {}
func (*noCopy) Unlock() {}

// idChunk is a chunk of identities and the arena of their keys, which an
// identity finds from its own address (Identity.keys). The identities come
// first: a chunk is a large allocation, which starts on a page, so each
// 64-byte identity is one cache line (after the 8-byte pointer, every one
// was split over two).
type idChunk struct {
	ids  [chunkSize]Identity
	keys *arena
}

// keys returns the arena of id's store.
func (id *Identity) keys() *arena {
	c := (*idChunk)(unsafe.Add(unsafe.Pointer(id),
		-int(unsafe.Offsetof(idChunk{}.ids))-int(id.idx&(chunkSize-1))*int(unsafe.Sizeof(Identity{}))))
	return c.keys
}

// Key returns the identity key provider/provider_id.
func (id *Identity) Key() string { return id.keys().str(id.ref, int(id.klen)) }

// Provider returns the provider of the identity.
func (id *Identity) Provider() string {
	k := id.Key()
	if i := strings.IndexByte(k, '/'); i >= 0 {
		return k[:i]
	}
	return k
}

// ProviderID returns the provider_id of the identity.
func (id *Identity) ProviderID() string {
	k := id.Key()
	return k[strings.IndexByte(k, '/')+1:]
}

// RecordID returns the record_id of the applied record ("" if none).
func (id *Identity) RecordID() string {
	rid, _ := id.keys().rid(id.ref, int(id.klen))
	return rid
}

// HasRecord reports whether a platform record (or tombstone) was applied.
func (id *Identity) HasRecord() bool { return id.rec != 0 }

// HasObs reports whether an observation was applied.
func (id *Identity) HasObs() bool { return id.obs != 0 }

// Deleted reports whether the record was deleted (deleted:true or a
// tombstone).
func (id *Identity) Deleted() bool { return id.flags&flagDeleted != 0 }

// NodeMismatch reports whether the node-agent evidence of this identity
// (maas/<node_id>) contradicts the platform registry.
func (id *Identity) NodeMismatch() bool { return id.flags&flagNodeMismatch != 0 }

// SetNodeMismatch sets the node-agent verdict and reports whether it
// changed.
func (id *Identity) SetNodeMismatch(v bool) (changed bool) {
	changed = id.NodeMismatch() != v
	id.setFlag(flagNodeMismatch, v)
	return changed
}

// NodeAuthority reports whether the node (maas/<node_id>) has an
// authority conflict (CONTRACT 8.3).
func (id *Identity) NodeAuthority() bool { return id.flags&flagNodeAuthority != 0 }

// NodeSupplyChain reports whether the node runs an artifact that is
// unknown, revoked or of another digest (CONTRACT 8.3).
func (id *Identity) NodeSupplyChain() bool { return id.flags&flagNodeSupplyChain != 0 }

// SetNodeFleet sets the fleet core's verdicts and reports whether either
// changed.
func (id *Identity) SetNodeFleet(authority, supplyChain bool) (changed bool) {
	changed = id.NodeAuthority() != authority || id.NodeSupplyChain() != supplyChain
	id.setFlag(flagNodeAuthority, authority)
	id.setFlag(flagNodeSupplyChain, supplyChain)
	return changed
}

// Disagreements returns the number of consecutive applied observations
// that disagree with the record (saturating at 255).
func (id *Identity) Disagreements() int { return int(id.disagreements) }

// SetDisagreeing counts one more disagreeing observation, or resets the
// count.
func (id *Identity) SetDisagreeing(v bool) {
	switch {
	case !v:
		id.disagreements = 0
	case id.disagreements < math.MaxUint8:
		id.disagreements++
	}
}

func (id *Identity) setFlag(f uint8, v bool) {
	if v {
		id.flags |= f
	} else {
		id.flags &^= f
	}
}

// RecordShape is the interned content of a platform record, without its
// id and version (kept per identity).
type RecordShape struct {
	RecordType, ResourceFamily, ProductID              Sym
	OwningDomain, OwningPackage, DomainID              Sym
	ExpectedState, ExpectedVersion, Quota, RouteTarget Sym
	// Tags are the record's tags joined by NUL ('' when none).
	Tags                           Sym
	liveExpecting, absentExpecting bool
	_                              [2]byte
}

// LiveExpecting reports whether the record's expected state expects a
// live provider resource.
func (r *RecordShape) LiveExpecting() bool { return r.liveExpecting }

// AbsentExpecting reports whether the record expects the resource gone.
func (r *RecordShape) AbsentExpecting() bool { return r.absentExpecting }

// ObsShape is the interned content of an observation. OwnerRef is empty
// when the owner_ref equals the identity's record id (see Store.OwnerRef).
type ObsShape struct {
	ResourceFamily, ObservedState, ObservedVersion Sym
	OwnerRef, Usage, RouteTarget                   Sym
	live                                           bool
	_                                              [3]byte
}

// Live reports whether the observed state is a live one.
func (o *ObsShape) Live() bool { return o.live }

// chunkBits sizes the identity chunks: identities never move, so pointers
// to them stay valid while the store grows, and growth wastes at most one
// chunk.
const (
	chunkBits = 12
	chunkSize = 1 << chunkBits
)

// Store is one partition's identities, completed scans and timers.
type Store struct {
	chunks []*idChunk
	n      int
	// keys holds the keys and record ids of the identities (one arena
	// for the store's life: the chunks of identities point at it).
	keys  *arena
	index keyindex.Index
	// findings holds the findings of identities that ever had one, and
	// slots each such identity's (findingSlots); findingsOf maps an
	// identity's index to its slots (the identities that have some are
	// flagged, and are a minority: their index costs the others nothing).
	findings   chunked[FindingState]
	slots      chunked[findingSlots]
	findingsOf map[uint32]uint32

	syms symtab
	// scans holds, per provider, the start of its latest completed scan.
	scans map[string]int64
	// providers lists each provider's identities (indexes, in the order
	// they were created), so that a completed scan visits its provider's
	// identities only, without reading the key of every other.
	providers map[string]*providerList
	last      *providerList // the list of the identity created last

	// timers is the timer queue (timers.go): a heap of its first near
	// entries, those at or before lim, then the later ones.
	timers   timerHeap
	near     int
	lim      int64
	armed    int // armed deadlines (flags set)
	deadline Deadline
}

// New returns an empty Store.
func New() *Store {
	s := &Store{keys: &arena{}, scans: make(map[string]int64), findingsOf: make(map[uint32]uint32),
		providers: make(map[string]*providerList)}
	s.index.Init(0)
	s.syms.init()
	return s
}

// Len returns the number of identities.
func (s *Store) Len() int { return s.n }

// At returns the identity of index i.
func (s *Store) At(i uint32) *Identity { return &s.chunks[i>>chunkBits].ids[i&(chunkSize-1)] }

// Get returns the identity of provider/providerID, creating it when create
// is set (nil otherwise). Looking up an existing identity does not
// allocate; the strings may alias a decode buffer.
func (s *Store) Get(provider, providerID string, create bool) *Identity {
	h := s.index.HashKey(provider, providerID)
	if i, ok := s.index.Find(h, func(i uint32) bool { return keyEquals(s.At(i).Key(), provider, providerID) }); ok {
		return s.At(i)
	}
	if !create {
		return nil
	}
	klen := len(provider) + 1 + len(providerID)
	if klen > MaxKeyLen {
		panic(fmt.Sprintf("ownerstate: identity key of %d bytes, more than %d", klen, MaxKeyLen))
	}
	ref, b := s.keys.alloc(klen + 1) // the key, and an empty record id
	b[copy(b, provider)] = '/'
	copy(b[len(provider)+1:], providerID)
	b[klen] = 0
	id := s.add(ref, klen)
	s.index.Insert(h, id.idx)
	return id
}

// Prefetch starts bringing into the caches the index slot where the
// identity of key (provider/provider_id, as a record's Kafka key) is
// looked up first, and returns the key's hash (its xxhash64, which the
// node tracker's prefetches take as well) for PrefetchIdentity. It
// changes nothing; a caller that applies records a few at a time calls it
// for a record some records before applying it (see package prefetch).
func (s *Store) Prefetch(key []byte) uint64 {
	h := s.index.HashBytes(key)
	prefetch.Line(unsafe.Pointer(&s.index.Slots[s.index.Home(h)]))
	return h
}

// PrefetchIdentity starts bringing into the caches the identity whose key
// hashes to h (Prefetch's result) and its key, reading the index slot
// Prefetch brought in. Only the first slot is read: a key that probes
// further is looked up without help.
func (s *Store) PrefetchIdentity(h uint64) {
	if id := s.prefetched(h); id != nil {
		prefetch.Line(unsafe.Pointer(id))
		prefetch.Line(unsafe.Pointer(&id.keys().chunks[id.ref>>arenaChunkBits][id.ref&(arenaChunk-1)]))
	}
}

// PrefetchState starts bringing into the caches what applying an event to
// the identity whose key hashes to h reads besides the identity: its
// record and observation shapes and its timer, reading the identity
// PrefetchIdentity brought in.
func (s *Store) PrefetchState(h uint64) {
	id := s.prefetched(h)
	if id == nil {
		return
	}
	if id.rec != 0 && int(id.rec) < s.syms.recs.Len() {
		prefetch.Line(unsafe.Pointer(s.syms.recs.At(id.rec)))
	}
	if id.obs != 0 && int(id.obs) < s.syms.obss.Len() {
		prefetch.Line(unsafe.Pointer(s.syms.obss.At(id.obs)))
	}
	if id.hpos != 0 && int(id.hpos) <= len(s.timers) {
		prefetch.Line(unsafe.Pointer(&s.timers[id.hpos-1]))
	}
}

// prefetched returns the identity in h's home slot if its tag matches h,
// nil otherwise.
func (s *Store) prefetched(h uint64) *Identity {
	i, ok := s.index.AtHome(h)
	if !ok || int(i) >= s.n {
		return nil
	}
	return s.At(i)
}

// fileNew files identity id in the index, unless an identity with its
// key is filed already (then it reports false).
func (s *Store) fileNew(id *Identity) bool {
	key := id.Key()
	h := s.index.Hash(key)
	if _, ok := s.index.Find(h, func(i uint32) bool { return s.At(i).Key() == key }); ok {
		return false
	}
	s.index.Insert(h, id.idx)
	return true
}

func keyEquals(key, provider, providerID string) bool {
	return len(key) == len(provider)+1+len(providerID) && key[len(provider)] == '/' &&
		key[:len(provider)] == provider && key[len(provider)+1:] == providerID
}

// add appends a new identity whose key is the klen bytes at ref in the
// arena (not filed in the index).
func (s *Store) add(ref uint32, klen int) *Identity {
	i := uint32(s.n)
	if s.n&(chunkSize-1) == 0 {
		s.chunks = append(s.chunks, &idChunk{keys: s.keys})
	}
	s.n++
	id := s.At(i)
	*id = Identity{ref: ref, klen: uint16(klen), idx: i, LiveSince: NoTime, ObsAt: NoTime, OrphanSince: NoTime}
	provider := id.Provider() // in the arena, just written
	l := s.last
	if l == nil || l.provider != provider {
		if l = s.providers[provider]; l == nil {
			l = &providerList{provider: strings.Clone(provider)}
			s.providers[l.provider] = l
		}
		s.last = l
	}
	l.idxs.Append(i)
	return id
}

// providerList holds the indexes of one provider's identities, in chunks:
// a provider may own most of the store's identities, and a growing slice
// copies its whole list and leaves part of it unused.
type providerList struct {
	provider string
	idxs     chunked[uint32]
}

// Each calls fn for every identity of provider (all when provider is ""),
// in the order they were created.
func (s *Store) Each(provider string, fn func(*Identity)) {
	if provider != "" {
		if l := s.providers[provider]; l != nil {
			for _, c := range l.idxs.chunks {
				for _, i := range c {
					fn(s.At(i))
				}
			}
		}
		return
	}
	for c, chunk := range s.chunks {
		for i := range chunk.ids {
			if c<<chunkBits+i >= s.n {
				return
			}
			fn(&chunk.ids[i])
		}
	}
}

// Findings returns id's findings (Make adds one).
func (s *Store) Findings(id *Identity) Findings {
	f := Findings{s: s, id: id}
	if id.flags&flagFindings != 0 {
		f.slots = s.slots.At(s.findingsOf[id.idx])
	}
	return f
}

// Record returns the shape of id's record, nil if none.
func (s *Store) Record(id *Identity) *RecordShape {
	if id.rec == 0 {
		return nil
	}
	return s.syms.recs.At(id.rec)
}

// Obs returns the shape of id's newest observation, nil if none.
func (s *Store) Obs(id *Identity) *ObsShape {
	if id.obs == 0 {
		return nil
	}
	return s.syms.obss.At(id.obs)
}

// OwnerRef returns the owner_ref of id's newest observation.
func (s *Store) OwnerRef(id *Identity) string {
	if id.flags&flagOwnerIsRecord != 0 {
		return id.RecordID()
	}
	if o := s.Obs(id); o != nil {
		return s.Str(o.OwnerRef)
	}
	return ""
}

// Str returns the string of sym.
func (s *Store) Str(sym Sym) string { return s.syms.Str(sym) }

// RecordCorrelation returns the correlation_id of id's record event.
func (s *Store) RecordCorrelation(id *Identity) string { return s.Str(id.recCorr) }

// ObsCorrelation returns the correlation_id of id's observation event.
func (s *Store) ObsCorrelation(id *Identity) string { return s.Str(id.obsCorr) }

// Intern returns the symbol of str (which may alias a decode buffer).
func (s *Store) Intern(str string) Sym { return s.syms.Intern(str) }

// Reintern returns the symbol of str, which replaces old in the caller's
// state (old may become garbage: see Maintain).
func (s *Store) Reintern(old Sym, str string) Sym { return s.syms.replace(old, s.syms.Intern(str)) }

// Record is a platform record as the store applies it.
type Record struct {
	RecordType, RecordID, ResourceFamily, ProductID    string
	OwningDomain, OwningPackage, DomainID              string
	ExpectedState, ExpectedVersion, Quota, RouteTarget string
	Tags                                               string // joined by NUL
	RecordVersion                                      int64
	Deleted                                            bool
}

// SetRecord applies r as id's record, occurred at at with correlation
// correlationID.
func (s *Store) SetRecord(id *Identity, r *Record, at int64, correlationID string) {
	if r.RecordID != id.RecordID() {
		if id.flags&flagOwnerIsRecord != 0 {
			// The observation's owner_ref was the old record id: keep it.
			o := *s.syms.obss.At(id.obs)
			o.OwnerRef = s.syms.Intern(id.RecordID())
			id.obs = s.syms.replaceObs(id.obs, s.syms.obsShape(o))
			id.flags &^= flagOwnerIsRecord
		}
		s.setRecordID(id, r.RecordID)
	}
	live := s.expectsLive(id)
	t := &s.syms
	t.Prefetch(r.ExpectedVersion) // see SetObs
	t.Prefetch(r.Quota)
	t.Prefetch(r.RouteTarget)
	id.rec = t.replaceRec(id.rec, t.recShape(RecordShape{
		RecordType: t.Intern(r.RecordType), ResourceFamily: t.Intern(r.ResourceFamily), ProductID: t.Intern(r.ProductID),
		OwningDomain: t.Intern(r.OwningDomain), OwningPackage: t.Intern(r.OwningPackage), DomainID: t.Intern(r.DomainID),
		ExpectedState: t.Intern(r.ExpectedState), ExpectedVersion: t.Intern(r.ExpectedVersion),
		Quota: t.Intern(r.Quota), RouteTarget: t.Intern(r.RouteTarget), Tags: t.Intern(r.Tags),
	}))
	id.RecordVersion, id.recCorr = r.RecordVersion, t.replace(id.recCorr, t.Intern(correlationID))
	id.setFlag(flagDeleted, r.Deleted)
	if !live || !s.expectsLive(id) {
		id.LiveSince = at
	}
}

// expectsLive reports whether id's record expects a live resource: it
// exists, is not deleted, and its expected_state is live-expecting.
func (s *Store) expectsLive(id *Identity) bool {
	return id.rec != 0 && id.flags&flagDeleted == 0 && s.syms.recs.At(id.rec).liveExpecting
}

// setRecordID stores rid after a copy of the key in the arena; the old
// entry is garbage until the arena is rewritten (Maintain).
func (s *Store) setRecordID(id *Identity, rid string) {
	if len(rid) > MaxRecordIDLen {
		panic(fmt.Sprintf("ownerstate: record id of %d bytes, more than %d", len(rid), MaxRecordIDLen))
	}
	old, size := id.keys().rid(id.ref, int(id.klen))
	if old == "" {
		// The common case, a new identity's first record: its key is
		// often the arena's last entry, and grows in place (the length
		// byte after the key is the only byte written again; no string
		// covers it).
		if b := s.keys.extend(id.ref, size, snap.UvarintLen(uint64(len(rid)))-1+len(rid)); b != nil {
			b = s.keys.bytes(id.ref, size+len(b))[id.klen:]
			copy(b[binary.PutUvarint(b, uint64(len(rid))):], rid)
			return
		}
	}
	ref := s.keys.put(id.Key(), rid)
	s.keys.free(size)
	id.ref = ref
}

// SetTombstone marks id's record deleted at at (a Kafka tombstone).
func (s *Store) SetTombstone(id *Identity, at int64) {
	id.flags |= flagDeleted
	id.LiveSince = at
}

// Observation is a provider observation as the store applies it.
type Observation struct {
	ResourceFamily, ObservedState, ObservedVersion string
	OwnerRef, Usage, RouteTarget                   string
}

// SetObs applies o as id's newest observation, occurred at at with
// correlation correlationID.
func (s *Store) SetObs(id *Identity, o *Observation, at int64, correlationID string) {
	t := &s.syms
	if id.obs != 0 && s.sameObs(id, o) {
		// The common case, a resource observed as it was: no interning.
		id.ObsAt, id.obsCorr = at, t.replace(id.obsCorr, t.Intern(correlationID))
		return
	}
	// The version, usage and route target are mostly one of many values
	// each: their index slots are asked for together, so that their cache
	// misses overlap.
	t.Prefetch(o.ObservedVersion)
	t.Prefetch(o.Usage)
	t.Prefetch(o.RouteTarget)
	sh := ObsShape{ResourceFamily: t.Intern(o.ResourceFamily), ObservedState: t.Intern(o.ObservedState),
		ObservedVersion: t.Intern(o.ObservedVersion), Usage: t.Intern(o.Usage), RouteTarget: t.Intern(o.RouteTarget)}
	isRecord := o.OwnerRef != "" && id.rec != 0 && o.OwnerRef == id.RecordID()
	if !isRecord {
		sh.OwnerRef = t.Intern(o.OwnerRef)
	}
	id.setFlag(flagOwnerIsRecord, isRecord)
	id.obs = t.replaceObs(id.obs, t.obsShape(sh))
	id.ObsAt, id.obsCorr = at, t.replace(id.obsCorr, t.Intern(correlationID))
}

// sameObs reports whether o holds exactly the fields of id's observation.
func (s *Store) sameObs(id *Identity, o *Observation) bool {
	cur, strs := s.syms.obss.At(id.obs), s.syms.Table
	if o.OwnerRef != "" && id.rec != 0 && o.OwnerRef == id.RecordID() {
		if id.flags&flagOwnerIsRecord == 0 {
			return false
		}
	} else if id.flags&flagOwnerIsRecord != 0 || strs.Str(cur.OwnerRef) != o.OwnerRef {
		return false
	}
	return strs.Str(cur.ObservedState) == o.ObservedState && strs.Str(cur.ObservedVersion) == o.ObservedVersion &&
		strs.Str(cur.ResourceFamily) == o.ResourceFamily && strs.Str(cur.Usage) == o.Usage && strs.Str(cur.RouteTarget) == o.RouteTarget
}

// CompleteScan records a completed scan of provider that started at
// started, and reports whether it is newer than the last one known.
func (s *Store) CompleteScan(provider string, started int64) bool {
	if prev, ok := s.scans[provider]; ok && started <= prev {
		return false
	}
	s.scans[strings.Clone(provider)] = started
	return true
}

// LastScan returns the start of provider's latest completed scan.
func (s *Store) LastScan(provider string) (int64, bool) {
	t, ok := s.scans[provider]
	return t, ok
}

// Lifecycle state groups (CONTRACT section 4).
var (
	liveStates   = map[string]bool{"active": true, "running": true, "allocated": true, "ready": true, "attached": true, "serving": true}
	absentStates = map[string]bool{"released": true, "deleted": true, "decommissioned": true, "retired": true}
)

// LiveExpecting reports whether state expects a live provider resource.
func LiveExpecting(state string) bool { return liveStates[state] }

// AbsentExpecting reports whether state expects the resource to be gone.
func AbsentExpecting(state string) bool { return absentStates[state] }
