package reconcile

import (
	"errors"
	"math"
	"math/big"
	"strings"
	"time"

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

// usageState is what one partition knows about one usage_id.
type usageState struct {
	id        string
	usageSeen bool
	explained bool // unknown/retired unit or duplicate: never rated, never usage_not_rated
	// Grace deadlines passed: usage without rated line, rated line without
	// ledger entry, and a rated line without usage or a ledger entry
	// without rated line (unexplained).
	ratingOverdue, ledgerOverdue, ratedOrphanOverdue, ledgerOrphanOverdue bool
	registered, lingering                                                 bool         // see prune.go
	regStart                                                              int64        // the window start s is registered to be swept with
	win                                                                   *windowState // the window s is counted in; nil when none
	at                                                                    int64        // event time of the usage, Unix ns (nanos)
	meterID                                                               string
	quantity                                                              string
	source, tenant, product, unit                                         sym
	currency                                                              sym // of the price book unit, when known
	// digest is the payload digest of the usage (contract.PayloadDigest;
	// 0: not known), conflictQuantity the quantity of the latest usage
	// that came under the same usage_id with another content.
	digest           contract.Digest
	conflictQuantity string

	rated  ratedLine  // ok when the rated line is known
	ledger ledgerLine // ok when the ledger entry is known
}

// ledgerAgrees reports whether the ledger entry posted the rated amount in
// the rated currency; both are present.
func (s *usageState) ledgerAgrees() bool {
	return amountsEqual(s.rated.amount, s.ledger.amount) && s.rated.currency == s.ledger.currency
}

type ratedLine struct {
	amount   string
	at       int64 // event time, Unix ns (nanos)
	currency sym
	ok       bool
}

type ledgerLine = ratedLine

// nanos returns event time at as the tracker keeps it: Unix nanoseconds
// (event times lie within 1678-2262), restored in UTC by eventTime.
func nanos(at time.Time) int64 { return at.UnixNano() }

func eventTime(ns int64) time.Time { return time.Unix(0, ns).UTC() }

// Tracker applies the billing rules to the events of one partition in
// event time. It is not safe for concurrent use.
type Tracker struct {
	rules Rules
	book  func() *pricebook.Book
	emit  func(*Mismatch)

	usage      map[string]*usageState        // usage_id -> state
	keys       map[usageKey]string           // usage key -> usage_id that claimed it first
	mismatches map[mismatchKey]mismatchState // mismatch -> its state (the row is described anew from the usage or window)
	mismatch   Mismatch                      // the row passed to emit, reused
	open       int
	intern     interner // the low-cardinality strings of the usage states

	newest          time.Time // newest event time applied
	bound           time.Time // caps what Advance moves newest to (SetBound); zero: none
	watermark       time.Time
	ratingDue       deadlines
	ledgerDue       deadlines
	ratedOrphanDue  deadlines // rated lines without usage
	ledgerOrphanDue deadlines // ledger entries without rated line

	// Conservation windows (window.go) and the horizon (prune.go).
	windows        map[WindowKey]*windowState
	windowsByStart map[int64][]WindowKey
	dirtyWindows   []*windowState
	touched        []*windowState
	byStart        map[int64][]string // window start -> usage_ids to sweep with it
	starts         starts
	lingering      []string
	pruned, late   int64
	sweptHour      int64 // the watermark's hour at the last check of lingering
	tmp            big.Int
	partition      int32 // names the window rows and window_unbalanced mismatches
}

// NewTracker returns a tracker that looks units up in book() and passes
// every mismatch transition to emit (the row is reused: copy it to keep
// it).
func NewTracker(rules Rules, book func() *pricebook.Book, emit func(*Mismatch)) *Tracker {
	rules.defaults()
	return &Tracker{
		rules: rules, book: book, emit: emit,
		usage:      map[string]*usageState{},
		keys:       map[usageKey]string{},
		mismatches: map[mismatchKey]mismatchState{},
		intern:     newInterner(),

		windows:        map[WindowKey]*windowState{},
		windowsByStart: map[int64][]WindowKey{},
		byStart:        map[int64][]string{},
	}
}

// SetPartition names the partition the tracker reconciles (default 0): it
// is part of its conservation rows and window_unbalanced mismatch_ids.
func (t *Tracker) SetPartition(p int32) { t.partition = p }

// Watermark returns the partition's event-time watermark.
func (t *Tracker) Watermark() time.Time { return t.watermark }

// Open returns the number of open mismatches.
func (t *Tracker) Open() int { return t.open }

func (t *Tracker) state(usageID string) *usageState {
	s := t.usage[usageID]
	if s == nil {
		s = &usageState{id: strings.Clone(usageID)}
		t.usage[s.id] = s
	}
	return s
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
// quantities. It reports whether u was such a conflict.
func (t *Tracker) ApplyUsageDigest(u *contract.Usage, d contract.Digest, at time.Time) (conflict bool) {
	defer t.Advance(at)
	var first string
	source, claimed := t.intern.lookup(u.MeteringSource)
	if claimed {
		first, claimed = t.keys[usageKey{source, u.MeteringID}]
	}
	if claimed && first == u.UsageID {
		if s := t.usage[u.UsageID]; s != nil && s.digest != 0 && d != 0 && s.digest != d {
			t.conflict(s, u, at)
			return true
		}
		return false // a redelivery (or a usage pruned past the horizon)
	}
	s := t.state(u.UsageID)
	if s.usageSeen {
		// The same usage_id under another key: other content. The first
		// one counts.
		t.conflict(s, u, at)
		return true
	}
	s.digest = d
	t.detach(s, at)
	defer t.attach(s, at)
	s.usageSeen, s.at = true, nanos(at)
	t.describeFrom(s, u.MeteringSource, u.MeteringID, u.TenantID, u.ProductID, u.UnitID, u.Quantity)
	unit, err := t.book().Lookup(u.UnitID)
	if unit != nil {
		s.currency = t.intern.get(unit.Currency) // also of a retired unit: the currency at risk
	}
	if claimed {
		// Another usage_id has this key: the rater rated (or will rate)
		// the first one only.
		s.explained = true
		t.set(mismatchKey{contract.KindDuplicateUsage, t.intern.str(s.source) + "/" + s.meterID}, s.id, s, true, at)
		return false
	}
	t.keys[usageKey{s.source, s.meterID}] = s.id
	switch {
	case errors.Is(err, pricebook.ErrUnknownUnit), errors.Is(err, pricebook.ErrRetiredUnit):
		s.explained = true
		t.set(mismatchKey{contract.KindUnknownUnit, s.id}, s.id, s, true, at)
		return false
	case err != nil:
		panic("BUG: unexpected price book lookup error: " + err.Error())
	}
	if !s.rated.ok {
		t.ratingDue.push(deadline{at: nanos(at.Add(t.rules.RatingGrace)), usageID: s.id})
	}
	return false
}

// describeFrom sets the fields of s that describe its mismatch rows,
// keeping none of the strings passed (they may alias a record's bytes):
// the low-cardinality ones interned, the others copied.
func (t *Tracker) describeFrom(s *usageState, source, meterID, tenant, product, unit, quantity string) {
	s.source, s.tenant, s.product, s.unit = t.intern.get(source), t.intern.get(tenant), t.intern.get(product), t.intern.get(unit)
	s.meterID, s.quantity = strings.Clone(meterID), strings.Clone(quantity)
}

// conflict raises conflicting_usage for usage s, which u repeats with
// other content.
func (t *Tracker) conflict(s *usageState, u *contract.Usage, at time.Time) {
	s.conflictQuantity = strings.Clone(u.Quantity)
	t.set(mismatchKey{contract.KindConflictingUsage, s.id}, s.id, s, true, at)
}

// ApplyRated applies one rated line with event time at (the rater keeps
// the usage's occurred_at). It reports whether the line is new (its
// usage_id had no rated line yet).
func (t *Tracker) ApplyRated(r *contract.Rated, at time.Time) bool {
	defer t.Advance(at)
	s := t.state(r.UsageID)
	if s.rated.ok {
		return false
	}
	t.detach(s, at)
	defer t.attach(s, at)
	s.rated = ratedLine{at: nanos(at), amount: strings.Clone(r.Amount), currency: t.intern.get(r.Currency), ok: true}
	if !s.usageSeen {
		t.orphan(&t.ratedOrphanDue, &s.ratedOrphanOverdue, s.id, at.Add(t.rules.RatingGrace))
	}
	if !s.usageSeen {
		// The usage is not here (yet): describe the mismatch rows from
		// the rated line.
		t.describeFrom(s, r.MeteringSource, r.MeteringID, r.TenantID, r.ProductID, r.UnitID, r.Quantity)
	}
	t.resolve(mismatchKey{contract.KindUsageNotRated, s.id}, s, at)
	if s.ledger.ok {
		t.compare(s.id, s)
		return true
	}
	due := at.Add(t.rules.LedgerGrace)
	if !t.watermark.Before(due) {
		// Rated after its ledger grace had already passed in event time.
		s.ledgerOverdue = true
		t.set(mismatchKey{contract.KindRatedNotLedgered, s.id}, s.id, s, true, due)
		return true
	}
	t.ledgerDue.push(deadline{at: nanos(due), usageID: s.id})
	return true
}

// ApplyLedger applies one ledger entry with event time at. A second entry
// for a usage_id is ignored (the first posting is compared).
func (t *Tracker) ApplyLedger(l *contract.LedgerEntry, at time.Time) {
	defer t.Advance(at)
	s := t.state(l.UsageID)
	if s.ledger.ok {
		return
	}
	t.detach(s, at)
	defer t.attach(s, at)
	s.ledger = ledgerLine{at: nanos(at), amount: strings.Clone(l.Amount), currency: t.intern.get(l.Currency), ok: true}
	if !s.usageSeen && !s.rated.ok {
		s.source, s.meterID = t.intern.get(l.MeteringSource), strings.Clone(l.MeteringID)
	}
	if !s.rated.ok {
		t.orphan(&t.ledgerOrphanDue, &s.ledgerOrphanOverdue, s.id, at.Add(t.rules.LedgerGrace))
		return
	}
	t.resolve(mismatchKey{contract.KindRatedNotLedgered, s.id}, s, at)
	t.compare(s.id, s)
}

// compare raises amount_mismatch when the ledger entry differs from the
// rated line; both are present.
func (t *Tracker) compare(usageID string, s *usageState) {
	if amountsEqual(s.rated.amount, s.ledger.amount) && s.rated.currency == s.ledger.currency {
		return
	}
	at := eventTime(max(s.ledger.at, s.rated.at))
	t.set(mismatchKey{contract.KindAmountMismatch, usageID}, usageID, s, true, at)
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
// whose grace the watermark has passed.
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
	due := deadline{at: math.MinInt64}
	if !t.watermark.IsZero() {
		due.at = nanos(t.watermark)
	}
	for d := range t.ratingDue.popTo(due) {
		if s := t.usage[d.usageID]; s != nil && s.usageSeen && !s.explained && !s.rated.ok && !s.ratingOverdue {
			t.detach(s, eventTime(d.at))
			s.ratingOverdue = true
			t.set(mismatchKey{contract.KindUsageNotRated, d.usageID}, d.usageID, s, true, eventTime(d.at))
			t.attach(s, eventTime(d.at))
		}
	}
	for d := range t.ledgerDue.popTo(due) {
		if s := t.usage[d.usageID]; s != nil && s.rated.ok && !s.ledger.ok && !s.ledgerOverdue {
			t.detach(s, eventTime(d.at))
			s.ledgerOverdue = true
			t.set(mismatchKey{contract.KindRatedNotLedgered, d.usageID}, d.usageID, s, true, eventTime(d.at))
			t.attach(s, eventTime(d.at))
		}
	}
	for d := range t.ratedOrphanDue.popTo(due) {
		if s := t.usage[d.usageID]; s != nil && s.rated.ok && !s.usageSeen && !s.ratedOrphanOverdue {
			t.detach(s, eventTime(d.at))
			s.ratedOrphanOverdue = true
			t.attach(s, eventTime(d.at))
		}
	}
	for d := range t.ledgerOrphanDue.popTo(due) {
		if s := t.usage[d.usageID]; s != nil && s.ledger.ok && !s.rated.ok && !s.ledgerOrphanOverdue {
			t.detach(s, eventTime(d.at))
			s.ledgerOrphanOverdue = true
			t.attach(s, eventTime(d.at))
		}
	}
	t.sweep()
}

// orphan schedules the grace of a line without what should be behind it
// (due at due) on h, or marks it overdue at once when the watermark is
// already past due. The state is detached.
func (t *Tracker) orphan(h *deadlines, overdue *bool, usageID string, due time.Time) {
	if *overdue {
		return
	}
	if !t.watermark.Before(due) {
		*overdue = true
		return
	}
	h.push(deadline{at: nanos(due), usageID: usageID})
}

// set opens (or confirms) a mismatch at event time at.
func (t *Tracker) set(id mismatchKey, usageID string, s *usageState, open bool, at time.Time) {
	ns := nanos(at)
	m, ok := t.mismatches[id]
	if !ok {
		m = mismatchState{first: ns, last: ns}
	} else if m.open && m.usageID(id) == usageID && ns <= m.last {
		return // nothing new
	}
	if !m.open && open {
		t.open++ // a reopened mismatch keeps its first_seen_at: evidence outlives the episode
	}
	m.open = true
	if id.kind == contract.KindDuplicateUsage {
		m.other = usageID
	} else if usageID != id.id {
		panic("BUG: billing: mismatch " + id.String() + " of usage_id " + usageID)
	}
	m.last = max(m.last, ns)
	m.bump(at)
	t.mismatches[id] = m
	t.emitRow(id, &m, s)
}

// resolve resolves an open mismatch at event time at.
func (t *Tracker) resolve(id mismatchKey, s *usageState, at time.Time) {
	m, ok := t.mismatches[id]
	if !ok || !m.open {
		return
	}
	t.open--
	m.open = false
	m.last = max(m.last, nanos(at))
	m.bump(at)
	t.mismatches[id] = m
	t.emitRow(id, &m, s)
}

// emitRow passes the current row of mismatch id, described from usage s,
// to emit.
func (t *Tracker) emitRow(id mismatchKey, m *mismatchState, s *usageState) {
	r := &t.mismatch
	*r = Mismatch{MismatchID: id.String(), Kind: id.kind, UsageID: m.usageID(id), Status: m.status(), FirstSeenAt: eventTime(m.first), LastSeenAt: eventTime(m.last), Version: m.version}
	t.describe(r, s)
	t.emit(r)
}

func (t *Tracker) describe(m *Mismatch, s *usageState) {
	in := &t.intern
	m.MeteringSource, m.MeteringID, m.TenantID, m.ProductID, m.UnitID, m.Quantity = in.str(s.source), s.meterID, in.str(s.tenant), in.str(s.product), in.str(s.unit), s.quantity
	m.RatedAmount, m.LedgerAmount, m.Currency = "", "", in.str(s.currency)
	if m.Kind == contract.KindConflictingUsage {
		// The conflict is between quantities; the first usage's amounts
		// are in its rated line and its own rows. (Whether its rated line
		// was applied before the conflict depends on the merge, and the
		// row must not.)
		m.ConflictQuantity = s.conflictQuantity
		return
	}
	if s.ledger.ok {
		m.LedgerAmount, m.Currency = s.ledger.amount, in.str(s.ledger.currency)
	}
	if s.rated.ok {
		m.RatedAmount, m.Currency = s.rated.amount, in.str(s.rated.currency)
	}
}

// bump moves the version of m past its last one and to the event time at
// of the transition (in µs).
func (m *mismatchState) bump(at time.Time) {
	v := uint64(0)
	if us := at.UnixMicro(); us > 0 {
		v = uint64(us)
	}
	m.version = max(m.version+1, v)
}

// deadline is a grace that ends at at for usageID.
type deadline struct {
	at      int64 // Unix ns (nanos)
	usageID string
}

// deadlines is a min-heap of deadlines by time.
type deadlines = minHeap[deadline]

//lint:ignore U1000 called through minHeap's type constraint, which staticcheck does not follow
func (d deadline) before(o deadline) bool { return d.at < o.at }
