package reconcile

import (
	"encoding/binary"
	"errors"
	"math"
	"math/big"
	"strings"
	"time"

	"github.com/driftline/driftline/pipeline/billing/claims"
	"github.com/driftline/driftline/pipeline/billing/pricebook"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/contract/decimal"
)

// Rules are the event-time windows of the billing rules.
type Rules struct {
	// RatingGrace is how long (event time) accepted usage may wait for its
	// rated line before it is usage_not_rated. Default 5m.
	RatingGrace time.Duration
	// LedgerGrace is how long (event time) a rated line may wait for its
	// ledger entry before it is rated_not_ledgered. Default 15m.
	LedgerGrace time.Duration
	// AllowedLateness: the watermark trails the newest event time of the
	// partition by this much. DefaultRules has 30s; zero is none.
	AllowedLateness time.Duration
	// Horizon bounds memory: once the watermark passes a conservation
	// window's end + Horizon, the settled usage of the window is dropped
	// from memory (prune.go). Default 48h; never shorter than the longer
	// grace.
	Horizon time.Duration
}

// DefaultRules returns the contract's default windows.
func DefaultRules() Rules {
	return Rules{RatingGrace: 5 * time.Minute, LedgerGrace: 15 * time.Minute, AllowedLateness: 30 * time.Second, Horizon: 48 * time.Hour}
}

func (r *Rules) defaults() {
	d := DefaultRules()
	if r.RatingGrace <= 0 {
		r.RatingGrace = d.RatingGrace
	}
	if r.LedgerGrace <= 0 {
		r.LedgerGrace = d.LedgerGrace
	}
	if r.AllowedLateness < 0 {
		r.AllowedLateness = 0
	}
	if r.Horizon <= 0 {
		r.Horizon = d.Horizon
	}
	r.Horizon = max(r.Horizon, r.RatingGrace, r.LedgerGrace)
}

// usageState is what one partition knows about one usage_id. It holds no
// pointer (store.go): its strings are in the tracker's arena, its window
// is a number, and what its rows say besides its own strings (source,
// tenant, product, unit, currencies) is one interned desc.
type usageState struct {
	id       astr
	meterID  astr
	quantity astr

	rated  ratedLine  // when ratedOK
	ledger ledgerLine // when ledgerOK
	// misFirst, misLast, misVersion and misKind's misOpen bit are the
	// state (mstate) of the first mismatch raised about the usage_id, of
	// kind usageKinds[misKind&misKindMask-1] (0: none yet); any other is
	// in Tracker.byUsage.
	misFirst, misLast int64
	misVersion        uint64

	at int64 // event time of the usage, Unix ns (nanos)
	// digest is the payload digest of the usage (contract.PayloadDigest;
	// 0: not known).
	digest contract.Digest

	regHour int32 // the window start s is registered to be swept with, in hours since 1970 (regStart)
	slot    slot
	gen     uint32 // see stateRef
	win     uint32 // the number of the window s is counted in; 0 when none
	desc    descRef

	flags   stateFlag
	misKind uint8 // and misOpen
}

const (
	misKindMask = 7
	misOpen     = 1 << 7 // in misKind: the first mismatch is open
)

// stateFlag is one bit of usageState.flags.
type stateFlag uint16

const (
	inUse      stateFlag = 1 << iota // the state holds a usage_id
	registered                       // s is registered to be swept with regStart (prune.go)
	claimsKey                        // the usage claimed its usage key first (Tracker.keys)
	usageSeen
	explained // unknown/retired unit or duplicate: never rated, never usage_not_rated
	// Grace deadlines passed: usage without rated line, rated line without
	// ledger entry, and a rated line without usage or a ledger entry
	// without rated line (unexplained).
	ratingOverdue
	ledgerOverdue
	ratedOrphanOverdue
	ledgerOrphanOverdue
	lingering // see prune.go
	ratedOK   // the rated line is known
	ledgerOK  // the ledger entry is known
)

// is reports whether flag f of s is set.
func (s *usageState) is(f stateFlag) bool { return s.flags&f != 0 }

// mark sets flag f of s.
func (s *usageState) mark(f stateFlag) { s.flags |= f }

// strs returns the arena strings of s (the usage_id first: the others
// may be suffixes of it).
func (s *usageState) strs() [5]*astr {
	return [5]*astr{&s.id, &s.meterID, &s.quantity, &s.rated.amount, &s.ledger.amount}
}

