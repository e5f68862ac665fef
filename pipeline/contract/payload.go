package contract

import (
	json "github.com/segmentio/encoding/json"

	"github.com/driftline/driftline/pipeline/contract/decimal"
)

// Enumerations a payload field must belong to (switches: a map lookup
// costs more than the rest of a field's check).
func isFamily(v string) bool {
	switch v {
	case FamilyGPUaaS, FamilyAppRuntime, FamilyStorage, FamilyModelServing, FamilyBillingUsage:
		return true
	}
	return false
}

func isProvider(v string) bool {
	switch v {
	case ProviderMAAS, ProviderNodeAgent, ProviderAppRuntime, ProviderStorage, ProviderGateway, ProviderBillingIngestion:
		return true
	}
	return false
}

func isUpdatePath(v string) bool {
	switch UpdatePath(v) {
	case UpdatePathNone, UpdatePathSelfUpdate, UpdatePathRecoveryEnrollment, UpdatePathOperatorRebootstrap, UpdatePathFullReimage:
		return true
	}
	return false
}

func isProbe(v string) bool {
	switch TerminalStreamProbe(v) {
	case ProbePassed, ProbeFailed, ProbeNotRequired, ProbeNotExecuted:
		return true
	}
	return false
}

func isImpact(v string) bool {
	switch WorkloadImpact(v) {
	case ImpactNoneObserved, ImpactDegraded, ImpactUnavailable, ImpactUnknown:
		return true
	}
	return false
}

func isHealth(v string) bool {
	switch Health(v) {
	case HealthOK, HealthDegraded, HealthFailed, HealthUnknown:
		return true
	}
	return false
}

func isNodeKind(v string) bool {
	switch NodeKind(v) {
	case NodeKindEdge, NodeKindDC, NodeKindGateway, NodeKindRelay, NodeKindVirtual:
		return true
	}
	return false
}

func isLifecycleIntent(v string) bool {
	switch LifecycleIntent(v) {
	case IntentProvisioning, IntentEnrolled, IntentActive, IntentDecommissioning, IntentRetired:
		return true
	}
	return false
}

func isMasterOfRecord(v string) bool {
	switch MasterOfRecord(v) {
	case MasterGlobal, MasterRegion, MasterLocal:
		return true
	}
	return false
}

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
	switch typ {
	case TypePlatformRecord:
		return parseAs[PlatformRecord](raw, flags)
	case TypeProviderObservation:
		return parseAs[Observation](raw, flags)
	case TypeScanCompleted:
		return parseAs[ScanCompleted](raw, flags)
	case TypeHeartbeat:
		return parseAs[Heartbeat](raw, flags)
	case TypeUsageRecorded:
		return parseAs[Usage](raw, flags)
	case TypeBillingRated:
		return parseAs[Rated](raw, flags)
	case TypeLedgerEntry:
		return parseAs[LedgerEntry](raw, flags)
	case TypeCommand:
		return parseAs[Command](raw, flags)
	case TypeArtifact:
		return parseAs[Artifact](raw, flags)
	case TypePolicyBundle:
		return parseAs[PolicyBundle](raw, flags)
	}
	return nil, invalid(ReasonUnknownEventType, "event_type", "%q is not a known event type", typ)
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

func (c *fieldCheck) oneOf(name, v string, allowed func(string) bool) {
	if c.err == nil && v != "" && !allowed(v) {
		c.failValue(name, "%q is not an allowed value", v)
	}
}

func (c *fieldCheck) decimal(name, v string) {
	if c.err == nil && v != "" && !IsDecimal(v) {
		c.failValue(name, "%q is not a decimal string", v)
	}
}

