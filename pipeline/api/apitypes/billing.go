package apitypes

import (
	"time"

	"github.com/driftline/driftline/pipeline/contract"
)

// The answers of the billing surfaces: the conservation section of /v1/status
// (billing_window) and the financial-automation flag of
// /v1/billing/automation (billing_mismatch). docs/billing-model.md defines
// both.

// BillingConservation is the billing section of GET /v1/status: the
// conservation windows (tenant, product, currency, UTC hour of the usage)
// summed per tenant and currency.
type BillingConservation struct {
	// WindowSeconds is the width of a window (3600).
	WindowSeconds int `json:"window_seconds"`
	// Windows counts the windows holding any line; WindowsUnbalanced
	// those holding a line without what should be behind it past its
	// grace (each is an open window_unbalanced mismatch).
	Windows           uint64 `json:"windows"`
	WindowsUnbalanced uint64 `json:"windows_unbalanced"`
	// Balanced is true when no window is unbalanced and the identities
	// hold for every tenant.
	Balanced bool                 `json:"balanced"`
	Tenants  []TenantConservation `json:"tenants"` // by tenant_id, currency; never null
	// Unbalanced lists the most recent unbalanced windows (at most
	// MaxUnbalancedShown), newest first; never null.
	Unbalanced []ConservationWindow `json:"unbalanced"`
	// Error is set when the section could not be read; the rest of the
	// status is still served.
	Error string `json:"error,omitempty"`
}

// MaxUnbalancedShown bounds BillingConservation.Unbalanced.
const MaxUnbalancedShown = 20

// ConservationTotals are the summed counts and exact amounts of
// billing_window rows (docs/billing-model.md, "Conservation windows").
type ConservationTotals struct {
	Accepted           uint64 `json:"accepted"`
	Rejected           uint64 `json:"rejected"`
	RatingPending      uint64 `json:"rating_pending"`
	NotRated           uint64 `json:"not_rated"`
	Rated              uint64 `json:"rated"`
	RatedWithoutUsage  uint64 `json:"rated_without_usage"`
	Ledgered           uint64 `json:"ledgered"`
	LedgerPending      uint64 `json:"ledger_pending"`
	NotLedgered        uint64 `json:"not_ledgered"`
	AmountMismatch     uint64 `json:"amount_mismatch"`
	LedgerEntries      uint64 `json:"ledger_entries"`
	LedgerWithoutRated uint64 `json:"ledger_without_rated"`
	Unexplained        uint64 `json:"unexplained"`

	RatedAmount              string `json:"rated_amount"`
	RatedWithoutUsageAmount  string `json:"rated_without_usage_amount"`
	LedgeredAmount           string `json:"ledgered_amount"`
	LedgerPendingAmount      string `json:"ledger_pending_amount"`
	NotLedgeredAmount        string `json:"not_ledgered_amount"`
	AmountMismatchAmount     string `json:"amount_mismatch_amount"`
	LedgerAmount             string `json:"ledger_amount"`
	LedgerWithoutRatedAmount string `json:"ledger_without_rated_amount"`
}

// TenantConservation is the conservation of one tenant in one currency.
type TenantConservation struct {
	TenantID          string `json:"tenant_id"` // empty: postings for usage nobody rated nor reported
	Currency          string `json:"currency"`
	Windows           uint64 `json:"windows"`
	WindowsUnbalanced uint64 `json:"windows_unbalanced"`
	ConservationTotals
	// Conserved reports the three identities on the totals:
	// accepted + rated_without_usage = rated + rating_pending + not_rated + rejected;
	// rated = ledgered + ledger_pending + not_ledgered + amount_mismatch (counts and amounts);
	// ledger_entries = ledgered + amount_mismatch + ledger_without_rated.
	Conserved bool `json:"conserved"`
}

// ConservationWindow is one window (its partitions summed).
type ConservationWindow struct {
	TenantID    string    `json:"tenant_id"`
	ProductID   string    `json:"product_id"`
	Currency    string    `json:"currency"`
	WindowStart time.Time `json:"window_start"`
	ConservationTotals
	// Balanced: no line without what should be behind it past its grace
	// (unexplained = 0). Conserved: the identities hold.
	Balanced  bool `json:"balanced"`
	Conserved bool `json:"conserved"`
}

// ConservationPage is the answer of GET /v1/billing/conservation.
type ConservationPage struct {
	Windows   []ConservationWindow `json:"windows"` // newest first, then tenant, product, currency; never null
	Count     int                  `json:"count"`
	Truncated bool                 `json:"truncated"` // more windows match than limit
}

// AutomationStoppingKinds are the billing_mismatch kinds whose open rows
// stop financial automation for their tenant and product: the money path
// disagrees or is missing a step. duplicate_usage does not stop it (the
// rater refused the duplicate; the first usage_id is the truth and is
// rated once); it is reported among the reasons.
var AutomationStoppingKinds = contract.Strings([]contract.BillingKind{contract.KindUsageNotRated, contract.KindRatedNotLedgered,
	contract.KindAmountMismatch, contract.KindUnknownUnit, contract.KindWindowUnbalanced})

// Automation is the answer of GET /v1/billing/automation: whether
// financial automation (invoicing, payouts, credits) for a tenant, and
// optionally one product, must stop.
type Automation struct {
	TenantID  string `json:"tenant_id"`
	ProductID string `json:"product_id,omitempty"` // empty: every product of the tenant
	// Stopped is true while an open mismatch of a stopping kind names the
	// tenant (and product), or names no tenant at all (a posting for usage
	// nobody reported: it could be anyone's).
	Stopped bool `json:"stopped"`
	// OpenMismatches counts the open mismatches of stopping kinds behind
	// Stopped; AmountAtRisk sums their amounts at risk per currency.
	OpenMismatches uint64       `json:"open_mismatches"`
	AmountAtRisk   []MoneyRisk  `json:"amount_at_risk"` // by currency; never null
	Reasons        []StopReason `json:"reasons"`        // every open kind, stopping or not; never null
	// Products breaks the answer down per product (only when no product
	// was asked for); never null.
	Products []ProductAutomation `json:"products"`
	// AsOf is the newest updated_at of the billing_mismatch rows read (the
	// reconciler's last write about them); null when there were none.
	AsOf *time.Time `json:"as_of"`
}

// ProductAutomation is the flag of one product of the tenant.
type ProductAutomation struct {
	ProductID      string      `json:"product_id"`
	Stopped        bool        `json:"stopped"`
	OpenMismatches uint64      `json:"open_mismatches"`
	AmountAtRisk   []MoneyRisk `json:"amount_at_risk"`
}

// StopReason is one kind of open mismatch behind (or beside) the flag.
type StopReason struct {
	Kind  string `json:"kind"`
	Stops bool   `json:"stops"` // the kind stops automation
	// Scope is "tenant" for the tenant's own rows, "unattributed" for
	// window_unbalanced rows that name no tenant.
	Scope        string      `json:"scope"`
	Open         uint64      `json:"open"`
	AmountAtRisk []MoneyRisk `json:"amount_at_risk"`
}

// MoneyRisk is an exact amount in one currency.
type MoneyRisk struct {
	Currency string `json:"currency"`
	Amount   string `json:"amount"`
}
