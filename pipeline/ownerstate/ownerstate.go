// Package ownerstate holds what one joiner partition knows about each
// identity (provider/provider_id): the platform record that owns it, the
// latest provider observation, and the state of each of its drift
// findings. It also keeps the partition's event-time timers, so deadlines
// (staleness, orphan grace) fire in event time as the watermark advances.
//
// # Memory
//
// A partition may track millions of identities, so an identity is a flat
// 88-byte struct with no pointers of its own but its key: the string
// fields of records and observations repeat across identities (states,
// versions, domains, products, correlation ids of a scan), so they are
// interned once per partition (Sym), and the field combinations are
// interned again as shapes (RecordShape, ObsShape) that identities share.
// The identity key and the record id, which are unique, share one string.
// Findings are kept only for the identities that ever had one. Interned
// values no identity holds any more are dropped by a compaction that runs
// when a table has doubled since the last one (Maintain), so the tables
// stay within twice what the identities hold. docs/drift-model.md
// (memory) gives the measured bytes per identity.
//
// # Timers
//
// An identity arms at most one deadline per kind (missing, orphan). A
// deadline is a function of the identity's state that the classifier
// defines (SetDeadline); the heap holds one entry per identity, at or
// before its earliest armed deadline, and moves it when it comes due. A
// deadline that moves later, as the missing deadline does with every
// observation, therefore costs no heap operation.
//
// A Store is owned by one partition worker and is not safe for concurrent
// use. Times are Unix nanoseconds of event time; NoTime marks none.
package ownerstate

import (
	"container/heap"
	"math"
	"strings"

	"github.com/cespare/xxhash/v2"

	"github.com/driftline/driftline/pipeline/drift"
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
}

// Findings are an identity's findings, one per classification.
type Findings [drift.NumClasses]FindingState

// Identity flags.
const (
	flagDeleted       uint8 = 1 << iota // deleted:true or a tombstone
	flagNodeMismatch                    // node-agent evidence contradicts the registry
	flagOwnerIsRecord                   // the observation's owner_ref equals the record id
	flagArmedMissing                    // a missing deadline is armed
	flagArmedOrphan                     // an orphan deadline is armed
)

// Identity is everything known about one provider resource. Its record
// and observation fields are read through the Store (Record, Obs, Str).
type Identity struct {
	ks            string // the identity key, then the record id
	klen          uint16 // length of the key in ks
	flags         uint8
	disagreements uint8  // consecutive disagreeing observations, saturating
	idx           uint32 // index in the store
	findings      uint32 // 1 + index in Store.findings; 0: none yet
	rec, obs      uint32 // shape indexes; 0: none
	recCorr       Sym    // correlation_id of the record event
	obsCorr       Sym    // correlation_id of the observation event
	queued        int64  // the time of the identity's live heap entry; NoTime: none

	// RecordVersion is the record_version of the applied record.
	RecordVersion int64
	// RecordAt is the occurred_at of the record (or of the tombstone).
	RecordAt int64
	// ObsAt is the occurred_at of the newest observation.
	ObsAt int64
	// OrphanSince starts the current unowned-and-live stretch; NoTime
	// when the identity is owned or not observed live.
	OrphanSince int64
}

// Key returns the identity key provider/provider_id.
func (id *Identity) Key() string { return id.ks[:id.klen] }

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
func (id *Identity) RecordID() string { return id.ks[id.klen:] }

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
	liveExpecting, absentExpecting                     bool
	_                                                  [2]byte
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
	chunks [][]Identity
	n      int
	// index maps the xxhash of a key to its identity; keys whose hash
	// collides with another key's live in collided.
	index    map[uint64]uint32
	collided map[string]uint32
	// findings holds the findings of identities that ever had one.
	findings []Findings

	syms symtab
	// scans holds, per provider, the start of its latest completed scan.
	scans    map[string]int64
	timers   timerHeap
	armed    int // armed deadlines (flags set)
	deadline Deadline
}

