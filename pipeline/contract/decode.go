package contract

import (
	"errors"
	"time"
	"unsafe"

	json "github.com/segmentio/encoding/json"
)

// Validator applies the envelope and payload rules of CONTRACT sections 2
// and 3. It is safe for concurrent use.
type Validator struct {
	// Environment is the pipeline's own environment; events naming another
	// are rejected with ReasonWrongEnvironment.
	Environment string

	// ZeroCopy makes the strings of the returned Envelope and payload
	// alias line instead of copying it, saving most of the decoder's
	// allocations. Only for callers that keep neither past the life of
	// line's memory (the ingest gateway recycles request bodies): a kept
	// string would change under the caller's feet.
	ZeroCopy bool
}

// Decode validates one encoded event and returns its envelope, with the
// payload checked against its type. The returned Envelope.Payload aliases
// line.
func (v Validator) Decode(line []byte) (Envelope, *ValidationError) {
	env, _, err := v.DecodeEvent(line)
	return env, err
}

// DecodeEvent is Decode that also returns the decoded payload (as
// DecodePayload does): a new struct per call, which the caller may keep.
// A Decoder reuses the struct instead.
func (v Validator) DecodeEvent(line []byte) (Envelope, any, *ValidationError) {
	if env, p, _, ok := v.fastDecode(line, nil, false); ok {
		return env, p, nil
	}
	return v.decodeEventRef(line)
}

// Decoder decodes events as its Validator does but reuses one payload
// struct per event type: the payload DecodeEvent returns (with its string
// lists: Tags, Authority.ControllerIDs, Domains) is valid only until the Decoder's next call, which
// overwrites it. Strings follow Validator.ZeroCopy: without it they are
// copies the caller may keep; with it they alias the line and are valid
// only as long as its bytes are, and the common events then decode
// without allocating. A caller that keeps a payload past the next call
// uses Validator.DecodeEvent, or copies what it keeps (the struct by
// value, and with ZeroCopy each kept string with strings.Clone).
//
// A Decoder is not safe for concurrent use. Its zero value applies the
// zero Validator's rules.
type Decoder struct {
	v Validator

	record        PlatformRecord
	observation   Observation
	scanCompleted ScanCompleted
	heartbeat     Heartbeat
	usage         Usage
	rated         Rated
	ledger        LedgerEntry
	command       Command
	artifact      Artifact
	bundle        PolicyBundle
	lists         [numLists][]string // backing arrays of the payloads' string lists
}

// NewDecoder returns a Decoder applying v's rules.
func NewDecoder(v Validator) *Decoder { return &Decoder{v: v} }

// DecodeEvent is Validator.DecodeEvent with the payload decoded into the
// Decoder's own struct, valid until the next call. Events the single-pass
// decoder leaves to the reference decoder (rejections, rare encodings)
// get a new struct, as from the Validator.
func (d *Decoder) DecodeEvent(line []byte) (Envelope, any, *ValidationError) {
	if env, p, _, ok := d.v.fastDecode(line, d, false); ok {
		return env, p, nil
	}
	return d.v.decodeEventRef(line)
}

// DecodeEventDigest is DecodeEvent that also returns the event's content
// digest, EventDigest(&env), for a valid event (0 with an error). The
// single-pass decoder computes it from what it decodes, in the same pass
// over the line: no second scan of the payload.
func (d *Decoder) DecodeEventDigest(line []byte) (Envelope, any, Digest, *ValidationError) {
	if env, p, pd, ok := d.v.fastDecode(line, d, true); ok {
		return env, p, eventDigest(&env, pd), nil
	}
	env, p, err := d.v.decodeEventRef(line)
	if err != nil {
		return env, p, 0, err
	}
	return env, p, EventDigest(&env), nil
}

