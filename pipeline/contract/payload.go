package contract

import (
	"math"
	"time"

	json "github.com/segmentio/encoding/json"

	"github.com/driftline/driftline/pipeline/contract/decimal"
)

// IsArtifactDigest reports whether v is an artifact digest of CONTRACT
// 8.2: "sha256:" and 64 hex digits.
func IsArtifactDigest(v string) bool {
	const prefix = "sha256:"
	if len(v) != len(prefix)+64 || v[:len(prefix)] != prefix {
		return false
	}
	for _, c := range []byte(v[len(prefix):]) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// DecodePayload decodes and validates the payload of an event of type typ,
// returning a pointer to its typed struct (*PlatformRecord, *Observation,
// ...). raw gets the structural checks of Scan first.
func DecodePayload(typ string, raw []byte) (any, *ValidationError) {
	if len(raw) > MaxEventLen {
		return nil, invalid(ReasonOversized, "payload", "payload is %d bytes, limit %d", len(raw), MaxEventLen)
	}
	if err := Scan(raw); err != nil {
		err.Field = "payload"
		return nil, err
	}
	return decodePayload(typ, raw, parseFlags)
}

// parseFlags decode payloads strictly: a key must match its field exactly,
// so "Provider" cannot stand in for (or shadow) "provider" the way
// encoding/json's case-insensitive matching would allow.
const parseFlags = json.DontMatchCaseInsensitiveStructFields

// decodePayload is DecodePayload of a payload that Scan has accepted.
func decodePayload(typ string, raw []byte, flags json.ParseFlags) (any, *ValidationError) {
	if parse := payloadParsers[typ]; parse != nil {
		return parse(raw, flags)
	}
	return nil, invalid(ReasonUnknownEventType, "event_type", "%q is not a known event type", typ)
}

// payloadParsers holds the parser of each event type's payload.
var payloadParsers = map[string]func([]byte, json.ParseFlags) (any, *ValidationError){
	TypePlatformRecord:      parseAs[PlatformRecord],
	TypeProviderObservation: parseAs[Observation],
	TypeScanCompleted:       parseAs[ScanCompleted],
	TypeHeartbeat:           parseAs[Heartbeat],
	TypeUsageRecorded:       parseAs[Usage],
	TypeBillingRated:        parseAs[Rated],
	TypeLedgerEntry:         parseAs[LedgerEntry],
	TypeCommand:             parseAs[Command],
	TypeArtifact:            parseAs[Artifact],
	TypePolicyBundle:        parseAs[PolicyBundle],
}

// parseAs decodes raw into a new T and validates it; the result is a *T.
func parseAs[T any, P interface {
	*T
	validate() *ValidationError
}](raw []byte, flags json.ParseFlags) (any, *ValidationError) {
	p := P(new(T))
	if _, err := json.Parse(raw, p, flags); err != nil {
		return nil, jsonError(err, "payload")
	}
	if err := p.validate(); err != nil {
		return nil, err
	}
	return p, nil
}

// fieldCheck accumulates the first failure over a chain of field rules.
// required and check build their failure without fmt (their details are
// constant), which keeps them small enough to be inlined into validate.
type fieldCheck struct{ err *ValidationError }

func (c *fieldCheck) required(name, v string) {
	if c.err == nil && v == "" {
		c.fail(ReasonMissingField, name, "required")
	}
}

// oneOf checks that v, when present, is a value of vocabulary allowed
// (a function: methods cannot take type parameters).
func oneOf[T ~string](c *fieldCheck, name, v string, allowed []T) {
	if c.err == nil && v != "" && !Valid(allowed, v) {
		c.notAllowed(name, v)
	}
}

// requiredOneOf checks that v is present and a value of vocabulary
// allowed. It is required and oneOf in one call (the validators are on
// the joiner's hot path).
func requiredOneOf[T ~string](c *fieldCheck, name, v string, allowed []T) {
	if c.err != nil {
		return
	}
	if v == "" {
		c.fail(ReasonMissingField, name, "required")
	} else if !Valid(allowed, v) {
		c.notAllowed(name, v)
	}
}

// usageKey checks the usage_id and the usage key (CONTRACT section 1)
// that every billing payload carries.
func (c *fieldCheck) usageKey(usageID, meteringSource, meteringID string) {
	c.required("usage_id", usageID)
	c.required("metering_source", meteringSource)
	c.required("metering_id", meteringID)
}

// decimal checks that v, when present, is a decimal string.
func (c *fieldCheck) decimal(name, v string) {
	if c.err == nil && v != "" && !IsDecimal(v) {
		c.failValue(name, "%q is not a decimal string", v)
	}
}

// requiredDecimal checks that v is present and a decimal string.
func (c *fieldCheck) requiredDecimal(name, v string) {
	if c.err != nil {
		return
	}
	if v == "" {
		c.fail(ReasonMissingField, name, "required")
	} else if !IsDecimal(v) {
		c.failValue(name, "%q is not a decimal string", v)
	}
}

// requiredDigest checks that v is present and an artifact digest,
// sha256:<64 hex digits>.
func (c *fieldCheck) requiredDigest(name, v string) {
	c.required(name, v)
	if c.err == nil && !IsArtifactDigest(v) {
		c.failValue(name, "%q is not sha256:<64 hex digits>", v)
	}
}

// time checks that t, when set, lies within MinTime and MaxTime, and is
// set when required.
func (c *fieldCheck) time(name string, t time.Time, required bool) {
	switch {
	case c.err != nil:
	case t.IsZero():
		c.check(!required, name, "required RFC 3339 time")
	case !TimeInRange(t):
		c.fail(ReasonInvalidField, name, timeRangeDetail(t))
	}
}

func (c *fieldCheck) check(ok bool, name, detail string) {
	if c.err == nil && !ok {
		c.fail(ReasonInvalidField, name, detail)
	}
}

// fail records the failure of payload field name.
func (c *fieldCheck) fail(r Reason, name, detail string) {
	c.err = &ValidationError{Reason: r, Field: "payload." + name, Detail: detail}
}

// notAllowed records the value v of payload field name that is not one
// of its vocabulary.
func (c *fieldCheck) notAllowed(name, v string) {
	c.failValue(name, "%q is not an allowed value", v)
}

// failValue records the invalid value v of payload field name; format
// quotes it.
func (c *fieldCheck) failValue(name, format, v string) {
	c.err = invalid(ReasonInvalidField, "payload."+name, format, v)
}

func (p *PlatformRecord) validate() *ValidationError {
	var c fieldCheck
	c.required("record_type", p.RecordType)
	c.required("record_id", p.RecordID)
	c.check(p.RecordVersion >= 1, "record_version", "must be an integer >= 1")
	requiredOneOf(&c, "resource_family", p.ResourceFamily, Families)
	requiredOneOf(&c, "provider", p.Provider, Providers)
	c.required("provider_id", p.ProviderID)
	c.required("expected_state", p.ExpectedState)
	c.decimal("quota", p.Quota)
	oneOf(&c, "node_kind", p.NodeKind, NodeKinds)
	oneOf(&c, "lifecycle_intent", p.LifecycleIntent, LifecycleIntents)
	oneOf(&c, "authority.master_of_record", p.Authority.MasterOfRecord, MastersOfRecord)
	for _, id := range p.Authority.ControllerIDs {
		c.check(id != "", "authority.controller_ids", "holds an empty controller id")
	}
	return c.err
}

func (p *Observation) validate() *ValidationError {
	var c fieldCheck
	requiredOneOf(&c, "provider", p.Provider, Providers)
	c.required("provider_id", p.ProviderID)
	requiredOneOf(&c, "resource_family", p.ResourceFamily, Families)
	c.required("observed_state", p.ObservedState)
	c.decimal("usage", p.Usage)
	return c.err
}

func (p *ScanCompleted) validate() *ValidationError {
	var c fieldCheck
	requiredOneOf(&c, "provider", p.Provider, Providers)
	c.required("scan_id", p.ScanID)
	c.time("scan_started_at", p.ScanStartedAt, true)
	return c.err
}

func (p *Heartbeat) validate() *ValidationError {
	var c fieldCheck
	c.required("node_id", p.NodeID)
	c.required("agent_version", p.AgentVersion)
	c.required("host_fingerprint", p.HostFingerprint)
	requiredOneOf(&c, "health", p.Health, Healths)
	oneOf(&c, "update_path", p.UpdatePath, UpdatePaths)
	oneOf(&c, "terminal_stream_probe", p.TerminalStreamProbe, TerminalStreamProbes)
	oneOf(&c, "workload_impact", p.WorkloadImpact, WorkloadImpacts)
	c.check(p.RTTMs >= 0 && p.LossPct >= 0 && p.LossPct <= 100 && p.BandwidthKbps >= 0, "rtt_ms", "link quality out of range")
	c.check(p.BacklogMessages >= 0 && p.SecondsBehind >= 0, "backlog_messages", "sync debt must not be negative")
	c.check(p.UptimeS >= 0, "uptime_s", "must not be negative")
	return c.err
}

func (p *Artifact) validate() *ValidationError {
	var c fieldCheck
	c.required("artifact_id", p.ArtifactID)
	c.required("version", p.Version)
	c.requiredDigest("digest", p.Digest)
	return c.err
}

func (p *PolicyBundle) validate() *ValidationError {
	var c fieldCheck
	c.required("policy_bundle_id", p.PolicyBundleID)
	c.required("target_version", p.TargetVersion)
	c.required("artifact_id", p.ArtifactID)
	c.time("deadline", p.Deadline, true)
	for _, d := range p.Domains {
		c.check(d != "", "domains", "holds an empty domain")
	}
	return c.err
}

func (p *Usage) validate() *ValidationError {
	var c fieldCheck
	c.usageKey(p.UsageID, p.MeteringSource, p.MeteringID)
	c.required("unit_id", p.UnitID)
	c.requiredDecimal("quantity", p.Quantity)
	c.required("tenant_id", p.TenantID)
	c.time("window_start", p.WindowStart, true)
	c.time("window_end", p.WindowEnd, true)
	c.check(!p.WindowEnd.Before(p.WindowStart), "window_end", "before window_start")
	return c.err
}

func (p *Rated) validate() *ValidationError {
	var c fieldCheck
	c.usageKey(p.UsageID, p.MeteringSource, p.MeteringID)
	c.required("unit_id", p.UnitID)
	// rated_usage keeps the version in a UInt32 (as the price book bounds
	// it): a larger one would be stored as another version's number.
	c.check(p.UnitVersion >= 1 && p.UnitVersion <= math.MaxUint32, "unit_version", "must be an integer from 1 to 4294967295")
	c.requiredDecimal("quantity", p.Quantity)
	c.requiredDecimal("unit_price", p.UnitPrice)
	c.requiredDecimal("amount", p.Amount)
	c.required("currency", p.Currency)
	c.time("rated_at", p.RatedAt, false)
	return c.err
}

func (p *LedgerEntry) validate() *ValidationError {
	var c fieldCheck
	c.required("ledger_entry_id", p.LedgerEntryID)
	c.usageKey(p.UsageID, p.MeteringSource, p.MeteringID)
	c.requiredDecimal("amount", p.Amount)
	c.required("currency", p.Currency)
	c.time("posted_at", p.PostedAt, false)
	return c.err
}

// IsDecimal reports whether s is a contract decimal: what decimal.Parse
// reads ("12", "-0.5", "12.500000"; at most 18 fractional digits and a
// coefficient of at most 2^63-1; see package decimal). Exponents, "+",
// leading dots and NaN are not decimals. The validator accepts no amount
// the rater cannot compute with.
func IsDecimal(s string) bool {
	_, err := decimal.Parse(s)
	return err == nil
}