// New returns an empty Store.
func New() *Store {
	s := &Store{index: make(map[uint64]uint32), collided: make(map[string]uint32), scans: make(map[string]int64)}
	s.syms.init()
	return s
}

// Len returns the number of identities.
func (s *Store) Len() int { return s.n }

// At returns the identity of index i.
func (s *Store) At(i uint32) *Identity { return &s.chunks[i>>chunkBits][i&(chunkSize-1)] }

func hashKey(provider, providerID string) uint64 {
	var buf [256]byte
	if len(provider)+1+len(providerID) > len(buf) {
		var d xxhash.Digest
		d.Reset()
		_, _ = d.WriteString(provider)
		_, _ = d.WriteString("/")
		_, _ = d.WriteString(providerID)
		return d.Sum64()
	}
	k := append(append(append(buf[:0], provider...), '/'), providerID...)
	return xxhash.Sum64(k)
}

func keyEquals(key, provider, providerID string) bool {
	return len(key) == len(provider)+1+len(providerID) && key[len(provider)] == '/' &&
		key[:len(provider)] == provider && key[len(provider)+1:] == providerID
}

// Get returns the identity of provider/providerID, creating it when create
// is set (nil otherwise). Looking up an existing identity does not
// allocate; the strings may alias a decode buffer.
func (s *Store) Get(provider, providerID string, create bool) *Identity {
	h := hashKey(provider, providerID)
	if i, ok := s.index[h]; ok {
		if id := s.At(i); keyEquals(id.Key(), provider, providerID) {
			return id
		}
		if i, ok := s.collided[provider+"/"+providerID]; ok {
			return s.At(i)
		}
	}
	if !create {
		return nil
	}
	id := s.add(provider + "/" + providerID)
	if _, taken := s.index[h]; taken {
		s.collided[id.Key()] = id.idx
	} else {
		s.index[h] = id.idx
	}
	return id
}

// add appends a new identity with key (owned by the store).
func (s *Store) add(key string) *Identity {
	i := uint32(s.n)
	if s.n&(chunkSize-1) == 0 {
		s.chunks = append(s.chunks, make([]Identity, chunkSize))
	}
	s.n++
	id := s.At(i)
	*id = Identity{ks: key, klen: uint16(len(key)), idx: i, queued: NoTime, RecordAt: NoTime, ObsAt: NoTime, OrphanSince: NoTime}
	return id
}

// Each calls fn for every identity of provider (all when provider is ""),
// in the order they were created.
func (s *Store) Each(provider string, fn func(*Identity)) {
	for c, chunk := range s.chunks {
		for i := range chunk {
			if c<<chunkBits+i >= s.n {
				return
			}
			id := &chunk[i]
			if provider == "" || id.Provider() == provider {
				fn(id)
			}
		}
	}
}

// Findings returns id's findings, allocating them on first use. The
// pointer is valid until the next call that allocates findings.
func (s *Store) Findings(id *Identity) *Findings {
	if id.findings == 0 {
		s.findings = append(s.findings, Findings{})
		id.findings = uint32(len(s.findings))
		f := &s.findings[id.findings-1]
		for k := range f {
			f[k].FirstSeen, f[k].LastSeen, f[k].ResolvedAt = NoTime, NoTime, NoTime
		}
	}
	return &s.findings[id.findings-1]
}

// PeekFindings returns id's findings, nil if it never had one.
func (s *Store) PeekFindings(id *Identity) *Findings {
	if id.findings == 0 {
		return nil
	}
	return &s.findings[id.findings-1]
}

// Record returns the shape of id's record, nil if none.
func (s *Store) Record(id *Identity) *RecordShape {
	if id.rec == 0 {
		return nil
	}
	return &s.syms.recs[id.rec]
}

