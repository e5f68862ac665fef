package reconcile

import (
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/contract/decimal"
)

// WindowSize is the width of a conservation window: the UTC hour of a
// usage's occurred_at.
const WindowSize = time.Hour

// WindowKey identifies one conservation row.
type WindowKey struct {
	TenantID  string
	ProductID string
	Currency  string
	Start     int64 // Unix seconds, a multiple of WindowSize
}

// WindowMismatchID returns the mismatch_id of the window_unbalanced
// finding of window k on partition p: every partition keeps its own row of
// a window (the usage_ids of one window hash to every partition).
func WindowMismatchID(k WindowKey, p int32) string { return windowMismatchKey(k, p).String() }

func windowMismatchKey(k WindowKey, p int32) mismatchKey {
	return mismatchKey{contract.KindWindowUnbalanced, k.TenantID + "/" + k.ProductID + "/" + k.Currency + "/" +
		time.Unix(k.Start, 0).UTC().Format("2006-01-02T15") + "/p" + strconv.Itoa(int(p))}
}

// Window is the conservation row of one (tenant, product, currency, hour):
// what the reconciler knows about every usage_id whose window it is. Every
// usage_id is counted in exactly one class of each stage, so that
//
//	accepted + rated_without_usage = rated + rating_pending + not_rated + rejected
//	rated = ledgered + ledger_pending + not_ledgered + amount_mismatch (counts and rated amounts)
//	ledger_entries = ledgered + amount_mismatch + ledger_without_rated
//
// Amounts are exact decimal strings in Currency.
type Window struct {
	Key WindowKey
	// Partition is the partition of the billing topics the row counts:
	// each partition's tracker keeps its own row of a window, and the
	// window's totals are the sum over its partitions.
	Partition int32

	Accepted      int64 // usage_ids with accepted usage
	Rejected      int64 // accepted, not rated, and never to be: duplicate usage or unknown/retired unit
	RatingPending int64 // accepted, not rated, rating grace not passed
	NotRated      int64 // accepted, not rated, rating grace passed (usage_not_rated)

	Rated                   int64 // rated lines (the first per usage_id)
	RatedAmount             string
	RatedWithoutUsage       int64 // rated lines whose usage was not seen
	RatedWithoutUsageAmount string

	Ledgered                   int64 // rated lines whose ledger entry agrees
	LedgeredAmount             string
	LedgerPending              int64 // rated lines without ledger entry, ledger grace not passed
	LedgerPendingAmount        string
	NotLedgered                int64 // rated lines without ledger entry, ledger grace passed
	NotLedgeredAmount          string
	AmountMismatch             int64  // rated lines whose ledger entry disagrees
	AmountMismatchAmount       string // their rated amounts
	AmountMismatchLedgerAmount string // their posted amounts (in Currency only)

	LedgerEntries            int64 // ledger entries (the first per usage_id)
	LedgerAmount             string
	LedgerWithoutRated       int64 // ledger entries whose rated line was not seen
	LedgerWithoutRatedAmount string

	// Unexplained counts the rated lines without usage and ledger entries
	// without rated line whose grace has passed: the window is balanced
	// when it is 0.
	Unexplained int64

	// LastEventAt is the event time of the latest change.
	LastEventAt time.Time
	// Version orders the rows of one window: max(previous + 1, event time
	// of the change in µs).
	Version uint64
}

// Balanced reports whether every line of the window has what should be
// behind it.
func (w *Window) Balanced() bool { return w.Unexplained == 0 }

// windowState is the running conservation of one window.
type windowState struct {
	key WindowKey
	num uint32 // its number (usageState.win)

	accepted, rejected, ratingPending, notRated                int64
	rated, ratedWithoutUsage                                   int64
	ledgered, ledgerPending, notLedgered, amountMismatch       int64
	ledgerEntries, ledgerWithoutRated                          int64
	unexplained                                                int64
	ratedAmt, ratedWithoutUsageAmt                             sum
	ledgeredAmt, ledgerPendingAmt, notLedgeredAmt, mismatchAmt sum
	mismatchLedgerAmt, ledgerAmt, ledgerWithoutRatedAmt        sum

	live       int  // tracked usage_ids attached to the window
	unbalanced bool // the window_unbalanced finding is open
	dirty      bool
	lastAt     time.Time
	version    uint64
}

