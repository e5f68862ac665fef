package contract

// Classification names what kind of drift a finding is (CONTRACT section
// 4). It is the drift_evidence.classification column and the first part of
// every evidence_id.
type Classification string

// Classifications of CONTRACT section 4.
const (
	ClassOrphan   Classification = "orphan_provider_resource"
	ClassMissing  Classification = "missing_provider_resource"
	ClassStale    Classification = "stale_lifecycle_state"
	ClassIdentity Classification = "identity_mismatch"
	ClassQuota    Classification = "quota_or_capacity_mismatch"
	ClassRoute    Classification = "route_or_dns_mismatch"
	// The fleet core's findings (CONTRACT 8.3), on a node's identity.
	ClassAuthority   Classification = "authority_conflict"
	ClassSupplyChain Classification = "supply_chain_violation"
	ClassBilling     Classification = "billing_mismatch"
)

// Classifications lists every classification in contract order (the heat
// map's column axis).
var Classifications = []Classification{ClassOrphan, ClassMissing, ClassStale, ClassIdentity, ClassQuota, ClassRoute,
	ClassAuthority, ClassSupplyChain, ClassBilling}

// Severity is how urgent a finding is.
type Severity string

// Severities of CONTRACT section 4.
const (
	SeverityCritical Severity = "critical"
	SeverityWarning  Severity = "warning"
)

// Severities lists the severities, most severe first.
var Severities = []Severity{SeverityCritical, SeverityWarning}

// Posture is what the platform does about an open finding (seed 000,
// evidence record action).
type Posture string

// Postures of CONTRACT section 4.
const (
	PostureRetry          Posture = "retry"
	PostureQuarantine     Posture = "quarantine"
	PostureBlockAdmission Posture = "block_admission"
	PostureOperatorReview Posture = "operator_review"
)

// FindingStatus is the status column of drift_evidence and
// billing_mismatch.
type FindingStatus string

// Finding statuses: a finding is opened once and resolved when state
// agrees again; it is never deleted.
const (
	StatusOpen     FindingStatus = "open"
	StatusResolved FindingStatus = "resolved"
)

// Transition names what changed in one drift_history row.
type Transition string

// Transitions of a drift finding.
const (
	TransitionOpened   Transition = "opened"
	TransitionUpdated  Transition = "updated"
	TransitionResolved Transition = "resolved"
	TransitionReopened Transition = "reopened"
)

// Policy is what CONTRACT section 4 fixes for one classification.
type Policy struct {
	Severity Severity
	Posture  Posture // the default posture; see StaleReviewAfter
	Runbook  string  // stable runbook reference, runbooks/<classification>
}

// policies is the table of CONTRACT section 4, in Classifications order.
var policies = [...]struct {
	class    Classification
	severity Severity
	posture  Posture
}{
	{ClassOrphan, SeverityWarning, PostureQuarantine},
	{ClassMissing, SeverityCritical, PostureBlockAdmission},
	{ClassStale, SeverityWarning, PostureRetry},
	{ClassIdentity, SeverityCritical, PostureQuarantine},
	{ClassQuota, SeverityCritical, PostureBlockAdmission},
	{ClassRoute, SeverityCritical, PostureQuarantine},
	{ClassAuthority, SeverityCritical, PostureBlockAdmission},
	{ClassSupplyChain, SeverityCritical, PostureQuarantine},
	{ClassBilling, SeverityCritical, PostureOperatorReview},
}

// PolicyOf returns the policy of classification c, and false if c is not a
// classification.
func PolicyOf(c Classification) (Policy, bool) {
	for _, p := range policies {
		if p.class == c {
			return Policy{Severity: p.severity, Posture: p.posture, Runbook: "runbooks/" + string(c)}, true
		}
	}
	return Policy{}, false
}

// StaleReviewAfter is the number of consecutive disagreeing observations
// after which a stale_lifecycle_state finding moves from retry to
// operator_review.
const StaleReviewAfter = 3

// BillingKind is the kind column of billing_mismatch (CONTRACT section 5):
// which step of usage, rating and ledger disagrees.
type BillingKind string

// Billing mismatch kinds.
const (
	KindUsageNotRated    BillingKind = "usage_not_rated"
	KindRatedNotLedgered BillingKind = "rated_not_ledgered"
	KindAmountMismatch   BillingKind = "amount_mismatch"
	KindDuplicateUsage   BillingKind = "duplicate_usage"
	KindUnknownUnit      BillingKind = "unknown_unit"
	// KindConflictingUsage: a usage_id came again with other content
	// (another PayloadDigest: quantity, unit, tenant, window...). The first
	// stays rated; the finding holds both quantities.
	KindConflictingUsage BillingKind = "conflicting_usage"
	// KindWindowUnbalanced extends the contract's kinds: a conservation
	// window that does not balance after its graces. It holds a rated line
	// with no accepted usage behind it, or a ledger entry with no rated
	// line behind it (docs/billing-model.md).
	KindWindowUnbalanced BillingKind = "window_unbalanced"
)

// BillingKinds lists every billing mismatch kind in a stable order.
var BillingKinds = []BillingKind{KindUsageNotRated, KindRatedNotLedgered, KindAmountMismatch, KindDuplicateUsage, KindUnknownUnit, KindConflictingUsage, KindWindowUnbalanced}