// regStart returns the start of the window s is registered with (Unix
// seconds).
func (s *usageState) regStart() int64 { return int64(s.regHour) * int64(WindowSize/time.Second) }

// ref names s for the heaps and lists that may outlive it.
func (s *usageState) ref() stateRef { return stateRef{s.slot, s.gen} }

// ledgerAgrees reports whether the ledger entry posted the rated amount in
// the rated currency; both are present.
func (t *Tracker) ledgerAgrees(s *usageState) bool {
	d := t.desc(s)
	if s.rated.amount&decTag != 0 && s.rated.amount == s.ledger.amount {
		return d.ratedCur == d.ledgerCur // one decimal prints one way
	}
	return amountsEqual(t.strs.get(s.rated.amount), t.strs.get(s.ledger.amount)) && d.ratedCur == d.ledgerCur
}

type ratedLine struct {
	amount astr
	at     int64 // event time, Unix ns (nanos)
}

type ledgerLine = ratedLine

// nanos returns event time at as the tracker keeps it: Unix nanoseconds
// (event times lie within contract.MinTime and contract.MaxTime),
// restored in UTC by eventTime. A time beyond them takes the nearer end,
// where UnixNano would wrap around: the watermark trails an event near
// contract.MinTime by the allowed lateness, and a grace deadline follows
// one near contract.MaxTime by its grace.
func nanos(at time.Time) int64 {
	switch {
	case contract.TimeInRange(at):
		return at.UnixNano()
	case at.Before(contract.MinTime):
		return math.MinInt64
	}
	return math.MaxInt64
}

func eventTime(ns int64) time.Time { return time.Unix(0, ns).UTC() }

// Tracker applies the billing rules to the events of one partition in
// event time. It is not safe for concurrent use.
type Tracker struct {
	rules Rules
	book  func() *pricebook.Book
	emit  func(*Mismatch)

	states slab  // the usage states, by usage_id (store.go)
	strs   arena // their strings
	// claims holds, per usage key, the usage_id that claimed it first,
	// by generation of the usage's event time (horizon/4 wide): forgotten
	// once the generation ends before the watermark less the horizon.
	// The claims of usage held are its state (keys finds it by the
	// hash of its usage key); a claim moves to the generations when its
	// usage is dropped.
	claims claims.Gens
	keys   table
	keyBuf []byte // the usage key being looked up (usageKey)
	// The mismatches of usage_ids held are in their state (the first)
	// and byUsage (by slot and kind: the others); the rest by key:
	// duplicate_usage, window_unbalanced, and the open mismatches of
	// usage_ids dropped by the horizon (parked until their usage_id comes
	// back). The row is described anew from the usage or window.
	byUsage    map[uint64]mstate
	mismatches map[mismatchKey]mismatchState
	parked     int      // parked mismatches in mismatches
	mismatch   Mismatch // the row passed to emit, reused
	open       int
	intern     interner // the low-cardinality strings of the usage states
	descs      descs    // the descs of the usage states

	newest          time.Time // newest event time applied
	bound           time.Time // caps what Advance moves newest to (SetBound); zero: none
	watermark       time.Time
	ratingDue       graces
	ledgerDue       graces
	ratedOrphanDue  graces // rated lines without usage
	ledgerOrphanDue graces // ledger entries without rated line
	graceDropMin    int    // the fewest deadlines a heap drops from (minGraces)

	// Conservation windows (window.go) and the horizon (prune.go).
	windows        map[WindowKey]*windowState
	windowsByStart map[int64][]WindowKey
	wins           []*windowState // by number (usageState.win); 0 is none
	freeWins       []uint32
	dirtyWindows   []*windowState
	touched        []*windowState
	byStart        map[int64]struct{} // the window starts usage is registered with (starts holds them in order)
	starts         starts
	lingering      []stateRef
	pruned, late   int64
	lateUsage      int64 // usage refused as late (Late)
	sweptHour      int64 // the watermark's hour at the last check of lingering
	tmp            big.Int
	partition      int32 // names the window rows and window_unbalanced mismatch_ids
	// full bounds the rows one call emits, and behind tells that
	// deadlines passed wait for Resume (SetFull).
	full   func() bool
	behind bool
}