// Obs returns the shape of id's newest observation, nil if none.
func (s *Store) Obs(id *Identity) *ObsShape {
	if id.obs == 0 {
		return nil
	}
	return &s.syms.obss[id.obs]
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

// Record is a platform record as the store applies it.
type Record struct {
	RecordType, RecordID, ResourceFamily, ProductID    string
	OwningDomain, OwningPackage, DomainID              string
	ExpectedState, ExpectedVersion, Quota, RouteTarget string
	RecordVersion                                      int64
	Deleted                                            bool
}

// SetRecord applies r as id's record, occurred at at with correlation
// correlationID.
func (s *Store) SetRecord(id *Identity, r *Record, at int64, correlationID string) {
	if r.RecordID != id.RecordID() {
		if id.flags&flagOwnerIsRecord != 0 {
			// The observation's owner_ref was the old record id: keep it.
			o := s.syms.obss[id.obs]
			o.OwnerRef = s.syms.Intern(id.RecordID())
			id.obs = s.syms.obsShape(o)
			id.flags &^= flagOwnerIsRecord
		}
		s.setRecordID(id, r.RecordID)
	}
	t := &s.syms
	id.rec = t.recShape(RecordShape{
		RecordType: t.Intern(r.RecordType), ResourceFamily: t.Intern(r.ResourceFamily), ProductID: t.Intern(r.ProductID),
		OwningDomain: t.Intern(r.OwningDomain), OwningPackage: t.Intern(r.OwningPackage), DomainID: t.Intern(r.DomainID),
		ExpectedState: t.Intern(r.ExpectedState), ExpectedVersion: t.Intern(r.ExpectedVersion),
		Quota: t.Intern(r.Quota), RouteTarget: t.Intern(r.RouteTarget),
	})
	id.RecordVersion, id.RecordAt, id.recCorr = r.RecordVersion, at, t.Intern(correlationID)
	id.setFlag(flagDeleted, r.Deleted)
}

// setRecordID stores rid after the key, in one new string; the index keeps
// pointing at the identity (its hash is of the key only).
func (s *Store) setRecordID(id *Identity, rid string) {
	var b strings.Builder
	b.Grow(int(id.klen) + len(rid))
	b.WriteString(id.Key())
	b.WriteString(rid)
	id.ks = b.String()
}

// SetTombstone marks id's record deleted at at (a Kafka tombstone).
func (s *Store) SetTombstone(id *Identity, at int64) {
	id.flags |= flagDeleted
	id.RecordAt = at
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
		id.ObsAt, id.obsCorr = at, t.Intern(correlationID)
		return
	}
	sh := ObsShape{ResourceFamily: t.Intern(o.ResourceFamily), ObservedState: t.Intern(o.ObservedState),
		ObservedVersion: t.Intern(o.ObservedVersion), Usage: t.Intern(o.Usage), RouteTarget: t.Intern(o.RouteTarget)}
	isRecord := o.OwnerRef != "" && id.rec != 0 && o.OwnerRef == id.RecordID()
	if !isRecord {
		sh.OwnerRef = t.Intern(o.OwnerRef)
	}
	id.setFlag(flagOwnerIsRecord, isRecord)
	id.obs = t.obsShape(sh)
	id.ObsAt, id.obsCorr = at, t.Intern(correlationID)
}

// sameObs reports whether o holds exactly the fields of id's observation.
func (s *Store) sameObs(id *Identity, o *Observation) bool {
	cur, strs := &s.syms.obss[id.obs], s.syms.Table
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

// Timer kinds.
const (
	TimerMissing uint8 = iota
	TimerOrphan
	numTimers
)

func armedFlag(kind uint8) uint8 {
	if kind == TimerOrphan {
		return flagArmedOrphan
	}
	return flagArmedMissing
}

// timer is a heap entry: identity idx has its earliest armed deadline at
// at, unless a later Arm moved it (Identity.queued tells).
type timer struct {
	at  int64
	idx uint32
}

type timerHeap []timer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	return h[i].at < h[j].at || h[i].at == h[j].at && h[i].idx < h[j].idx
}
func (h timerHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)   { *h = append(*h, x.(timer)) }
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	*h = old[:len(old)-1]
	return t
}

