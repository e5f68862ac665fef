package reconcile

import (
	"strings"
	"time"

	"github.com/driftline/driftline/pipeline/contract"
)

// Mismatch is the current row of one billing_mismatch.
type Mismatch struct {
	// MismatchID is stable per (kind, metering_source, metering_id) for
	// duplicate_usage, per window for window_unbalanced
	// (WindowMismatchID) and per (kind, usage_id) for every other kind:
	// "<kind>:<key or id>", where the key of a pair is its usage key, or
	// when its metering_source holds a slash (the usage key may be another
	// pair's) a slash, the length of the metering_source and a slash
	// before it (claims.AppendUsageKey).
	MismatchID     string
	Kind           contract.BillingKind
	UsageID        string
	MeteringSource string
	MeteringID     string
	TenantID       string
	ProductID      string
	UnitID         string
	Quantity       string // decimal string, as the usage or rated line wrote it
	// ConflictQuantity is set on conflicting_usage: the quantity of the
	// latest usage that repeated the usage_id with other content (Quantity
	// is the first one's, the one rated).
	ConflictQuantity string
	RatedAmount      string // decimal string, empty when there is no rated line
	LedgerAmount     string // decimal string, empty when there is no ledger entry
	Currency         string // the rated line's currency, else the ledger entry's
	Status           contract.FindingStatus
	FirstSeenAt      time.Time
	LastSeenAt       time.Time
	// Version orders the rows of one mismatch: max(previous+1, event time
	// of the transition in µs).
	Version uint64
}

// MismatchID returns the mismatch_id of kind for a usage key
// (duplicate_usage: claims.AppendUsageKey of its pair) or usage_id (every
// other kind).
func MismatchID(kind contract.BillingKind, keyOrUsageID string) string {
	return string(kind) + ":" + keyOrUsageID
}

// mismatchKey identifies a mismatch in the tracker: its kind and the usage
// key, usage_id or window it is about (the mismatch_id without its kind),
// so that the key shares the usage state's strings.
type mismatchKey struct {
	kind contract.BillingKind
	id   string
}

// String returns the mismatch_id.
func (k mismatchKey) String() string { return MismatchID(k.kind, k.id) }

// mstate is what the tracker keeps of a mismatch between its
// transitions: the rest of its row is described anew from the usage (or
// window) at each transition, so a mismatch holds no strings of its own.
type mstate struct {
	first, last int64 // event times, Unix ns (nanos)
	version     uint64
	open        bool
}

func (m *mstate) status() contract.FindingStatus {
	if m.open {
		return contract.StatusOpen
	}
	return contract.StatusResolved
}

// mismatchState is a mismatch kept by key (Tracker.mismatches).
type mismatchState struct {
	mstate
	// other is the usage_id of a duplicate_usage (the others' is the
	// key's id, a window's none).
	other string
}

// sym is an interned string: its number in the tracker's interner.
type sym uint32

// interner numbers the low-cardinality strings of the usage states
// (tenant, product, unit, currency, metering_source): a state holds 4
// bytes for each instead of a string header, and no string aliases a
// record. The zero sym is the empty string. It grows with the distinct
// values, which the price book and the tenants bound.
type interner struct {
	ids  map[string]sym
	strs []string
}

func newInterner() interner { return interner{ids: map[string]sym{"": 0}, strs: []string{""}} }

// get returns the sym of s, numbering it if it is new.
func (in *interner) get(s string) sym {
	if v, ok := in.ids[s]; ok {
		return v
	}
	c := strings.Clone(s)
	v := sym(len(in.strs))
	in.ids[c] = v
	in.strs = append(in.strs, c)
	return v
}

// str returns the string of v.
func (in *interner) str(v sym) string { return in.strs[v] }

// desc is what the rows of a usage state say besides its own strings. A
// state holds the 4-byte number of its desc (descs) instead of seven syms:
// the usage of a tenant, product and unit share one.
type desc struct {
	source, tenant, product, unit sym
	currency                      sym // of the price book unit, when known
	ratedCur, ledgerCur           sym // the rated line's and ledger entry's
}

// descRef is the number of a desc in the tracker's descs; 0 is the zero
// desc.
type descRef uint32

// descs numbers the distinct descs of the usage states. Like the
// interner it only grows; its size is the distinct combinations of
// source, tenant, product, unit and currencies, which the price book and
// the tenants bound.
type descs struct {
	ids map[desc]descRef
	all []desc
	// steps memoizes with, per currency field and desc: the path of most
	// usage (its unit's currency, then its rated line's, then its ledger
	// entry's) costs one map lookup, not four.
	steps [3][]descStep
}

// descStep is one memoized step of descs.with: to is the desc whose
// currency field is v (0: none memoized).
type descStep struct {
	v  sym
	to descRef
}

// curField names a currency field of a desc.
type curField uint8

const (
	unitCurrency curField = iota
	ratedCurrency
	ledgerCurrency
)

func newDescs() descs { return descs{ids: map[desc]descRef{{}: 0}, all: []desc{{}}} }

// ref returns the number of d, numbering it if it is new.
func (ds *descs) ref(d desc) descRef {
	if r, ok := ds.ids[d]; ok {
		return r
	}
	r := descRef(len(ds.all))
	ds.ids[d] = r
	ds.all = append(ds.all, d)
	return r
}

// withCurrency returns d with its currency field f set to v.
func (d desc) withCurrency(f curField, v sym) desc {
	switch f {
	case unitCurrency:
		d.currency = v
	case ratedCurrency:
		d.ratedCur = v
	case ledgerCurrency:
		d.ledgerCur = v
	}
	return d
}

// with returns the number of desc r with its currency field f set to v.
func (ds *descs) with(r descRef, f curField, v sym) descRef {
	memo := ds.steps[f]
	if int(r) < len(memo) && memo[r].to != 0 && memo[r].v == v {
		return memo[r].to
	}
	to := ds.ref(ds.all[r].withCurrency(f, v))
	if n := int(r) + 1; len(memo) < n {
		memo = append(memo, make([]descStep, n-len(memo))...)
		ds.steps[f] = memo
	}
	memo[r] = descStep{v: v, to: to}
	return to
}