// NewTracker returns a tracker that looks units up in book() and passes
// every mismatch transition to emit (the row is reused, and its strings
// may alias the tracker's memory: copy them to keep them beyond the next
// flush of the batch).
func NewTracker(rules Rules, book func() *pricebook.Book, emit func(*Mismatch)) *Tracker {
	rules.defaults()
	span := int64(rules.Horizon / 4)
	return &Tracker{
		rules: rules, book: book, emit: emit,
		states:     newSlab(),
		claims:     claims.Gens{Span: span},
		byUsage:    map[uint64]mstate{},
		mismatches: map[mismatchKey]mismatchState{},
		intern:     newInterner(),
		descs:      newDescs(),

		ratingDue:       graces{pending: ratingPending, overdue: ratingOverdue, kind: contract.KindUsageNotRated},
		ledgerDue:       graces{pending: ledgerPending, overdue: ledgerOverdue, kind: contract.KindRatedNotLedgered},
		ratedOrphanDue:  graces{pending: ratedOrphanPending, overdue: ratedOrphanOverdue},
		ledgerOrphanDue: graces{pending: ledgerOrphanPending, overdue: ledgerOrphanOverdue},
		graceDropMin:    minGraces,

		windows:        map[WindowKey]*windowState{},
		windowsByStart: map[int64][]WindowKey{},
		wins:           []*windowState{nil},
		byStart:        map[int64]struct{}{},
	}
}

// spill keeps the tracker's states and their strings within pg's budget,
// the rest in scratch files (spill.go); the tracker must not hold any
// state yet. Only the reconciler calls it, for it calls pg.trim only
// where no tracker holds a state.
func (t *Tracker) spill(pg *pager) {
	t.states.spill(pg)
	t.strs.spill(pg)
}

// close lets the tracker's scratch files go, if it spills.
func (t *Tracker) close() {
	t.states.sf.close(&t.states)
	t.strs.sf.close(&t.strs)
}

// SetPartition names the partition the tracker reconciles (default 0): it
// is part of its conservation rows and window_unbalanced mismatch_ids.
func (t *Tracker) SetPartition(p int32) { t.partition = p }

// Watermark returns the partition's event-time watermark.
func (t *Tracker) Watermark() time.Time { return t.watermark }

// Open returns the number of open mismatches.
func (t *Tracker) Open() int { return t.open }

// desc returns the desc of s, not to be changed: a change is made to a
// copy, kept by setting s.desc to descs.ref of it.
func (t *Tracker) desc(s *usageState) *desc { return &t.descs.all[s.desc] }

// state returns the state of usageID, created if need be.
func (t *Tracker) state(usageID string) *usageState {
	if s := t.states.find(&t.strs, usageID); s != nil {
		return s
	}
	s := t.states.add(&t.strs, usageID)
	if t.parked > 0 {
		t.unpark(s, usageID)
	}
	return s
}

// usageKey returns the usage key of (source, meterID) as the claims keep
// it: the length of source, source, meterID (so that no two pairs share
// one). It is valid until the next call.
func (t *Tracker) usageKey(source, meterID string) []byte {
	t.keyBuf = appendUsageKey(t.keyBuf[:0], source, meterID)
	return t.keyBuf
}

func appendUsageKey(b []byte, source, meterID string) []byte {
	b = binary.AppendUvarint(b, uint64(len(source)))
	return append(append(b, source...), meterID...)
}

// floor is the event time before which usage is late (Unix ns), and
// whether there is one yet.
func (t *Tracker) floor() (int64, bool) {
	if t.watermark.IsZero() {
		return 0, false
	}
	return claims.Floor(nanos(t.watermark), t.rules.Horizon), true
}

// Late reports whether usage that occurred at at is late: before the
// watermark less the horizon, where the usage keys it would be judged
// against may be forgotten. It returns that bound too. Late usage is not
// applied (ApplyUsageDigest ignores it); the reconciler rejects it as
// late_event, as the rater does.
func (t *Tracker) Late(at time.Time) (time.Time, bool) {
	f, ok := t.floor()
	if !ok || nanos(at) >= f {
		return time.Time{}, false
	}
	return eventTime(f), true
}

// ApplyUsage applies one accepted usage event with event time at, its
// payload's digest not known: a usage_id seen before is a redelivery
// unless its usage key differs.
func (t *Tracker) ApplyUsage(u *contract.Usage, at time.Time) { _ = t.ApplyUsageDigest(u, 0, at) }

