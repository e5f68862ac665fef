package rater

import (
	"strings"

	"github.com/driftline/driftline/pipeline/contract"
)

// keyState remembers, per usage key (metering_source/metering_id), the
// usage_id that first claimed it and the digest of its payload
// (contract.PayloadDigest). It is what makes rating exactly-once per
// usage_id even when usage.events holds an event twice (at-least-once
// producers): a redelivered usage_id (same payload) is skipped, the same
// usage_id with another payload (a corrected quantity sent under the same
// id) is a conflict, quarantined and never rated a second time, and a
// second usage_id for the same key is duplicate_usage, never a second
// rated line.
//
// The state of a partition is rebuilt on assignment by replaying its
// usage partition up to the group's committed offset (restore.go); changes
// made while processing a transaction are staged and applied only when the
// transaction commits.
type keyState struct {
	// parts holds the committed state of each owned partition (by the
	// partition a key hashes to).
	parts map[int32]map[string]claim
	// staged holds the changes of the transaction in progress.
	staged map[string]staged
}

// claim is the usage that claimed a key first.
type claim struct {
	usageID string
	digest  contract.Digest // of its payload; 0 when not known
}

type staged struct {
	part int32
	claim
}

func newKeyState() *keyState {
	return &keyState{parts: map[int32]map[string]claim{}, staged: map[string]staged{}}
}

// verdict says what to do with a valid usage event.
type verdict uint8

const (
	verdictNew        verdict = iota // first sight of the key: rate it
	verdictRedelivery                // same usage_id and payload seen: change nothing
	verdictConflict                  // same usage_id seen with another payload: quarantine, never rate again
	verdictDuplicate                 // another usage_id has the key
	verdictNotOwned                  // the key's partition is not ours
)

// check classifies usage u whose key hashes to partition part and whose
// payload has digest d, and stages the key if it is new. It returns the
// key's first claim for duplicates and conflicts.
func (s *keyState) check(part int32, u *contract.Usage, key string, d contract.Digest) (verdict, claim) {
	m, ok := s.parts[part]
	if !ok {
		return verdictNotOwned, claim{}
	}
	first, seen := m[key]
	if !seen {
		if st, ok := s.staged[key]; ok {
			first, seen = st.claim, true
		}
	}
	switch {
	case !seen:
		s.staged[key] = staged{part: part, claim: claim{strings.Clone(u.UsageID), d}} // u may alias a record and a reused decoder
		return verdictNew, claim{}
	case first.usageID != u.UsageID:
		return verdictDuplicate, first
	case first.digest == d || first.digest == 0 || d == 0:
		return verdictRedelivery, claim{}
	}
	return verdictConflict, first
}

// commit applies the staged changes.
func (s *keyState) commit() {
	for k, st := range s.staged {
		if m := s.parts[st.part]; m != nil {
			m[k] = st.claim
		}
	}
	clear(s.staged)
}

// abort drops the staged changes.
func (s *keyState) abort() { clear(s.staged) }

// keys returns the number of keys remembered.
func (s *keyState) keys() int {
	n := 0
	for _, m := range s.parts {
		n += len(m)
	}
	return n
}
