package rater

import (
	"math"
	"slices"
	"time"

	"github.com/driftline/driftline/pipeline/billing/claims"
	"github.com/driftline/driftline/pipeline/contract"
)

// keyState remembers, per usage key (the pair of metering_source and
// metering_id, claims.AppendUsageKey), the usage_id that first claimed it
// and the digest of its payload (contract.PayloadDigest). It is what
// makes rating exactly-once per usage_id even when usage.events holds an
// event twice (at-least-once producers): a redelivered usage_id (same
// payload) is skipped, the same usage_id with another payload (a
// corrected quantity sent under the same id) is a conflict, quarantined
// and never rated a second time, and a second usage_id for the same key
// is duplicate_usage, never a second rated line.
//
// Memory is bounded by the horizon, in event time: each partition (by
// the partition a key hashes to) has a watermark, the newest occurred_at
// of its usage, capped by each record's broker timestamp so that a
// producer's clock running ahead cannot move it. A claim is kept in the
// generation of its usage's occurred_at (horizon/4 of event time wide)
// and forgotten once the generation ends before the watermark less the
// horizon; usage that occurred before the watermark less the horizon is
// late (verdictLate): it is quarantined, never rated, since its key may
// have been forgotten. A redelivery repeats its occurred_at, so it is
// either found or late: a usage_id is never rated twice. What the horizon
// gives up is duplicate_usage between usage that occurred further apart
// than the horizon.
//
// Claims are stored without pointers (the garbage collector does not
// scan them): each generation keeps its entries (digest, usage_id, the
// usage key less the end it shares with the usage_id) in arena chunks and
// an open-addressing table from the usage key's 64-bit hash to its entry
// (pipeline/billing/claims). Lookups compare the key itself, so keys
// whose hashes collide are told apart: dedupe is exact.
//
// The state of a partition is rebuilt on assignment by replaying its
// usage partition up to the group's committed offset through check, the
// same decisions in the same order (restore.go). Changes made while
// processing a transaction are applied at once and undone if it aborts.
type keyState struct {
	horizon time.Duration
	span    int64 // width of a generation, ns of event time
	// parts holds the state of each owned partition (by the partition a
	// key hashes to).
	parts map[int32]*partKeys
	// undo lists the claims added by the transaction in progress;
	// touched the partitions whose watermark it moved (with the
	// watermark before it).
	undo    []undoClaim
	touched map[*partKeys]int64
}

// partKeys is one partition's claims.
type partKeys struct {
	// watermark is the newest event time applied (unix ns; noWatermark:
	// none).
	watermark int64
	// gens are the generations by start, oldest first.
	gens claims.Gens
}

// undoClaim is one claim added by the transaction in progress.
type undoClaim struct {
	gen  *claims.Generation
	hash uint64
	ref  claims.Ref
}

// claim is the usage that claimed a key first.
type claim struct {
	usageID string
	digest  contract.Digest // of its payload; 0 when not known
}

func newKeyState(horizon time.Duration) *keyState {
	span := int64(horizon / 4)
	if span <= 0 {
		span = int64(time.Hour)
	}
	return &keyState{horizon: horizon, span: span, parts: map[int32]*partKeys{}, touched: map[*partKeys]int64{}}
}

// noWatermark is the watermark of a partition that has applied no
// usage: the earliest time an int64 holds (contract.MinTime), at or
// before every event time. Its floor is itself, so no usage is late and
// no claim forgotten, whenever the usage occurred. 0 would not do: usage
// that occurred before 1970 would never raise it, while its floor, 0 less
// the horizon, forgets the claims of that usage.
const noWatermark = math.MinInt64

// newPart returns the empty claims of a partition.
func (s *keyState) newPart() *partKeys {
	return &partKeys{watermark: noWatermark, gens: claims.Gens{Span: s.span}}
}

// verdict says what to do with a valid usage event.
type verdict uint8

const (
	verdictNew        verdict = iota // first sight of the key: rate it
	verdictRedelivery                // same usage_id and payload seen: change nothing
	verdictConflict                  // same usage_id seen with another payload: quarantine, never rate again
	verdictDuplicate                 // another usage_id has the key
	verdictNotOwned                  // the key's partition is not ours
	verdictLate                      // occurred before the partition's watermark less the horizon
)