// ApplyUsageDigest applies one accepted usage event with event time at
// and payload digest d (contract.PayloadDigest). A usage_id seen before
// with the same digest is a redelivery and changes nothing; with another
// digest (or under another usage key) it is conflicting_usage: the first
// usage stays the one rated and reconciled, and the mismatch names both
// quantities. It reports whether u was such a conflict. Late usage (Late)
// changes nothing.
func (t *Tracker) ApplyUsageDigest(u *contract.Usage, d contract.Digest, at time.Time) (conflict bool) {
	if _, late := t.Late(at); late {
		t.lateUsage++
		return false
	}
	defer t.Advance(at)
	key := t.usageKey(u.MeteringSource, u.MeteringID)
	h := claims.Hash(key)
	claimed, same := t.claimOf(h, key, u)
	if claimed && same {
		if s := t.states.find(&t.strs, u.UsageID); s != nil && s.digest != 0 && d != 0 && s.digest != d {
			t.conflict(s, u, at)
			return true
		}
		return false // a redelivery (or a usage pruned past the horizon)
	}
	s := t.state(u.UsageID)
	if s.is(usageSeen) {
		// The same usage_id under another key: other content. The first
		// one counts.
		t.conflict(s, u, at)
		return true
	}
	s.digest = d
	t.detach(s, at)
	defer t.attach(s, at)
	if s.is(ratedOK) {
		t.ratedOrphanDue.settled++ // its rated line's wait, if any, ends
	}
	s.at = nanos(at)
	s.mark(usageSeen)
	t.describeFrom(s, u.MeteringSource, u.MeteringID, u.TenantID, u.ProductID, u.UnitID, u.Quantity)
	unit, err := t.book().Lookup(u.UnitID)
	if unit != nil {
		s.desc = t.descs.with(s.desc, unitCurrency, t.intern.get(unit.Currency)) // also of a retired unit: the currency at risk
	}
	if claimed {
		// Another usage_id has this key: the rater rated (or will rate)
		// the first one only.
		s.mark(explained)
		t.setDuplicate(string(claims.AppendUsageKey(nil, u.MeteringSource, u.MeteringID)), s, at)
		return false
	}
	s.mark(claimsKey)
	t.keys.insert(h, s.slot)
	switch {
	case errors.Is(err, pricebook.ErrUnknownUnit), errors.Is(err, pricebook.ErrRetiredUnit):
		s.mark(explained)
		t.set(contract.KindUnknownUnit, s, at)
		return false
	case err != nil:
		panic("BUG: unexpected price book lookup error: " + err.Error())
	}
	if !s.is(ratedOK) {
		t.ratingDue.schedule(at.Add(t.rules.RatingGrace), s)
	}
	return false
}

// claimOf reports whether usage key key (hash h) of u is claimed, and if
// so whether by u's usage_id. A claim is forgotten once the generation of
// its usage's event time ends before the floor, whether its usage is
// still held or not, so that dropping a usage changes no decision.
func (t *Tracker) claimOf(h uint64, key []byte, u *contract.Usage) (claimed, same bool) {
	floor, hasFloor := t.floor()
	if i, ok := t.keys.find(h, func(i slot) bool {
		c := t.states.at(i)
		return t.intern.str(t.desc(c).source) == u.MeteringSource && t.strs.get(c.meterID) == u.MeteringID
	}); ok {
		c := t.states.at(i)
		if !hasFloor || !t.forgotten(c.at, floor) {
			return true, t.strs.get(c.id) == u.UsageID
		}
		t.unclaim(c, h)
	}
	if !hasFloor {
		floor = math.MinInt64
	}
	if c, ok := t.claims.Find(h, key, floor); ok {
		return true, string(c.UsageID) == u.UsageID
	}
	return false, false
}

// forgotten reports whether the claim of usage that occurred at at (ns)
// is forgotten at floor: its generation ends at or before floor.
func (t *Tracker) forgotten(at, floor int64) bool { return t.claims.Ended(at, floor) }

// stateKey returns the usage key of state s (usageKey).
func (t *Tracker) stateKey(s *usageState) []byte {
	return t.usageKey(t.intern.str(t.desc(s).source), t.strs.get(s.meterID))
}

// unclaim removes the claim of state s, whose key hashes to h.
func (t *Tracker) unclaim(s *usageState, h uint64) {
	t.keys.remove(h, s.slot)
	s.flags &^= claimsKey
}

