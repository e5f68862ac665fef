package ingest

import "github.com/driftline/driftline/pipeline/contract"

// Status of one line of a request.
type Status string

// Line statuses.
const (
	StatusAccepted  Status = "accepted"  // written to its topic and acknowledged
	StatusDuplicate Status = "duplicate" // this gateway already accepted the same dedupe identity; not written again
	StatusRejected  Status = "rejected"  // written to the quarantine topic with Reason
)

// Response is the body of a 200 answer to POST /v1/events.
type Response struct {
	Accepted  int       `json:"accepted"`
	Duplicate int       `json:"duplicate"`
	Rejected  int       `json:"rejected"`
	PolicyRev string    `json:"policy_rev"`
	Receipts  []Receipt `json:"receipts"`
}

// Receipt reports what happened to one non-blank line.
type Receipt struct {
	// Line is the 1-based line number in the request body (blank lines
	// count, so it points at the line a caller sent).
	Line int `json:"line"`
	// EventID is the line's event_id when it could be read.
	EventID string          `json:"event_id,omitempty"`
	Status  Status          `json:"status"`
	Reason  contract.Reason `json:"reason,omitempty"`
	Field   string          `json:"field,omitempty"`
	Detail  string          `json:"detail,omitempty"`
}

// ErrorResponse is the body of every non-200 answer.
type ErrorResponse struct {
	// Error is a stable code: unauthorized, method_not_allowed,
	// body_too_large, bad_request, busy, unavailable.
	Error string `json:"error"`
	// Message explains it to a human.
	Message   string `json:"message"`
	PolicyRev string `json:"policy_rev,omitempty"`
}

// QuarantineValue is the JSON value of every ingest.quarantine record the
// pipeline writes, from the gateway (a rejected request line) or from a
// consumer through a Quarantiner (a rejected Kafka record). Its reason is
// also the record's "reason" header.
type QuarantineValue struct {
	Reason contract.Reason `json:"reason"`
	Field  string          `json:"field,omitempty"`
	Detail string          `json:"detail"`
	// Line is the rejected input, cut at the quarantine line limit (then
	// Truncated), with invalid UTF-8 replaced by U+FFFD.
	Line      string `json:"line"`
	Truncated bool   `json:"truncated,omitempty"`
	LineBytes int    `json:"line_bytes"`
	EventID   string `json:"event_id,omitempty"`
	// ActorID and SourceType: the authenticated sender for gateway lines;
	// the quarantining component (SYSTEM::joiner, ...) for Kafka records,
	// whose producer is not authenticated.
	ActorID    string `json:"actor_id"`
	SourceType string `json:"source_type"`
	PolicyRev  string `json:"policy_rev,omitempty"`
	// Source* locate a rejected Kafka record; absent for gateway lines.
	SourceTopic     string `json:"source_topic,omitempty"`
	SourcePartition *int32 `json:"source_partition,omitempty"`
	SourceOffset    *int64 `json:"source_offset,omitempty"`
	// OriginActorID is the actor_id header the rejected record carried,
	// if any.
	OriginActorID string `json:"origin_actor_id,omitempty"`
	ReceivedAt    string `json:"received_at"`
}
