package ingest

import (
	"strconv"
	"strings"
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

// dedupeField names the envelope field of a dedupeID's identity besides
// the producer: "seq" or "event_id".
func dedupeField(id string) string {
	n, rest, _ := strings.Cut(id, ":")
	if k, err := strconv.Atoi(n); err == nil && k <= len(rest) && strings.HasPrefix(rest[k:], "/s/") {
		return "seq"
	}
	return "event_id"
}

// recentSet remembers the last capacity dedupe identities accepted by this
// gateway, each with the content digest of the event accepted under it
// (contract.EventDigest), so that a retry of the same event (same digest)
// is told from another event reusing the identity (another digest).
// Eviction is FIFO by insertion: an identity is recognised until capacity
// newer identities have been accepted after it. Memory is bounded by
// capacity times the identity length (at most ~300 bytes each) plus about
// 51 bytes of map and ring per identity; the digest adds nothing to that,
// since a map slot of a string key and a struct{} value was padded to the
// same 24 bytes (BenchmarkRecentSet measures both).
type recentSet struct {
	mu   sync.Mutex                 // mu protects set, ring and next
	set  map[string]contract.Digest // identities in ring, with their first digest
	ring []string                   // insertion order; "" marks an empty slot
	next int                        // slot the next insertion overwrites
}

// recent is an accepted identity and its content digest.
type recent struct {
	id     string
	digest contract.Digest
}

func newRecentSet(capacity int) *recentSet {
	return &recentSet{set: make(map[string]contract.Digest, capacity), ring: make([]string, capacity)}
}

// lookup returns the digest accepted under id, if id was accepted
// recently. The caller holds mu.
func (s *recentSet) lookup(id string) (contract.Digest, bool) {
	d, ok := s.set[id]
	return d, ok
}

// add records ids, evicting the oldest entries when full. An identity
// already held keeps its first digest.
func (s *recentSet) add(ids ...recent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range ids {
		if _, ok := s.set[r.id]; ok {
			continue
		}
		if old := s.ring[s.next]; old != "" {
			delete(s.set, old)
		}
		s.ring[s.next] = r.id
		s.set[r.id] = r.digest
		s.next = (s.next + 1) % len(s.ring)
	}
}

// len returns the number of identities held.
func (s *recentSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.set)
}