// usageEvent is what check needs of one usage event.
type usageEvent struct {
	part int32  // the partition its key hashes to
	key  []byte // its usage key (contract.UsageKey: its Kafka key)
	// claim is the key it claims (claims.AppendUsageKey), copied when
	// claimed; nil when that is key.
	claim   []byte
	hash    uint64 // hashKey of the key it claims
	usageID string // copied when claimed
	digest  contract.Digest
	at      int64 // occurred_at, unix ns
	ts      int64 // the record's broker timestamp, unix ns; 0: none
}

// check classifies usage e, claims its key if it is new, and moves the
// partition's watermark. It returns the key's first claim for duplicates
// and conflicts; with verdictLate, the bound e.at fell behind (unix ns).
func (s *keyState) check(e *usageEvent) (verdict, claim, int64) {
	p, ok := s.parts[e.part]
	if !ok {
		return verdictNotOwned, claim{}, 0
	}
	floor := p.floor(s.horizon)
	if e.at < floor {
		return verdictLate, claim{}, floor
	}
	if w := min(e.at, cmpOr(e.ts, e.at)); w > p.watermark {
		if _, ok := s.touched[p]; !ok {
			s.touched[p] = p.watermark
		}
		p.watermark = w
		floor = p.floor(s.horizon)
	}
	h, key := e.hash, e.claimKey()
	if c, ok := p.gens.Find(h, key, floor); ok {
		first := claim{usageID: string(c.UsageID), digest: c.Digest}
		switch {
		case first.usageID != e.usageID:
			return verdictDuplicate, first, 0
		case first.digest == e.digest || first.digest == 0 || e.digest == 0:
			return verdictRedelivery, claim{}, 0
		}
		return verdictConflict, first, 0
	}
	g := p.gens.Gen(e.at)
	s.undo = append(s.undo, undoClaim{gen: g, hash: h, ref: g.Add(h, key, e.usageID, e.digest)})
	return verdictNew, claim{}, 0
}

// claimKey returns the key e claims.
func (e *usageEvent) claimKey() []byte {
	if e.claim != nil {
		return e.claim
	}
	return e.key
}

// setClaim sets the key e claims, and its hash, when that is not its
// usage key: its metering_source (source) is empty or holds a slash, so
// that the usage key may be another pair's (claims.AppendUsageKey). It
// appends the key to buf and returns buf.
func (e *usageEvent) setClaim(buf []byte, source, meteringID string) []byte {
	if claims.PlainSource(source) {
		return buf
	}
	start := len(buf)
	buf = claims.AppendUsageKey(buf, source, meteringID)
	e.claim = buf[start:len(buf):len(buf)]
	e.hash = hashKey(e.claim)
	return buf
}

// hashKey is the index key of a usage key.
func hashKey(key []byte) uint64 { return claims.Hash(key) }

func cmpOr(a, b int64) int64 {
	if a != 0 {
		return a
	}
	return b
}

// floor is the event time before which usage of p is late (unix ns): the
// watermark less the horizon, saturated at the earliest int64 (usage may
// occur as early as contract.MinTime).
func (p *partKeys) floor(horizon time.Duration) int64 { return claims.Floor(p.watermark, horizon) }

// commit keeps the transaction's claims and forgets the generations
// past the horizon of the partitions it moved.
func (s *keyState) commit() {
	s.undo = s.undo[:0]
	if cap(s.undo) > 1<<16 {
		s.undo = nil // a restore's replay batch, larger than a round
	}
	for p := range s.touched {
		floor := p.floor(s.horizon)
		p.gens.Forget(floor)
	}
	clear(s.touched)
}

// abort undoes the transaction's claims and watermarks. Their arena bytes
// stay until the generation is dropped.
func (s *keyState) abort() {
	for i := len(s.undo) - 1; i >= 0; i-- {
		u := s.undo[i]
		u.gen.Remove(u.hash, u.ref)
	}
	s.undo = s.undo[:0]
	for p, w := range s.touched {
		p.watermark = w
	}
	clear(s.touched)
}

// drop forgets partition part (revoked, lost, or a restore that failed).
func (s *keyState) drop(part int32) {
	p := s.parts[part]
	if p == nil {
		return
	}
	delete(s.parts, part)
	delete(s.touched, p)
	s.undo = slices.DeleteFunc(s.undo, func(u undoClaim) bool { return slices.Contains(p.gens.List, u.gen) })
}

// keys returns the number of keys remembered.
func (s *keyState) keys() int {
	n := 0
	for _, p := range s.parts {
		n += p.gens.Claims()
	}
	return n
}

// bytes returns the memory the claims hold, approximately.
func (s *keyState) bytes() int {
	n := 0
	for _, p := range s.parts {
		n += p.gens.Bytes()
	}
	return n
}
