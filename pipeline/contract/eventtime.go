package contract

import "time"

// ClockSkewError is the rejection of an event whose occurred_at lies more
// than skew ahead of ref: the receiver's clock (the gateway) or the
// record's broker timestamp (a consumer).
func ClockSkewError(occurredAt, ref time.Time, skew time.Duration) *ValidationError {
	return invalid(ReasonClockSkew, "occurred_at", "%s is %s ahead of %s; at most %s is allowed",
		occurredAt.UTC().Format(time.RFC3339Nano), occurredAt.Sub(ref).Round(time.Millisecond), ref.UTC().Format(time.RFC3339Nano), skew)
}

// LateError is the rejection of an event that occurred before before, the
// point below which its partition can no longer check or apply it.
func LateError(occurredAt, before time.Time) *ValidationError {
	return invalid(ReasonLate, "occurred_at", "%s is before %s, the oldest event time the partition still applies",
		occurredAt.UTC().Format(time.RFC3339Nano), before.UTC().Format(time.RFC3339Nano))
}