func (t *Tracker) row(w *windowState) Window {
	return Window{
		Key: w.key, Partition: t.partition, Accepted: w.accepted, Rejected: w.rejected, RatingPending: w.ratingPending, NotRated: w.notRated,
		Rated: w.rated, RatedAmount: w.ratedAmt.String(),
		RatedWithoutUsage: w.ratedWithoutUsage, RatedWithoutUsageAmount: w.ratedWithoutUsageAmt.String(),
		Ledgered: w.ledgered, LedgeredAmount: w.ledgeredAmt.String(),
		LedgerPending: w.ledgerPending, LedgerPendingAmount: w.ledgerPendingAmt.String(),
		NotLedgered: w.notLedgered, NotLedgeredAmount: w.notLedgeredAmt.String(),
		AmountMismatch: w.amountMismatch, AmountMismatchAmount: w.mismatchAmt.String(),
		AmountMismatchLedgerAmount: w.mismatchLedgerAmt.String(),
		LedgerEntries:              w.ledgerEntries, LedgerAmount: w.ledgerAmt.String(),
		LedgerWithoutRated: w.ledgerWithoutRated, LedgerWithoutRatedAmount: w.ledgerWithoutRatedAmt.String(),
		Unexplained: w.unexplained, LastEventAt: w.lastAt, Version: w.version,
	}
}

// sum is an exact running total of decimal amounts: v × 10^-MaxScale,
// printed with the largest scale of the amounts it holds (so that a total
// depends only on what it holds, not on what it held before).
type sum struct {
	v      big.Int
	scales [decimal.MaxScale + 1]int32 // amounts held, by scale
}

var pow10s = func() (p [decimal.MaxScale + 1]*big.Int) {
	for i := range p {
		p[i] = new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(i)), nil)
	}
	return p
}()

// add adds sign × d.
func (s *sum) add(d decimal.Dec, sign int64, tmp *big.Int) {
	s.scales[d.Scale()] += int32(sign)
	tmp.SetInt64(d.Coef() * sign)
	tmp.Mul(tmp, pow10s[decimal.MaxScale-d.Scale()])
	s.v.Add(&s.v, tmp)
}

func (s *sum) String() string {
	digits := new(big.Int).Abs(&s.v).String()
	if len(digits) <= decimal.MaxScale {
		digits = strings.Repeat("0", decimal.MaxScale-len(digits)+1) + digits
	}
	scale := 0
	for i := decimal.MaxScale; i > 0; i-- {
		if s.scales[i] != 0 {
			scale = i
			break
		}
	}
	out := digits[:len(digits)-decimal.MaxScale]
	if scale > 0 {
		out += "." + digits[len(digits)-decimal.MaxScale:][:scale]
	}
	if s.v.Sign() < 0 {
		out = "-" + out
	}
	return out
}

// amount returns the decimal the arena keeps at r (amount).
func (t *Tracker) amount(r astr) decimal.Dec {
	if d, ok := r.dec(); ok {
		return d
	}
	return amount(t.strs.get(r))
}

// amount parses a contract decimal; the validator admitted only decimals,
// so anything else counts as 0.
func amount(s string) decimal.Dec {
	d, err := decimal.Parse(s)
	if err != nil {
		return decimal.Dec{}
	}
	return d
}

