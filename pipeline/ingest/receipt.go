package ingest

import "github.com/driftline/driftline/pipeline/contract"

// Status of one line of a request.
type Status string

// Line statuses.
const (
	StatusAccepted  Status = "accepted"  // written to its topic and acknowledged
	StatusDuplicate Status = "duplicate" // this gateway already accepted the same event (dedupe identity and content); not written again
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
	// FirstDigest is set with reason conflicting_duplicate: the content
	// digest (contract.Digest, 16 hex digits) of the event first accepted
	// under the line's dedupe identity; Digest is the line's own.
	FirstDigest string `json:"first_digest,omitempty"`
	Digest      string `json:"digest,omitempty"`
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