// DecodeEventPayloadDigest is DecodeEvent that also returns the digest
// of the payload alone, PayloadDigest(env.Payload), for a valid event (0
// with an error): what a usage's content is compared by, computed in the
// decoder's one pass like DecodeEventDigest's.
func (d *Decoder) DecodeEventPayloadDigest(line []byte) (Envelope, any, Digest, *ValidationError) {
	if env, p, pd, ok := d.v.fastDecode(line, d, true); ok {
		return env, p, pd, nil
	}
	env, p, err := d.v.decodeEventRef(line)
	if err != nil {
		return env, p, 0, err
	}
	return env, p, PayloadDigest(env.Payload), nil
}

// decodeEventRef is the reference decoder: Scan, the envelope rules, the
// payload decoded by encoding into its struct, the payload rules. The
// single-pass decoder (fast.go) returns what it returns whenever it
// accepts a line.
func (v Validator) decodeEventRef(line []byte) (Envelope, any, *ValidationError) {
	env, err := v.decodeEnvelope(line)
	if err != nil {
		return env, nil, err
	}
	flags := parseFlags
	if v.ZeroCopy {
		flags |= json.ZeroCopy
	}
	payload, err := decodePayload(env.EventType, env.Payload, flags)
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
	s := getScanner(line)
	defer putScanner(s)
	s.zeroCopy = v.ZeroCopy
	if err := s.top(); err != nil {
		return env, err
	}
	// The line is well-formed: every field value below is a complete JSON
	// value, so only its type and rule remain to check. The event id is
	// read first so a rejection's receipt can still name it.
	var (
		f   = &s.fields
		err *ValidationError
	)
	env.EventID, err = s.stringField(fEventID)
	if err != nil {
		return env, err
	}
	if len(env.EventID) > MaxIDLen {
		id := env.EventID
		env.EventID = ""
		return env, invalid(ReasonInvalidField, "event_id", "longer than %d bytes (%d)", MaxIDLen, len(id))
	}
	if env.EventType, err = s.stringField(fEventType); err != nil {
		return env, err
	}
	env.EventType = internType(env.EventType)
	var schemaSet bool
	if f[fSchemaVersion].set && !s.isNull(fSchemaVersion) {
		n, ok := parseInt(s.raw(fSchemaVersion))
		if !ok {
			return env, s.wrongType(fSchemaVersion, "an integer")
		}
		env.SchemaVersion, schemaSet = n, true
	}
	if env.Producer, err = s.stringField(fProducer); err != nil {
		return env, err
	}
	if f[fSeq].set && !s.isNull(fSeq) {
		n, ok := parseUint(s.raw(fSeq))
		if !ok {
			return env, s.wrongType(fSeq, "an unsigned integer")
		}
		env.Seq, env.HasSeq = n, true
	}
	occurredAt, err := s.stringField(fOccurredAt)
	if err != nil {
		return env, err
	}
	if env.CorrelationID, err = s.stringField(fCorrelationID); err != nil {
		return env, err
	}
	if env.Environment, err = s.stringField(fEnvironment); err != nil {
		return env, err
	}
	env.Environment = internEnvironment(env.Environment)
	if f[fPayload].set && !s.isNull(fPayload) {
		env.Payload = s.raw(fPayload)
	}

	for _, r := range []struct {
		name string
		v    string
	}{{"event_id", env.EventID}, {"event_type", env.EventType}, {"producer", env.Producer}, {"occurred_at", occurredAt}, {"environment", env.Environment}} {
		if r.v == "" {
			return env, invalid(ReasonMissingField, r.name, "required")
		}
	}
	if !schemaSet {
		return env, invalid(ReasonMissingField, "schema_version", "required")
	}
	if len(env.Payload) == 0 {
		return env, invalid(ReasonMissingField, "payload", "required")
	}
	if env.Payload[0] != '{' {
		return env, invalid(ReasonWrongType, "payload", "must be a JSON object")
	}
	if len(env.Producer) > MaxIDLen {
		return env, invalid(ReasonInvalidField, "producer", "longer than %d bytes", MaxIDLen)
	}
	if TopicOf(env.EventType) == "" {
		return env, invalid(ReasonUnknownEventType, "event_type", "%q is not a known event type", truncate([]byte(env.EventType), 64))
	}
	if env.SchemaVersion != SchemaVersion {
		return env, invalid(ReasonUnknownSchemaVersion, "schema_version", "version %d is not supported (want %d)", env.SchemaVersion, SchemaVersion)
	}
	t, perr := time.Parse(time.RFC3339Nano, occurredAt)
	if perr != nil {
		return env, invalid(ReasonInvalidField, "occurred_at", "not an RFC 3339 time")
	}
	if !TimeInRange(t) {
		return env, invalid(ReasonInvalidField, "occurred_at", "%s", timeRangeDetail(t))
	}
	env.OccurredAt = t
	if !ValidEnvironment(env.Environment) {
		return env, invalid(ReasonInvalidField, "environment", "%q is not local_parity, dev or prod", truncate([]byte(env.Environment), 64))
	}
	if v.Environment != "" && env.Environment != v.Environment {
		return env, invalid(ReasonWrongEnvironment, "environment", "event is for %q, this pipeline runs %q", env.Environment, v.Environment)
	}
	return env, nil
}