// describeFrom sets the fields of s that describe its mismatch rows,
// keeping none of the strings passed (they may alias a record's bytes):
// the low-cardinality ones interned, the others copied into the arena.
func (t *Tracker) describeFrom(s *usageState, source, meterID, tenant, product, unit, quantity string) {
	d := *t.desc(s)
	d.source, d.tenant, d.product, d.unit = t.intern.get(source), t.intern.get(tenant), t.intern.get(product), t.intern.get(unit)
	s.desc = t.descs.ref(d)
	t.strs.setSuffix(&s.meterID, s.id, meterID)
	t.strs.setDec(&s.quantity, quantity)
}

// conflict raises conflicting_usage for usage s, which u repeats with
// other content.
func (t *Tracker) conflict(s *usageState, u *contract.Usage, at time.Time) {
	t.states.setConflictQuantity(&t.strs, s, u.Quantity)
	t.set(contract.KindConflictingUsage, s, at)
}

// ApplyRated applies one rated line with event time at (the rater keeps
// the usage's occurred_at). It reports whether the line is new (its
// usage_id had no rated line yet).
func (t *Tracker) ApplyRated(r *contract.Rated, at time.Time) bool {
	defer t.Advance(at)
	s := t.state(r.UsageID)
	if s.is(ratedOK) {
		return false
	}
	t.detach(s, at)
	defer t.attach(s, at)
	if s.is(usageSeen) {
		t.ratingDue.settled++ // the usage's wait for its rating, if any, ends
	}
	if s.is(ledgerOK) {
		t.ledgerOrphanDue.settled++ // the ledger entry's wait, if any, ends
	}
	s.rated = ratedLine{at: nanos(at), amount: t.strs.putDec(r.Amount)}
	s.mark(ratedOK)
	s.desc = t.descs.with(s.desc, ratedCurrency, t.intern.get(r.Currency))
	if !s.is(usageSeen) {
		t.orphan(&t.ratedOrphanDue, s, at.Add(t.rules.RatingGrace))
	}
	if !s.is(usageSeen) {
		// The usage is not here (yet): describe the mismatch rows from
		// the rated line.
		t.describeFrom(s, r.MeteringSource, r.MeteringID, r.TenantID, r.ProductID, r.UnitID, r.Quantity)
	}
	t.resolve(contract.KindUsageNotRated, s, at)
	if s.is(ledgerOK) {
		t.compare(s)
		return true
	}
	due := at.Add(t.rules.LedgerGrace)
	if !t.watermark.Before(due) {
		// Rated after its ledger grace had already passed in event time.
		s.mark(ledgerOverdue)
		t.set(contract.KindRatedNotLedgered, s, due)
		return true
	}
	t.ledgerDue.schedule(due, s)
	return true
}

// ApplyLedger applies one ledger entry with event time at. A second entry
// for a usage_id is ignored (the first posting is compared).
func (t *Tracker) ApplyLedger(l *contract.LedgerEntry, at time.Time) {
	defer t.Advance(at)
	s := t.state(l.UsageID)
	if s.is(ledgerOK) {
		return
	}
	t.detach(s, at)
	defer t.attach(s, at)
	if s.is(ratedOK) {
		t.ledgerDue.settled++ // the rated line's wait, if any, ends
	}
	s.ledger = ledgerLine{at: nanos(at), amount: t.strs.putDec(l.Amount)}
	s.mark(ledgerOK)
	s.desc = t.descs.with(s.desc, ledgerCurrency, t.intern.get(l.Currency))
	if !s.is(usageSeen) && !s.is(ratedOK) {
		d := *t.desc(s)
		d.source = t.intern.get(l.MeteringSource)
		s.desc = t.descs.ref(d)
		t.strs.setSuffix(&s.meterID, s.id, l.MeteringID)
	}
	if !s.is(ratedOK) {
		t.orphan(&t.ledgerOrphanDue, s, at.Add(t.rules.LedgerGrace))
		return
	}
	t.resolve(contract.KindRatedNotLedgered, s, at)
	t.compare(s)
}

// compare raises amount_mismatch when the ledger entry differs from the
// rated line; both are present.
func (t *Tracker) compare(s *usageState) {
	if t.ledgerAgrees(s) {
		return
	}
	at := eventTime(max(s.ledger.at, s.rated.at))
	t.set(contract.KindAmountMismatch, s, at)
}