// windowOf returns the window of usage state s and whether s belongs to
// one: the hour of its usage's occurred_at (else its rated line's, else its
// ledger entry's), its tenant and product (empty when only the ledger
// entry is known) and its currency (the rated line's, else the ledger
// entry's, else its unit's).
func (t *Tracker) windowOf(s *usageState) (WindowKey, bool) {
	var at int64
	switch {
	case s.is(usageSeen):
		at = s.at
	case s.is(ratedOK):
		at = s.rated.at
	case s.is(ledgerOK):
		at = s.ledger.at
	default:
		return WindowKey{}, false
	}
	d := t.desc(s)
	cur := d.currency
	switch {
	case s.is(ratedOK):
		cur = d.ratedCur
	case s.is(ledgerOK):
		cur = d.ledgerCur
	}
	start := eventTime(at).Unix()
	start -= ((start % int64(WindowSize/time.Second)) + int64(WindowSize/time.Second)) % int64(WindowSize/time.Second)
	return WindowKey{TenantID: t.intern.str(d.tenant), ProductID: t.intern.str(d.product), Currency: t.intern.str(cur), Start: start}, true
}

// settled reports whether nothing the reconciler expects for s is still
// missing: its usage was refused by the rater (and nothing else arrived),
// or it was accepted, rated and posted.
func settled(s *usageState) bool {
	if !s.is(usageSeen) {
		return false
	}
	if !s.is(ratedOK) {
		return s.is(explained) && !s.is(ledgerOK)
	}
	return s.is(ledgerOK)
}

// contribute adds (sign +1) or removes (sign -1) what s counts in w.
func (t *Tracker) contribute(w *windowState, s *usageState, sign int64) {
	tmp := &t.tmp
	if s.is(usageSeen) {
		w.accepted += sign
		if !s.is(ratedOK) {
			switch {
			case s.is(explained):
				w.rejected += sign
			case s.is(ratingOverdue):
				w.notRated += sign
			default:
				w.ratingPending += sign
			}
		}
	}
	if s.is(ratedOK) {
		ra := t.amount(s.rated.amount)
		w.rated += sign
		w.ratedAmt.add(ra, sign, tmp)
		if !s.is(usageSeen) {
			w.ratedWithoutUsage += sign
			w.ratedWithoutUsageAmt.add(ra, sign, tmp)
			if s.is(ratedOrphanOverdue) {
				w.unexplained += sign
			}
		}
		switch {
		case !s.is(ledgerOK) && s.is(ledgerOverdue):
			w.notLedgered += sign
			w.notLedgeredAmt.add(ra, sign, tmp)
		case !s.is(ledgerOK):
			w.ledgerPending += sign
			w.ledgerPendingAmt.add(ra, sign, tmp)
		case t.ledgerAgrees(s):
			w.ledgered += sign
			w.ledgeredAmt.add(ra, sign, tmp)
		default:
			w.amountMismatch += sign
			w.mismatchAmt.add(ra, sign, tmp)
			if t.intern.str(t.desc(s).ledgerCur) == w.key.Currency {
				w.mismatchLedgerAmt.add(t.amount(s.ledger.amount), sign, tmp)
			}
		}
	}
	if s.is(ledgerOK) {
		w.ledgerEntries += sign
		if t.intern.str(t.desc(s).ledgerCur) == w.key.Currency {
			w.ledgerAmt.add(t.amount(s.ledger.amount), sign, tmp)
		}
		if !s.is(ratedOK) {
			w.ledgerWithoutRated += sign
			w.ledgerWithoutRatedAmt.add(t.amount(s.ledger.amount), sign, tmp)
			if s.is(ledgerOrphanOverdue) {
				w.unexplained += sign
			}
		}
	}
	w.live += int(sign)
}

// detach removes what s counts from its window before s changes.
func (t *Tracker) detach(s *usageState, at time.Time) {
	if s.win == 0 {
		return
	}
	w := t.wins[s.win]
	t.contribute(w, s, -1)
	t.touch(w, at)
	s.win = 0
}