// raw returns the JSON text of field f.
func (s *scanner) raw(f int) []byte { return s.b[s.fields[f].start:s.fields[f].end] }

func (s *scanner) isNull(f int) bool { return s.b[s.fields[f].start] == 'n' }

func (s *scanner) wrongType(f int, want string) *ValidationError {
	kind := map[byte]string{'{': "object", '[': "array", '"': "string", 't': "bool", 'f': "bool"}[s.b[s.fields[f].start]]
	if kind == "" {
		kind = "number"
	}
	return invalid(ReasonWrongType, fieldNames[f], "must be %s, not a JSON %s", want, kind)
}

// stringField returns the string value of field f; absent and null read as
// "" (a required field then fails as missing).
func (s *scanner) stringField(f int) (string, *ValidationError) {
	sp := s.fields[f]
	if !sp.set || s.b[sp.start] == 'n' {
		return "", nil
	}
	if s.b[sp.start] != '"' {
		return "", s.wrongType(f, "a string")
	}
	body := s.b[sp.start+1 : sp.end-1]
	if !sp.escaped {
		if s.zeroCopy && len(body) > 0 {
			return unsafe.String(&body[0], len(body)), nil
		}
		return string(body), nil
	}
	return string(appendUnescaped(make([]byte, 0, len(body)), body)), nil
}

// internType returns the constant of a known event type, so that envelopes
// do not each hold a copy of it.
func internType(t string) string {
	if k := knownType(t); k != "" {
		return k
	}
	return t
}

func internEnvironment(e string) string {
	if k := knownEnvironment(e); k != "" {
		return k
	}
	return e
}

// knownType returns the constant of event type t, or "" if t is none.
func knownType(t string) string {
	switch t {
	case TypePlatformRecord:
		return TypePlatformRecord
	case TypeProviderObservation:
		return TypeProviderObservation
	case TypeScanCompleted:
		return TypeScanCompleted
	case TypeHeartbeat:
		return TypeHeartbeat
	case TypeUsageRecorded:
		return TypeUsageRecorded
	case TypeBillingRated:
		return TypeBillingRated
	case TypeLedgerEntry:
		return TypeLedgerEntry
	case TypeCommand:
		return TypeCommand
	case TypeArtifact:
		return TypeArtifact
	case TypePolicyBundle:
		return TypePolicyBundle
	}
	return ""
}

// knownEnvironment returns the constant of environment e, or "".
func knownEnvironment(e string) string {
	switch e {
	case EnvLocalParity:
		return EnvLocalParity
	case EnvDev:
		return EnvDev
	case EnvProd:
		return EnvProd
	}
	return ""
}

// parseInt parses a JSON integer (no fraction or exponent) that fits an
// int.
func parseInt(b []byte) (int, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	u, ok := parseUint(b)
	if !ok || u > 1<<31-1 {
		return 0, false
	}
	if neg {
		return -int(u), true
	}
	return int(u), true
}

// parseUint parses a JSON unsigned integer that fits a uint64.
func parseUint(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (1<<64-1-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
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
