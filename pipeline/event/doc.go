// Package event defines the wire contract every Driftline component shares:
// the envelope, the payload of each event type, the Kafka key of each event,
// the topic it belongs to, and the one validator that the ingest gateway and
// the Kafka consumers both apply (CONTRACT sections 1-3).
//
// The validator is strict and fail-closed: every rejection carries a stable
// Reason code that ends up in ingest receipts, in ingest.quarantine and in
// metrics. Money and quantities stay decimal strings; no float ever touches
// them here.
package event
