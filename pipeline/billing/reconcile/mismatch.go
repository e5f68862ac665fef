package reconcile

import (
	"time"

	"github.com/driftline/driftline/pipeline/contract"
)

// Mismatch is the current row of one billing_mismatch.
type Mismatch struct {
	// MismatchID is stable per (kind, usage key) for duplicate_usage, per
	// window for window_unbalanced (WindowMismatchID) and per (kind,
	// usage_id) for every other kind: "<kind>:<key or id>".
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
// (duplicate_usage) or usage_id (every other kind).
func MismatchID(kind contract.BillingKind, keyOrUsageID string) string {
	return string(kind) + ":" + keyOrUsageID
}