// amountsEqual compares two decimal strings exactly (1.50 equals 1.5); a
// string that is not a decimal equals only itself.
func amountsEqual(a, b string) bool {
	if a == b {
		return true
	}
	da, err1 := decimal.Parse(a)
	db, err2 := decimal.Parse(b)
	if err1 != nil || err2 != nil {
		return false
	}
	return decimal.Equal(da, db)
}

// SetBound caps the event time that the events applied from now on may
// move the watermark to: an event at at moves it as an event at
// min(at, bound) would, while its own state keeps at. The reconciler sets
// it to each record's broker timestamp (docs/event-time.md). A zero bound
// removes the cap.
func (t *Tracker) SetBound(bound time.Time) { t.bound = bound }

// Advance moves event time to at (if newer) and raises every mismatch
// whose grace the watermark has passed, up to the bound of SetFull.
func (t *Tracker) Advance(at time.Time) {
	if !t.bound.IsZero() && at.After(t.bound) {
		at = t.bound
	}
	if at.After(t.newest) {
		t.newest = at
		if w := at.Add(-t.rules.AllowedLateness); w.After(t.watermark) {
			t.watermark = w
		}
	}
	t.behind = false
	due := deadline{at: math.MinInt64}
	if !t.watermark.IsZero() {
		due.at = nanos(t.watermark)
	}
	for _, g := range [...]*graces{&t.ratingDue, &t.ledgerDue, &t.ratedOrphanDue, &t.ledgerOrphanDue} {
		for d := range g.popTo(due) {
			if s := t.states.get(d.ref); g.pending(s) {
				passed := eventTime(d.at)
				t.detach(s, passed)
				s.mark(g.overdue)
				if g.kind != "" {
					t.set(g.kind, s, passed)
				}
				t.attach(s, passed)
				if t.full != nil && t.full() {
					// The rest is the next call's: Resume.
					t.behind = true
					return
				}
			}
		}
		g.drop(t)
	}
	t.sweep()
}

// SetFull bounds what one call emits: once full reports true after a
// deadline that passed emitted its row, the tracker stops there and is
// Behind until Resume has passed the rest. Nil: no bound.
func (t *Tracker) SetFull(full func() bool) { t.full = full }

// Behind reports whether deadlines the watermark has passed wait for
// Resume (SetFull). Nothing else may be applied to t before: the rows
// would then differ from those of a tracker never bounded.
func (t *Tracker) Behind() bool { return t.behind }

// Resume goes on passing the deadlines the watermark has passed, within
// the bound of SetFull: the tracker may still be Behind after it.
func (t *Tracker) Resume() { t.Advance(time.Time{}) }

// CatchUp passes every deadline the watermark has passed, whatever the
// bound of SetFull, when the tracker is Behind.
func (t *Tracker) CatchUp() {
	if !t.behind {
		return
	}
	full := t.full
	t.full = nil
	t.Resume()
	t.full = full
}

// A grace deadline is pending while its state still waits for what the
// deadline is about; once not, it never is again (a state's flags are
// only ever set, and a dropped state's reference finds nothing), and
// popping it does nothing.

func ratingPending(s *usageState) bool {
	return s != nil && s.is(usageSeen) && !s.is(explained) && !s.is(ratedOK) && !s.is(ratingOverdue)
}

func ledgerPending(s *usageState) bool {
	return s != nil && s.is(ratedOK) && !s.is(ledgerOK) && !s.is(ledgerOverdue)
}

func ratedOrphanPending(s *usageState) bool {
	return s != nil && s.is(ratedOK) && !s.is(usageSeen) && !s.is(ratedOrphanOverdue)
}

func ledgerOrphanPending(s *usageState) bool {
	return s != nil && s.is(ledgerOK) && !s.is(ratedOK) && !s.is(ledgerOrphanOverdue)
}

// graces is a heap of grace deadlines that drops the ones no longer
// pending before their time, once half of it may be such: the deadlines
// of all usage applied before its rated lines (a catch-up, a rater back
// from an outage) would otherwise stay in memory for the whole grace.
type graces struct {
	deadlines
	pending func(*usageState) bool // whether a state still waits (ratingPending ...)
	overdue stateFlag              // set on a state whose grace passed
	// kind is the mismatch a passed grace opens; none for a line without
	// usage or rated line, which counts as unexplained in its window.
	kind contract.BillingKind
	// settled counts the changes since the last drop that may have ended
	// a deadline's wait (at least as many as ended one).
	settled int
}

