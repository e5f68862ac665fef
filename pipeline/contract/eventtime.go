package contract

import (
	"math"
	"time"
)

// MinTime and MaxTime bound every time an event carries (occurred_at and
// the payload's times). The pipeline keeps times as Unix nanoseconds in
// an int64, which hold 1677-09-21T00:12:43.145224192Z to
// 2262-04-11T23:47:16.854775807Z: a time outside them would wrap around
// into another one (an occurred_at of 1442-05-10 read as 2026-11-28, and
// passed the late-event check), so the validator rejects it as
// invalid_field.
var (
	MinTime = time.Unix(0, math.MinInt64).UTC()
	MaxTime = time.Unix(0, math.MaxInt64).UTC()
)

// The bounds as Unix seconds and their nanoseconds, for TimeInRange.
var (
	minSec, minNsec = MinTime.Unix(), MinTime.Nanosecond()
	maxSec, maxNsec = MaxTime.Unix(), MaxTime.Nanosecond()
)

// TimeInRange reports whether t lies within MinTime and MaxTime. It is on
// every event's path: a comparison of Unix seconds, the nanoseconds only
// in the bounds' own seconds.
func TimeInRange(t time.Time) bool {
	switch s := t.Unix(); {
	case s > minSec && s < maxSec:
		return true
	case s == minSec:
		return t.Nanosecond() >= minNsec
	case s == maxSec:
		return t.Nanosecond() <= maxNsec
	}
	return false
}

// timeRangeDetail is the detail of a time outside MinTime and MaxTime.
func timeRangeDetail(t time.Time) string {
	return t.UTC().Format(time.RFC3339Nano) + " is outside the times the pipeline keeps (" +
		MinTime.Format(time.RFC3339Nano) + " to " + MaxTime.Format(time.RFC3339Nano) + ")"
}

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
