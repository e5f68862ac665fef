package contract

import (
	"strings"
	"unicode/utf8"
)

// Quarantined is the JSON value of every ingest.quarantine record (CONTRACT
// sections 1 and 2: rejected input is never dropped, it is quarantined
// with its reason). The ingest gateway writes one per rejected request
// line; a consumer writes one per Kafka record it rejects (the joiner
// through ingest.Quarantiner, the rater in its transaction). Every such
// record also carries the headers HeaderActorID, HeaderSourceType and
// HeaderReason (the gateway adds HeaderPolicyRev), equal to the fields of
// the same name.
type Quarantined struct {
	Reason Reason `json:"reason"`
	Field  string `json:"field,omitempty"` // the offending field, dotted ("payload.quota")
	Detail string `json:"detail"`
	// Line is the rejected input, cut at a line limit (then Truncated),
	// with invalid UTF-8 replaced by U+FFFD; LineBytes is its whole
	// length. SetLine sets all three.
	Line      string `json:"line"`
	Truncated bool   `json:"truncated,omitempty"`
	LineBytes int    `json:"line_bytes"`
	EventID   string `json:"event_id,omitempty"` // when the input could be read that far
	// ActorID and SourceType: the authenticated sender for gateway lines;
	// the quarantining component (SYSTEM::joiner, SYSTEM::rater) for Kafka
	// records, whose producer is not authenticated.
	ActorID    string `json:"actor_id"`
	SourceType string `json:"source_type"`
	PolicyRev  string `json:"policy_rev,omitempty"` // the gateway's policy revision
	// Source* locate a rejected Kafka record (SetSource); absent for
	// gateway lines.
	SourceTopic     string `json:"source_topic,omitempty"`
	SourcePartition *int32 `json:"source_partition,omitempty"`
	SourceOffset    *int64 `json:"source_offset,omitempty"`
	// OriginActorID is the actor_id header the rejected record carried,
	// if any.
	OriginActorID string `json:"origin_actor_id,omitempty"`
	ReceivedAt    string `json:"received_at"` // RFC 3339, UTC
}

// DefaultQuarantineLineLimit bounds the bytes of rejected input copied
// into a quarantine record: enough to see what was wrong, never a copy of
// a hostile body.
const DefaultQuarantineLineLimit = 8 << 10

// SetLine sets Line, Truncated and LineBytes from the rejected input raw,
// keeping at most limit bytes.
func (q *Quarantined) SetLine(raw []byte, limit int) {
	kept := raw
	if len(kept) > limit {
		kept = kept[:limit]
	}
	q.Line = strings.ToValidUTF8(string(kept), string(utf8.RuneError))
	q.Truncated = len(kept) < len(raw)
	q.LineBytes = len(raw)
}

// SetSource locates the rejected Kafka record.
func (q *Quarantined) SetSource(topic string, partition int32, offset int64) {
	q.SourceTopic, q.SourcePartition, q.SourceOffset = topic, &partition, &offset
}