// schedule pushes the deadline due of s, unless due lies after
// contract.MaxTime: no watermark passes it, and it has no Unix
// nanoseconds to be kept in.
func (g *graces) schedule(due time.Time, s *usageState) {
	if due.After(contract.MaxTime) {
		return
	}
	g.push(deadline{at: nanos(due), ref: s.ref()})
}

// minGraces is the fewest deadlines a heap drops from
// (Tracker.graceDropMin): below it a pass over the heap is not worth its
// memory.
const minGraces = 1 << 16

// drop drops the deadlines no longer pending, when half of the heap may
// be such.
func (g *graces) drop(t *Tracker) {
	if g.Len() < t.graceDropMin || 2*g.settled < g.Len() {
		return
	}
	g.filter(func(d deadline) bool { return g.pending(t.states.get(d.ref)) })
	g.settled = 0
}

// orphan schedules the grace of a line of s without what should be
// behind it (due at due) on h, or sets s's overdue flag of h at once when
// the watermark is already past due. The state is detached.
func (t *Tracker) orphan(h *graces, s *usageState, due time.Time) {
	if s.is(h.overdue) {
		return
	}
	if !t.watermark.Before(due) {
		s.mark(h.overdue)
		return
	}
	h.schedule(due, s)
}

// usageKinds are the kinds of mismatch kept per usage_id, in the order
// of their number in byUsage keys.
var usageKinds = [...]contract.BillingKind{contract.KindUsageNotRated, contract.KindRatedNotLedgered, contract.KindAmountMismatch, contract.KindUnknownUnit, contract.KindConflictingUsage}

// kindIndex returns the index of kind in usageKinds.
func kindIndex(kind contract.BillingKind) uint8 {
	for i, k := range usageKinds {
		if k == kind {
			return uint8(i)
		}
	}
	panic("BUG: billing: " + string(kind) + " is not kept per usage_id")
}

// byUsageKey returns the byUsage key of the mismatch of kind i about s.
func byUsageKey(i uint8, s *usageState) uint64 { return uint64(s.slot)<<3 | uint64(i) }

// mget returns the mismatch of kind about s, if there is one.
func (t *Tracker) mget(kind contract.BillingKind, s *usageState) (mstate, bool) {
	i := kindIndex(kind)
	switch s.misKind & misKindMask {
	case i + 1:
		return mstate{first: s.misFirst, last: s.misLast, version: s.misVersion, open: s.misKind&misOpen != 0}, true
	case 0:
		return mstate{}, false
	}
	m, ok := t.byUsage[byUsageKey(i, s)]
	return m, ok
}

// mput stores the mismatch of kind about s.
func (t *Tracker) mput(kind contract.BillingKind, s *usageState, m mstate) {
	i := kindIndex(kind)
	if k := s.misKind & misKindMask; k == 0 || k == i+1 {
		s.misKind, s.misFirst, s.misLast, s.misVersion = i+1, m.first, m.last, m.version
		if m.open {
			s.misKind |= misOpen
		}
		return
	}
	t.byUsage[byUsageKey(i, s)] = m
}

// set opens (or confirms) the mismatch of kind about usage s at event
// time at.
func (t *Tracker) set(kind contract.BillingKind, s *usageState, at time.Time) {
	ns := nanos(at)
	m, ok := t.mget(kind, s)
	if !ok {
		m = mstate{first: ns, last: ns}
	} else if m.open && ns <= m.last {
		return // nothing new
	}
	t.opened(&m, ns, at)
	t.mput(kind, s, m)
	t.emitRow(kind, t.strs.get(s.id), t.strs.get(s.id), &m, s)
}

// setDuplicate opens (or confirms) the duplicate_usage of usage key key
// (claims.AppendUsageKey of the pair), naming usage s.
func (t *Tracker) setDuplicate(key string, s *usageState, at time.Time) {
	id := mismatchKey{contract.KindDuplicateUsage, key}
	ns := nanos(at)
	usageID := t.strs.get(s.id)
	m, ok := t.mismatches[id]
	if !ok {
		id.id = strings.Clone(key)
		m = mismatchState{mstate: mstate{first: ns, last: ns}}
	} else if m.open && m.other == usageID && ns <= m.last {
		return // nothing new
	}
	if m.other != usageID {
		m.other = strings.Clone(usageID)
	}
	t.opened(&m.mstate, ns, at)
	t.mismatches[id] = m
	t.emitRow(id.kind, id.id, m.other, &m.mstate, s)
}

