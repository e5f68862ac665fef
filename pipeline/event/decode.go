package event

import (
	"bytes"
	"errors"
	"time"
	"unicode/utf8"

	json "github.com/segmentio/encoding/json"
)

// wireEnvelope mirrors the JSON envelope with pointers so that a missing
// field can be told apart from a zero value.
type wireEnvelope struct {
	EventID       *string         `json:"event_id"`
	EventType     *string         `json:"event_type"`
	SchemaVersion *int64          `json:"schema_version"`
	Producer      *string         `json:"producer"`
	Seq           *uint64         `json:"seq"`
	OccurredAt    *string         `json:"occurred_at"`
	CorrelationID *string         `json:"correlation_id"`
	Environment   *string         `json:"environment"`
	Payload       json.RawMessage `json:"payload"`
}

// Validator applies the envelope and payload rules of CONTRACT sections 2
// and 3. It is safe for concurrent use.
type Validator struct {
	// Environment is the pipeline's own environment; events naming another
	// are rejected with ReasonWrongEnvironment.
	Environment string
}

// Decode validates one encoded event and returns its envelope, with the
// payload checked against its type. The returned Envelope.Payload aliases
// line.
func (v Validator) Decode(line []byte) (Envelope, *ValidationError) {
	env, _, err := v.DecodeEvent(line)
	return env, err
}

// DecodeEvent is Decode that also returns the decoded payload (as
// DecodePayload does).
func (v Validator) DecodeEvent(line []byte) (Envelope, any, *ValidationError) {
	env, err := v.decodeEnvelope(line)
	if err != nil {
		return env, nil, err
	}
	payload, err := DecodePayload(env.EventType, env.Payload)
	if err != nil {
		return env, nil, err
	}
	return env, payload, nil
}

func (v Validator) decodeEnvelope(line []byte) (Envelope, *ValidationError) {
	var env Envelope
	if len(line) > MaxEventLen {
		return env, invalid(ReasonOversized, "", "event is %d bytes, limit %d", len(line), MaxEventLen)
	}
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return env, invalid(ReasonBadJSON, "", "event is not a JSON object")
	}
	if !utf8.Valid(trimmed) {
		return env, invalid(ReasonBadJSON, "", "event is not valid UTF-8")
	}
	var w wireEnvelope
	if err := json.Unmarshal(trimmed, &w); err != nil {
		return env, jsonError(err, "")
	}
	if err := w.check(v.Environment); err != nil {
		return env, err
	}
	env = Envelope{
		EventID:       *w.EventID,
		EventType:     *w.EventType,
		SchemaVersion: int(*w.SchemaVersion),
		Producer:      *w.Producer,
		Environment:   *w.Environment,
		Payload:       w.Payload,
	}
	if w.Seq != nil {
		env.Seq, env.HasSeq = *w.Seq, true
	}
	if w.CorrelationID != nil {
		env.CorrelationID = *w.CorrelationID
	}
	env.OccurredAt, _ = time.Parse(time.RFC3339Nano, *w.OccurredAt) // checked above
	return env, nil
}

func (w *wireEnvelope) check(pipelineEnv string) *ValidationError {
	for _, f := range []struct {
		name string
		v    *string
	}{{"event_id", w.EventID}, {"event_type", w.EventType}, {"producer", w.Producer}, {"occurred_at", w.OccurredAt}, {"environment", w.Environment}} {
		if f.v == nil || *f.v == "" {
			return invalid(ReasonMissingField, f.name, "required")
		}
	}
	if w.SchemaVersion == nil {
		return invalid(ReasonMissingField, "schema_version", "required")
	}
	if len(w.Payload) == 0 || string(w.Payload) == "null" {
		return invalid(ReasonMissingField, "payload", "required")
	}
	if w.Payload[0] != '{' {
		return invalid(ReasonWrongType, "payload", "must be a JSON object")
	}
	if len(*w.EventID) > MaxIDLen {
		return invalid(ReasonInvalidField, "event_id", "longer than %d bytes", MaxIDLen)
	}
	if len(*w.Producer) > MaxIDLen {
		return invalid(ReasonInvalidField, "producer", "longer than %d bytes", MaxIDLen)
	}
	if TopicOf(*w.EventType) == "" {
		return invalid(ReasonUnknownEventType, "event_type", "%q is not a known event type", *w.EventType)
	}
	if *w.SchemaVersion != SchemaVersion {
		return invalid(ReasonUnknownSchemaVersion, "schema_version", "version %d is not supported (want %d)", *w.SchemaVersion, SchemaVersion)
	}
	if _, err := time.Parse(time.RFC3339Nano, *w.OccurredAt); err != nil {
		return invalid(ReasonInvalidField, "occurred_at", "not an RFC 3339 time")
	}
	if !ValidEnvironment(*w.Environment) {
		return invalid(ReasonInvalidField, "environment", "%q is not local_parity, dev or prod", *w.Environment)
	}
	if pipelineEnv != "" && *w.Environment != pipelineEnv {
		return invalid(ReasonWrongEnvironment, "environment", "event is for %q, this pipeline runs %q", *w.Environment, pipelineEnv)
	}
	return nil
}

// jsonError maps a decoding error to a reason; prefix names the enclosing
// object ("payload") for field paths.
func jsonError(err error, prefix string) *ValidationError {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if prefix != "" && field != "" {
			field = prefix + "." + field
		} else if prefix != "" {
			field = prefix
		}
		return invalid(ReasonWrongType, field, "cannot be a JSON %s", te.Value)
	}
	var pe *time.ParseError
	if errors.As(err, &pe) {
		return invalid(ReasonInvalidField, prefix, "not an RFC 3339 time: %q", pe.Value)
	}
	return invalid(ReasonBadJSON, prefix, "%v", err)
}
