package contract

import "fmt"

// Reason is a stable, low-cardinality code naming why input was rejected.
// Reasons appear in ingest receipts, in ingest.quarantine records and as a
// metric label, so they never change meaning once released.
type Reason string

// Rejection reasons. The gateway adds its own authorisation reasons; every
// other reason comes from the shared validator.
const (
	ReasonBadJSON              Reason = "bad_json"                // not one JSON object (syntax, trailing data), or invalid UTF-8
	ReasonOversized            Reason = "oversized_event"         // longer than MaxEventLen
	ReasonMissingField         Reason = "missing_field"           // a required field is absent or empty
	ReasonWrongType            Reason = "wrong_type"              // a field has the wrong JSON type
	ReasonInvalidField         Reason = "invalid_field"           // a field's value breaks its rule (length, time, enum, decimal)
	ReasonUnknownEventType     Reason = "unknown_event_type"      // event_type is not one of AllTypes
	ReasonUnknownSchemaVersion Reason = "unknown_schema_version"  // schema_version is not SchemaVersion
	ReasonWrongEnvironment     Reason = "wrong_environment"       // environment differs from the pipeline's own
	ReasonUnauthorizedType     Reason = "unauthorized_event_type" // the caller may not send this event type
	ReasonUnauthorizedProducer Reason = "unauthorized_producer"   // the caller may not send as this producer
	ReasonDuplicateKey         Reason = "duplicate_key"           // an object names the same key twice (at any depth)
	ReasonTooDeep              Reason = "nesting_too_deep"        // objects and arrays nest deeper than MaxDepth
)

// Reasons lists every reason in a stable order (for metrics and docs).
var Reasons = []Reason{
	ReasonBadJSON, ReasonOversized, ReasonMissingField, ReasonWrongType,
	ReasonInvalidField, ReasonUnknownEventType, ReasonUnknownSchemaVersion,
	ReasonWrongEnvironment, ReasonUnauthorizedType, ReasonUnauthorizedProducer,
	ReasonDuplicateKey, ReasonTooDeep,
}

// Rating reasons: the rater quarantines usage it cannot rate with one of
// these, beside the validator's. Usage quarantined for any of them is not
// rated; the billing reconciler turns unknown and retired units into
// unknown_unit findings and repeated metering keys into duplicate_usage
// findings.
const (
	ReasonUnknownUnit        Reason = "unknown_unit"         // the price book has no such unit
	ReasonRetiredUnit        Reason = "retired_unit"         // the unit's current version is retired
	ReasonBadQuantity        Reason = "bad_quantity"         // negative, or not representable exactly
	ReasonCurrencyNotAllowed Reason = "currency_not_allowed" // the unit's currency is not one the rater may bill
	ReasonAmountOutOfRange   Reason = "amount_out_of_range"  // quantity × price does not fit the amount range
	ReasonDuplicateUsage     Reason = "duplicate_usage"      // another usage_id already has this metering key
	ReasonWrongEventType     Reason = "wrong_event_type"     // a valid event that is not usage.recorded
	ReasonNotOwned           Reason = "misrouted_not_owned"  // mis-partitioned usage whose key's partition another rater owns
)

// RatingReasons lists the rating reasons in a stable order.
var RatingReasons = []Reason{
	ReasonUnknownUnit, ReasonRetiredUnit, ReasonBadQuantity, ReasonCurrencyNotAllowed,
	ReasonAmountOutOfRange, ReasonDuplicateUsage, ReasonWrongEventType, ReasonNotOwned,
}

// Producer reasons: an event that is well formed but that its producer
// got wrong in time or in identity. The gateway rejects with them before a
// record is written; every consumer quarantines with them the records a
// Kafka-native producer wrote past the gateway, and counts them per
// producer (the status endpoint shows the counts).
const (
	// ReasonClockSkew: occurred_at is further ahead than the allowed skew
	// of the receiver's clock (the gateway) or of the record's broker
	// timestamp (a consumer).
	ReasonClockSkew Reason = "clock_skew"
	// ReasonLate: occurred_at is before what the partition still keeps
	// open (its watermark less the allowed lateness and dedupe horizon):
	// the event can no longer change a finding and is not applied.
	ReasonLate Reason = "late_event"
	// ReasonConflictingDuplicate: the event repeats a dedupe identity
	// already seen ((producer, seq) or (producer, event_id)) with other
	// content. A redelivery repeats the content as well; this is a
	// producer reusing ids, and the first event stays the one applied.
	ReasonConflictingDuplicate Reason = "conflicting_duplicate"
)

// ProducerReasons lists the producer reasons in a stable order.
var ProducerReasons = []Reason{ReasonClockSkew, ReasonLate, ReasonConflictingDuplicate}

// Registry reasons: a well-formed fleet event that names a registry entry
// (CONTRACT 8.2) the joiner's partition does not have when it applies the
// event. The joiner quarantines it with the reason and does not apply it;
// nothing is guessed for the missing entry.
const (
	// ReasonUnknownArtifact: a fleet.policy_bundle names an artifact_id
	// no fleet.artifact has registered.
	ReasonUnknownArtifact Reason = "unknown_artifact"
	// ReasonUnknownPolicyBundle: a nodeagent.heartbeat names a
	// policy_bundle_id no fleet.policy_bundle has registered.
	ReasonUnknownPolicyBundle Reason = "unknown_policy_bundle"
)

// RegistryReasons lists the registry reasons in a stable order.
var RegistryReasons = []Reason{ReasonUnknownArtifact, ReasonUnknownPolicyBundle}

// ValidationError says why one event was rejected.
type ValidationError struct {
	Reason Reason // stable code
	Field  string // offending field, dotted ("payload.quota"); empty when not about one field
	Detail string // human explanation
}

func (e *ValidationError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s: %s", e.Reason, e.Field, e.Detail)
	}
	return fmt.Sprintf("%s: %s", e.Reason, e.Detail)
}

func invalid(r Reason, field, format string, args ...any) *ValidationError {
	return &ValidationError{Reason: r, Field: field, Detail: fmt.Sprintf(format, args...)}
}
