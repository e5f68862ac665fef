package reconcile

import "time"

// Kinds of billing_mismatch (CONTRACT section 5).
const (
	KindUsageNotRated    = "usage_not_rated"
	KindRatedNotLedgered = "rated_not_ledgered"
	KindAmountMismatch   = "amount_mismatch"
	KindDuplicateUsage   = "duplicate_usage"
	KindUnknownUnit      = "unknown_unit"
	// KindWindowUnbalanced extends the contract's five kinds: a
	// conservation window that does not balance after its graces. It holds
	// a rated line with no accepted usage behind it, or a ledger entry with
	// no rated line behind it (window.go, docs/billing-model.md). Its
	// mismatch_id is WindowMismatchID.
	KindWindowUnbalanced = "window_unbalanced"
)

// Kinds lists every kind in a stable order.
var Kinds = []string{KindUsageNotRated, KindRatedNotLedgered, KindAmountMismatch, KindDuplicateUsage, KindUnknownUnit, KindWindowUnbalanced}

// Statuses of a mismatch.
const (
	StatusOpen     = "open"
	StatusResolved = "resolved"
)

// Mismatch is the current row of one billing_mismatch.
type Mismatch struct {
	// MismatchID is stable per (kind, usage key) for duplicate_usage, per
	// window for window_unbalanced (WindowMismatchID) and per (kind,
	// usage_id) for every other kind: "<kind>:<key or id>".
	MismatchID     string
	Kind           string
	UsageID        string
	MeteringSource string
	MeteringID     string
	TenantID       string
	ProductID      string
	UnitID         string
	Quantity       string // decimal string, as the usage or rated line wrote it
	RatedAmount    string // decimal string, empty when there is no rated line
	LedgerAmount   string // decimal string, empty when there is no ledger entry
	Currency       string // the rated line's currency, else the ledger entry's
	Status         string // open | resolved
	FirstSeenAt    time.Time
	LastSeenAt     time.Time
	// Version orders the rows of one mismatch: max(previous+1, event time
	// of the transition in µs).
	Version uint64
}

// MismatchID returns the mismatch_id of kind for a usage key
// (duplicate_usage) or usage_id (every other kind).
func MismatchID(kind, keyOrUsageID string) string { return kind + ":" + keyOrUsageID }