// Deadline returns the identity's current deadline of kind. The Store
// asks it of its owner (the classifier), whose rules define the
// deadlines; Arm must be called whenever a state change moves one.
type Deadline func(id *Identity, kind uint8) int64

// SetDeadline installs the deadline rule. It must be set before the first
// Arm.
func (s *Store) SetDeadline(d Deadline) { s.deadline = d }

// Armed reports whether id has a deadline of kind armed.
func (id *Identity) Armed(kind uint8) bool { return id.flags&armedFlag(kind) != 0 }

// Arm arms (or, with on false, disarms) id's deadline of kind, whose time
// the Deadline rule gives. An identity has one heap entry at a time, at
// or before its earliest armed deadline: a deadline that moves later (a
// new observation) costs nothing here, the entry is moved when it comes
// due; only one that moves earlier pushes a new entry.
func (s *Store) Arm(id *Identity, kind uint8, on bool) {
	f := armedFlag(kind)
	switch was := id.flags&f != 0; {
	case on && !was:
		id.flags |= f
		s.armed++
	case !on && was:
		id.flags &^= f
		s.armed--
	}
	if !on {
		return
	}
	if at := s.deadline(id, kind); id.queued == NoTime || at < id.queued {
		s.enqueue(id, at)
	}
}

// minTimerSweep is the heap size below which superseded entries are never
// swept.
const minTimerSweep = 4096

func (s *Store) enqueue(id *Identity, at int64) {
	id.queued = at
	heap.Push(&s.timers, timer{at: at, idx: id.idx})
	if len(s.timers) > minTimerSweep && len(s.timers) > 2*s.armed {
		s.sweepTimers()
	}
}

// next returns id's earliest armed deadline and its kind.
func (s *Store) next(id *Identity) (at int64, kind uint8, ok bool) {
	at = math.MaxInt64
	for k := range numTimers {
		if id.Armed(k) {
			if d := s.deadline(id, k); d < at {
				at, kind, ok = d, k, true
			}
		}
	}
	return at, kind, ok
}

// Fire calls fn for every armed deadline due at or before w, in deadline
// order per identity and in heap order across identities; the deadline is
// disarmed before fn runs (fn re-arms what the new state needs).
func (s *Store) Fire(w int64, fn func(id *Identity, kind uint8, at int64)) {
	for len(s.timers) > 0 && s.timers[0].at <= w {
		t := heap.Pop(&s.timers).(timer)
		id := s.At(t.idx)
		if id.queued != t.at {
			continue // superseded by an earlier entry
		}
		id.queued = NoTime
		for {
			at, kind, ok := s.next(id)
			switch {
			case !ok:
			case at > w:
				if id.queued == NoTime || at < id.queued {
					s.enqueue(id, at)
				}
			default:
				id.flags &^= armedFlag(kind)
				s.armed--
				fn(id, kind, at)
				continue
			}
			break
		}
	}
}

// sweepTimers drops the heap entries that no identity tracks any more.
func (s *Store) sweepTimers() {
	kept := s.timers[:0]
	for _, t := range s.timers {
		if s.At(t.idx).queued == t.at {
			kept = append(kept, t)
		}
	}
	clear(s.timers[len(kept):])
	s.timers = kept
	heap.Init(&s.timers)
}

// PendingTimers returns the number of timers in the heap, superseded ones
// included.
func (s *Store) PendingTimers() int { return len(s.timers) }

// Lifecycle state groups (CONTRACT section 4).
var (
	liveStates   = map[string]bool{"active": true, "running": true, "allocated": true, "ready": true, "attached": true, "serving": true}
	absentStates = map[string]bool{"released": true, "deleted": true, "decommissioned": true, "retired": true}
)

// LiveExpecting reports whether state expects a live provider resource.
func LiveExpecting(state string) bool { return liveStates[state] }

// AbsentExpecting reports whether state expects the resource to be gone.
func AbsentExpecting(state string) bool { return absentStates[state] }