// opened moves m to open at event time at (ns).
func (t *Tracker) opened(m *mstate, ns int64, at time.Time) {
	if !m.open {
		t.open++ // a reopened mismatch keeps its first_seen_at: evidence outlives the episode
	}
	m.open = true
	m.last = max(m.last, ns)
	m.bump(at)
}

// resolve resolves the open mismatch of kind about usage s at event time
// at.
func (t *Tracker) resolve(kind contract.BillingKind, s *usageState, at time.Time) {
	m, ok := t.mget(kind, s)
	if !ok || !m.open {
		return
	}
	t.open--
	m.open = false
	m.last = max(m.last, nanos(at))
	m.bump(at)
	t.mput(kind, s, m)
	t.emitRow(kind, t.strs.get(s.id), t.strs.get(s.id), &m, s)
}

// park moves the mismatches of usage s, about to be dropped, out of
// byUsage: the resolved ones are forgotten, the open ones kept by
// usage_id until it comes back (unpark).
func (t *Tracker) park(s *usageState) {
	for i, kind := range usageKinds {
		m, ok := t.mget(kind, s)
		if !ok {
			continue
		}
		if s.misKind&misKindMask != uint8(i)+1 {
			delete(t.byUsage, byUsageKey(uint8(i), s))
		}
		if m.open {
			t.mismatches[mismatchKey{kind, strings.Clone(t.strs.get(s.id))}] = mismatchState{mstate: m}
			t.parked++
		}
	}
}

// unpark moves the parked mismatches of usageID back to its new state s.
func (t *Tracker) unpark(s *usageState, usageID string) {
	for _, kind := range usageKinds {
		id := mismatchKey{kind, usageID}
		if m, ok := t.mismatches[id]; ok {
			delete(t.mismatches, id)
			t.parked--
			t.mput(kind, s, m.mstate)
		}
	}
}

// emitRow passes the current row of mismatch kind:key of usage usageID,
// in state m, described from usage s, to emit.
func (t *Tracker) emitRow(kind contract.BillingKind, key, usageID string, m *mstate, s *usageState) {
	r := &t.mismatch
	*r = Mismatch{MismatchID: MismatchID(kind, key), Kind: kind, UsageID: usageID, Status: m.status(), FirstSeenAt: eventTime(m.first), LastSeenAt: eventTime(m.last), Version: m.version}
	t.describe(r, s)
	t.emit(r)
}

func (t *Tracker) describe(m *Mismatch, s *usageState) {
	in, d := &t.intern, t.desc(s)
	m.MeteringSource, m.MeteringID, m.TenantID, m.ProductID, m.UnitID, m.Quantity = in.str(d.source), t.strs.get(s.meterID), in.str(d.tenant), in.str(d.product), in.str(d.unit), t.strs.get(s.quantity)
	m.RatedAmount, m.LedgerAmount, m.Currency = "", "", in.str(d.currency)
	if m.Kind == contract.KindConflictingUsage {
		// The conflict is between quantities; the first usage's amounts
		// are in its rated line and its own rows. (Whether its rated line
		// was applied before the conflict depends on the merge, and the
		// row must not.)
		m.ConflictQuantity = t.strs.get(t.states.conflictQuantity(s))
		return
	}
	if s.is(ledgerOK) {
		m.LedgerAmount, m.Currency = t.strs.get(s.ledger.amount), in.str(d.ledgerCur)
	}
	if s.is(ratedOK) {
		m.RatedAmount, m.Currency = t.strs.get(s.rated.amount), in.str(d.ratedCur)
	}
}

// bump moves the version of m past its last one and to the event time at
// of the transition (in µs).
func (m *mstate) bump(at time.Time) {
	v := uint64(0)
	if us := at.UnixMicro(); us > 0 {
		v = uint64(us)
	}
	m.version = max(m.version+1, v)
}

// deadline is a grace that ends at at for the usage ref names.
type deadline struct {
	at  int64 // Unix ns (nanos)
	ref stateRef
}

// deadlines is a min-heap of deadlines by time.
type deadlines = minHeap[deadline]

//lint:ignore U1000 called through minHeap's type constraint, which staticcheck does not follow
func (d deadline) before(o deadline) bool { return d.at < o.at }
