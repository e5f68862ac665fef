// Package ownerstate holds what one joiner partition knows about each
// identity (provider/provider_id): the platform record that owns it, the
// latest provider observation, and the state of each of its drift
// findings. It also keeps the partition's event-time timers, so deadlines
// (staleness, orphan grace) fire in event time as the watermark advances.
//
// A Store is owned by one partition worker and is not safe for concurrent
// use.
package ownerstate

import (
	"container/heap"
	"time"

	"github.com/driftline/driftline/pipeline/drift"
	"github.com/driftline/driftline/pipeline/event"
)

// Finding statuses in FindingState.
const (
	None uint8 = iota
	Open
	Resolved
)

// FindingState is the joiner's memory of one (identity, classification)
// finding.
type FindingState struct {
	Status        uint8
	FirstSeen     time.Time
	LastSeen      time.Time
	ResolvedAt    time.Time
	RetryCount    uint32
	Version       uint64 // grows with every transition written
	CorrelationID string
}

// Identity is everything known about one provider resource.
type Identity struct {
	Key        string // provider/provider_id
	Provider   string
	ProviderID string

	// Record is the owning platform record with the highest
	// record_version seen, nil if none.
	Record *event.PlatformRecord
	// RecordAt is the occurred_at of Record (or of the tombstone).
	RecordAt time.Time
	// Deleted is set by deleted:true or a tombstone.
	Deleted bool
	// RecordCorrelation is the correlation_id of the record event.
	RecordCorrelation string

	// Obs is the newest observation by occurred_at, nil if none.
	Obs *event.Observation
	// ObsAt is the occurred_at of Obs.
	ObsAt time.Time
	// ObsCorrelation is the correlation_id of Obs.
	ObsCorrelation string

	// OrphanSince starts the current unowned-and-live stretch; zero when
	// the identity is owned or not observed live.
	OrphanSince time.Time
	// Disagreements counts consecutive applied observations that
	// disagree with the record.
	Disagreements int
	// NodeMismatch is set while the node-agent evidence of this identity
	// (maas/<node_id>) contradicts the platform registry: a cloned
	// identity or a foreign certificate fingerprint (package nodeagent).
	NodeMismatch bool

	// missingAt and orphanAt are the armed deadlines (zero: none).
	missingAt, orphanAt time.Time

	Findings [drift.NumClasses]FindingState
}

// Owned reports whether a live platform record owns the identity: a record
// exists, is not deleted, and does not expect the resource to be gone.
func (id *Identity) Owned() bool {
	return id.Record != nil && !id.Deleted && !AbsentExpecting(id.Record.ExpectedState)
}

// Timer kinds.
const (
	TimerMissing uint8 = iota
	TimerOrphan
)

type timer struct {
	at   time.Time
	id   *Identity
	kind uint8
}

type timerHeap []timer

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h timerHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)        { *h = append(*h, x.(timer)) }
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	*h = old[:len(old)-1]
	return t
}

// Store is one partition's identities, completed scans and timers.
type Store struct {
	ids map[string]*Identity
	// scans holds, per provider, the start of its latest completed scan.
	scans  map[string]time.Time
	timers timerHeap
}

// New returns an empty Store.
func New() *Store {
	return &Store{ids: make(map[string]*Identity), scans: make(map[string]time.Time)}
}

// Get returns the identity of key, creating it when create is set.
func (s *Store) Get(provider, providerID string, create bool) *Identity {
	key := event.IdentityKey(provider, providerID)
	id := s.ids[key]
	if id == nil && create {
		id = &Identity{Key: key, Provider: provider, ProviderID: providerID}
		s.ids[key] = id
	}
	return id
}

// Len returns the number of identities.
func (s *Store) Len() int { return len(s.ids) }

// Each calls fn for every identity of provider (all when provider is "").
func (s *Store) Each(provider string, fn func(*Identity)) {
	for _, id := range s.ids {
		if provider == "" || id.Provider == provider {
			fn(id)
		}
	}
}

// CompleteScan records a completed scan of provider that started at
// started, and reports whether it is newer than the last one known.
func (s *Store) CompleteScan(provider string, started time.Time) bool {
	if prev, ok := s.scans[provider]; ok && !started.After(prev) {
		return false
	}
	s.scans[provider] = started
	return true
}

// LastScan returns the start of provider's latest completed scan.
func (s *Store) LastScan(provider string) (time.Time, bool) {
	t, ok := s.scans[provider]
	return t, ok
}

// Arm sets the identity's deadline of kind to at (zero disarms it).
// Re-arming the same deadline is free; superseded timers are skipped when
// they fire.
func (s *Store) Arm(id *Identity, kind uint8, at time.Time) {
	cur := &id.missingAt
	if kind == TimerOrphan {
		cur = &id.orphanAt
	}
	if cur.Equal(at) {
		return
	}
	*cur = at
	if !at.IsZero() {
		heap.Push(&s.timers, timer{at: at, id: id, kind: kind})
	}
}

// Fire pops every armed timer due at or before w, in deadline order, and
// calls fn with its identity and deadline.
func (s *Store) Fire(w time.Time, fn func(id *Identity, kind uint8, at time.Time)) {
	for len(s.timers) > 0 && !s.timers[0].at.After(w) {
		t := heap.Pop(&s.timers).(timer)
		cur := t.id.missingAt
		if t.kind == TimerOrphan {
			cur = t.id.orphanAt
		}
		if !cur.Equal(t.at) {
			continue // superseded
		}
		if t.kind == TimerOrphan {
			t.id.orphanAt = time.Time{}
		} else {
			t.id.missingAt = time.Time{}
		}
		fn(t.id, t.kind, t.at)
	}
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
