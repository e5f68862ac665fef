package ingest

import (
	"strconv"
	"sync"

	"github.com/driftline/driftline/pipeline/contract"
)

// dedupeID returns the dedupe identity of an event (CONTRACT section 2):
// (producer, seq) when seq is present, else (producer, event_id). The
// producer is length-prefixed so that no two distinct identities share a
// string.
func dedupeID(env *contract.Envelope) string {
	p := strconv.Itoa(len(env.Producer)) + ":" + env.Producer
	if env.HasSeq {
		return p + "/s/" + strconv.FormatUint(env.Seq, 10)
	}
	return p + "/e/" + env.EventID
}

// recentSet remembers the last capacity dedupe identities accepted by this
// gateway. Eviction is FIFO by insertion: an identity is recognised until
// capacity newer identities have been accepted after it. Memory is bounded
// by capacity times the identity length (at most ~300 bytes each).
type recentSet struct {
	mu   sync.Mutex          // mu protects set, ring and next
	set  map[string]struct{} // identities in ring
	ring []string            // insertion order; "" marks an empty slot
	next int                 // slot the next insertion overwrites
}

func newRecentSet(capacity int) *recentSet {
	return &recentSet{set: make(map[string]struct{}, capacity), ring: make([]string, capacity)}
}

// contains reports whether id was accepted recently.
func (s *recentSet) contains(id string) bool {
	s.mu.Lock()
	_, ok := s.set[id]
	s.mu.Unlock()
	return ok
}

// add records ids, evicting the oldest entries when full.
func (s *recentSet) add(ids ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if _, ok := s.set[id]; ok {
			continue
		}
		if old := s.ring[s.next]; old != "" {
			delete(s.set, old)
		}
		s.ring[s.next] = id
		s.set[id] = struct{}{}
		s.next = (s.next + 1) % len(s.ring)
	}
}

// len returns the number of identities held.
func (s *recentSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.set)
}