// digest checks an artifact digest's form, sha256:<64 hex digits>.
func (c *fieldCheck) digest(name, v string) {
	if c.err == nil && v != "" && !IsArtifactDigest(v) {
		c.failValue(name, "%q is not sha256:<64 hex digits>", v)
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
	c.required("resource_family", p.ResourceFamily)
	c.oneOf("resource_family", p.ResourceFamily, isFamily)
	c.required("provider", p.Provider)
	c.oneOf("provider", p.Provider, isProvider)
	c.required("provider_id", p.ProviderID)
	c.required("expected_state", p.ExpectedState)
	c.decimal("quota", p.Quota)
	c.oneOf("node_kind", p.NodeKind, isNodeKind)
	c.oneOf("lifecycle_intent", p.LifecycleIntent, isLifecycleIntent)
	c.oneOf("authority.master_of_record", p.Authority.MasterOfRecord, isMasterOfRecord)
	for _, id := range p.Authority.ControllerIDs {
		c.check(id != "", "authority.controller_ids", "holds an empty controller id")
	}
	return c.err
}

func (p *Observation) validate() *ValidationError {
	var c fieldCheck
	c.required("provider", p.Provider)
	c.oneOf("provider", p.Provider, isProvider)
	c.required("provider_id", p.ProviderID)
	c.required("resource_family", p.ResourceFamily)
	c.oneOf("resource_family", p.ResourceFamily, isFamily)
	c.required("observed_state", p.ObservedState)
	c.decimal("usage", p.Usage)
	return c.err
}

func (p *ScanCompleted) validate() *ValidationError {
	var c fieldCheck
	c.required("provider", p.Provider)
	c.oneOf("provider", p.Provider, isProvider)
	c.required("scan_id", p.ScanID)
	c.check(!p.ScanStartedAt.IsZero(), "scan_started_at", "required RFC 3339 time")
	return c.err
}

func (p *Heartbeat) validate() *ValidationError {
	var c fieldCheck
	c.required("node_id", p.NodeID)
	c.required("agent_version", p.AgentVersion)
	c.required("host_fingerprint", p.HostFingerprint)
	c.required("health", p.Health)
	c.oneOf("health", p.Health, isHealth)
	c.oneOf("update_path", p.UpdatePath, isUpdatePath)
	c.oneOf("terminal_stream_probe", p.TerminalStreamProbe, isProbe)
	c.oneOf("workload_impact", p.WorkloadImpact, isImpact)
	c.check(p.RTTMs >= 0 && p.LossPct >= 0 && p.LossPct <= 100 && p.BandwidthKbps >= 0, "rtt_ms", "link quality out of range")
	c.check(p.BacklogMessages >= 0 && p.SecondsBehind >= 0, "backlog_messages", "sync debt must not be negative")
	c.check(p.UptimeS >= 0, "uptime_s", "must not be negative")
	return c.err
}

func (p *Artifact) validate() *ValidationError {
	var c fieldCheck
	c.required("artifact_id", p.ArtifactID)
	c.required("version", p.Version)
	c.required("digest", p.Digest)
	c.digest("digest", p.Digest)
	return c.err
}

func (p *PolicyBundle) validate() *ValidationError {
	var c fieldCheck
	c.required("policy_bundle_id", p.PolicyBundleID)
	c.required("target_version", p.TargetVersion)
	c.required("artifact_id", p.ArtifactID)
	c.check(!p.Deadline.IsZero(), "deadline", "required RFC 3339 time")
	for _, d := range p.Domains {
		c.check(d != "", "domains", "holds an empty domain")
	}
	return c.err
}

func (p *Usage) validate() *ValidationError {
	var c fieldCheck
	c.required("usage_id", p.UsageID)
	c.required("metering_source", p.MeteringSource)
	c.required("metering_id", p.MeteringID)
	c.required("unit_id", p.UnitID)
	c.required("quantity", p.Quantity)
	c.decimal("quantity", p.Quantity)
	c.required("tenant_id", p.TenantID)
	c.check(!p.WindowStart.IsZero(), "window_start", "required RFC 3339 time")
	c.check(!p.WindowEnd.IsZero(), "window_end", "required RFC 3339 time")
	c.check(!p.WindowEnd.Before(p.WindowStart), "window_end", "before window_start")
	return c.err
}

func (p *Rated) validate() *ValidationError {
	var c fieldCheck
	c.required("usage_id", p.UsageID)
	c.required("metering_source", p.MeteringSource)
	c.required("metering_id", p.MeteringID)
	c.required("unit_id", p.UnitID)
	c.check(p.UnitVersion >= 1, "unit_version", "must be an integer >= 1")
	c.required("quantity", p.Quantity)
	c.decimal("quantity", p.Quantity)
	c.required("unit_price", p.UnitPrice)
	c.decimal("unit_price", p.UnitPrice)
	c.required("amount", p.Amount)
	c.decimal("amount", p.Amount)
	c.required("currency", p.Currency)
	return c.err
}

func (p *LedgerEntry) validate() *ValidationError {
	var c fieldCheck
	c.required("ledger_entry_id", p.LedgerEntryID)
	c.required("usage_id", p.UsageID)
	c.required("metering_source", p.MeteringSource)
	c.required("metering_id", p.MeteringID)
	c.required("amount", p.Amount)
	c.decimal("amount", p.Amount)
	c.required("currency", p.Currency)
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