// attach adds what s counts to its window after s changed, then raises or
// resolves window_unbalanced for every window the change touched.
func (t *Tracker) attach(s *usageState, at time.Time) {
	if k, ok := t.windowOf(s); ok {
		w := t.windows[k]
		if w == nil && t.closed(k.Start) {
			// The window is past the horizon and its row was dropped
			// from memory: the row is final, this change is not counted.
			t.late++
			t.linger(s)
		} else {
			if w == nil {
				w = t.newWindow(k)
			}
			if !s.is(registered) || s.regStart() != k.Start {
				t.register(k.Start, s)
			}
			t.contribute(w, s, +1)
			s.win = w.num
			t.touch(w, at)
		}
	}
	t.settle(at)
}

// newWindow adds the window of k.
func (t *Tracker) newWindow(k WindowKey) *windowState {
	w := &windowState{key: k}
	if n := len(t.freeWins); n > 0 {
		w.num, t.freeWins = t.freeWins[n-1], t.freeWins[:n-1]
		t.wins[w.num] = w
	} else {
		w.num = uint32(len(t.wins))
		t.wins = append(t.wins, w)
	}
	t.windows[k] = w
	t.windowsByStart[k.Start] = append(t.windowsByStart[k.Start], k)
	return w
}

func (t *Tracker) touch(w *windowState, at time.Time) {
	if !w.dirty {
		w.dirty = true
		t.dirtyWindows = append(t.dirtyWindows, w)
	}
	if at.After(w.lastAt) {
		w.lastAt = at
	}
	v := uint64(0)
	if us := at.UnixMicro(); us > 0 {
		v = uint64(us)
	}
	w.version = max(w.version+1, v)
	t.touched = append(t.touched, w)
}

// settle raises window_unbalanced for a touched window that holds
// unexplained lines past their grace, and resolves it when none is left.
func (t *Tracker) settle(at time.Time) {
	for _, w := range t.touched {
		if bad := w.unexplained > 0; bad != w.unbalanced {
			w.unbalanced = bad
			t.windowFinding(w, bad, at)
		}
		if w.live == 0 && !w.unbalanced && t.closed(w.key.Start) {
			t.dropWindow(w)
		}
	}
	t.touched = t.touched[:0]
}

func (t *Tracker) windowFinding(w *windowState, open bool, at time.Time) {
	id := windowMismatchKey(w.key, t.partition)
	m, ok := t.mismatches[id]
	if !ok {
		if !open {
			return
		}
		m = mismatchState{mstate: mstate{first: nanos(at), last: nanos(at)}}
	}
	switch {
	case open && !m.open:
		t.open++
		m.open = true
	case !open && m.open:
		t.open--
		m.open = false
	default:
		return
	}
	m.last = max(m.last, nanos(at))
	m.bump(at)
	t.mismatches[id] = m
	r := &t.mismatch
	*r = Mismatch{MismatchID: id.String(), Kind: id.kind, Status: m.status(), FirstSeenAt: eventTime(m.first), LastSeenAt: eventTime(m.last), Version: m.version,
		TenantID: w.key.TenantID, ProductID: w.key.ProductID, Currency: w.key.Currency}
	// The amounts are those of the lines without what should be behind
	// them: rated lines without usage, ledger entries without rated line.
	if w.ratedWithoutUsage > 0 {
		r.RatedAmount = w.ratedWithoutUsageAmt.String()
	}
	if w.ledgerWithoutRated > 0 {
		r.LedgerAmount = w.ledgerWithoutRatedAmt.String()
	}
	t.emit(r)
}

// TakeWindows passes every window row changed since the last call to fn
// (the row is a copy) and marks them clean.
func (t *Tracker) TakeWindows(fn func(*Window)) {
	for _, w := range t.dirtyWindows {
		w.dirty = false
		if fn != nil {
			r := t.row(w)
			fn(&r)
		}
	}
	clear(t.dirtyWindows)
	t.dirtyWindows = t.dirtyWindows[:0]
}

// Windows returns the conservation rows the tracker holds, in no order.
func (t *Tracker) Windows() []Window {
	out := make([]Window, 0, len(t.windows))
	for _, w := range t.windows {
		out = append(out, t.row(w))
	}
	return out
}
