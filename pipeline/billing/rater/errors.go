package rater

import "github.com/driftline/driftline/pipeline/contract"

// Quarantine reasons of the rater, beside the validator's (event.Reasons).
// Usage quarantined for any of them is not rated; the billing reconciler
// turns unknown and retired units into unknown_unit findings and repeated
// metering keys into duplicate_usage findings.
const (
	ReasonUnknownUnit        contract.Reason = "unknown_unit"         // the price book has no such unit
	ReasonRetiredUnit        contract.Reason = "retired_unit"         // the unit's current version is retired
	ReasonBadQuantity        contract.Reason = "bad_quantity"         // negative, or not representable exactly
	ReasonCurrencyNotAllowed contract.Reason = "currency_not_allowed" // the unit's currency is not one the rater may bill
	ReasonAmountOutOfRange   contract.Reason = "amount_out_of_range"  // quantity × price does not fit the amount range
	ReasonDuplicateUsage     contract.Reason = "duplicate_usage"      // another usage_id already has this metering key
	ReasonWrongEventType     contract.Reason = "wrong_event_type"     // a valid event that is not usage.recorded
	ReasonNotOwned           contract.Reason = "misrouted_not_owned"  // mis-partitioned usage whose key's partition another rater owns
)

// Reasons lists the rater's own reasons in a stable order (metrics, docs).
var Reasons = []contract.Reason{
	ReasonUnknownUnit, ReasonRetiredUnit, ReasonBadQuantity, ReasonCurrencyNotAllowed,
	ReasonAmountOutOfRange, ReasonDuplicateUsage, ReasonWrongEventType, ReasonNotOwned,
}
