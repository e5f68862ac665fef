package contract

import "time"

// Event types (CONTRACT section 1).
const (
	TypePlatformRecord      = "platform.record"
	TypeProviderObservation = "provider.observation"
	TypeScanCompleted       = "provider.scan_completed"
	TypeHeartbeat           = "nodeagent.heartbeat"
	TypeUsageRecorded       = "usage.recorded"
	TypeBillingRated        = "billing.rated"
	TypeLedgerEntry         = "ledger.entry"
)

// AllTypes lists every event type in a stable order.
var AllTypes = []string{
	TypePlatformRecord, TypeProviderObservation, TypeScanCompleted,
	TypeHeartbeat, TypeUsageRecorded, TypeBillingRated, TypeLedgerEntry,
	TypeArtifact, TypePolicyBundle,
}

// SchemaVersion is the only envelope schema version this build understands.
// Unknown versions are rejected, never guessed.
const SchemaVersion = 1

// Environments a pipeline (and each event) runs in.
const (
	EnvLocalParity = "local_parity"
	EnvDev         = "dev"
	EnvProd        = "prod"
)

// ValidEnvironment reports whether env is one of the three known profiles.
func ValidEnvironment(env string) bool {
	return env == EnvLocalParity || env == EnvDev || env == EnvProd
}

// Limits of a single event.
const (
	MaxIDLen    = 128      // event_id and producer, in bytes
	MaxEventLen = 64 << 10 // one encoded event (one NDJSON line), in bytes
)

// Envelope is one decoded event. Payload holds the raw payload object;
// DecodePayload turns it into the typed struct of EventType.
type Envelope struct {
	EventID       string
	EventType     string
	SchemaVersion int
	Producer      string
	Seq           uint64
	HasSeq        bool
	OccurredAt    time.Time
	CorrelationID string
	Environment   string
	Payload       []byte
}

// PlatformRecord is the platform's own record of a resource: desired state.
type PlatformRecord struct {
	RecordType              string   `json:"record_type"`
	RecordID                string   `json:"record_id"`
	RecordVersion           int64    `json:"record_version"`
	ResourceFamily          string   `json:"resource_family"`
	ProductID               string   `json:"product_id"`
	OwningDomain            string   `json:"owning_domain"`
	OwningPackage           string   `json:"owning_package"`
	DomainID                string   `json:"domain_id"`
	Tags                    []string `json:"tags"`
	Provider                string   `json:"provider"`
	ProviderID              string   `json:"provider_id"`
	ExpectedState           string   `json:"expected_state"`
	ExpectedVersion         string   `json:"expected_version"`
	Deleted                 bool     `json:"deleted"`
	Quota                   string   `json:"quota,omitempty"`
	RouteTarget             string   `json:"route_target,omitempty"`
	ExpectedAgentVersion    string   `json:"expected_agent_version,omitempty"`
	CertIssuerFingerprint   string   `json:"cert_issuer_fingerprint,omitempty"`
	IngressTrustFingerprint string   `json:"ingress_trust_fingerprint,omitempty"`

	// Fleet core of a node's record (CONTRACT 8.1); all optional. An
	// absent authority or desired object reads as its zero value.
	NodeKind        string    `json:"node_kind,omitempty"`
	LifecycleIntent string    `json:"lifecycle_intent,omitempty"`
	Authority       Authority `json:"authority,omitzero"`
	Desired         Desired   `json:"desired,omitzero"`
}

// Authority says who may declare desired state for a node (CONTRACT 8.1).
type Authority struct {
	MasterOfRecord string   `json:"master_of_record,omitempty"`
	ControllerIDs  []string `json:"controller_ids,omitempty"`
}

// Desired is a node's desired software state (CONTRACT 8.1).
type Desired struct {
	PolicyBundleID    string `json:"policy_bundle_id,omitempty"`
	TargetVersion     string `json:"target_version,omitempty"`
	MaintenanceWindow string `json:"maintenance_window,omitempty"`
	RequiresOnline    bool   `json:"requires_online,omitempty"`
}

// Observation is what a provider or runtime reports about one resource.
type Observation struct {
	Provider        string `json:"provider"`
	ProviderID      string `json:"provider_id"`
	ResourceFamily  string `json:"resource_family"`
	ObservedState   string `json:"observed_state"`
	ObservedVersion string `json:"observed_version"`
	OwnerRef        string `json:"owner_ref,omitempty"`
	Usage           string `json:"usage,omitempty"`
	RouteTarget     string `json:"route_target,omitempty"`
}

// ScanCompleted ends a provider's full inventory listing.
type ScanCompleted struct {
	Provider      string    `json:"provider"`
	ScanID        string    `json:"scan_id"`
	ScanStartedAt time.Time `json:"scan_started_at"`
}

// Heartbeat is node-agent telemetry for one node.
type Heartbeat struct {
	NodeID                  string  `json:"node_id"`
	AgentVersion            string  `json:"agent_version"`
	CertIssuerFingerprint   string  `json:"cert_issuer_fingerprint"`
	IngressTrustFingerprint string  `json:"ingress_trust_fingerprint"`
	HostFingerprint         string  `json:"host_fingerprint"`
	NodeAgentReason         string  `json:"node_agent_reason,omitempty"`
	UpdatePath              string  `json:"update_path"`
	TerminalStreamProbe     string  `json:"terminal_stream_probe"`
	WorkloadImpact          string  `json:"workload_impact"`
	Health                  string  `json:"health"`
	RTTMs                   float64 `json:"rtt_ms"`
	LossPct                 float64 `json:"loss_pct"`
	BandwidthKbps           float64 `json:"bandwidth_kbps"`
	BacklogMessages         int64   `json:"backlog_messages"`
	SecondsBehind           int64   `json:"seconds_behind"`
	ReplayRequired          bool    `json:"replay_required"`

	// Fleet core (CONTRACT 8.1); all optional. PolicyBundleID, the bundle
	// the agent says it is applying, goes beyond 8.1: a heartbeat naming a
	// bundle the registry does not have is quarantined.
	ReportedVersion string `json:"reported_version,omitempty"`
	ArtifactID      string `json:"artifact_id,omitempty"`
	ArtifactDigest  string `json:"artifact_digest,omitempty"`
	ControllerID    string `json:"controller_id,omitempty"`
	RelayID         string `json:"relay_id,omitempty"`
	UptimeS         int64  `json:"uptime_s,omitempty"`
	PolicyBundleID  string `json:"policy_bundle_id,omitempty"`
}

// Usage is accepted usage reported by a gateway.
type Usage struct {
	UsageID        string    `json:"usage_id"`
	MeteringSource string    `json:"metering_source"`
	MeteringID     string    `json:"metering_id"`
	UnitID         string    `json:"unit_id"`
	Quantity       string    `json:"quantity"`
	ProductID      string    `json:"product_id"`
	TenantID       string    `json:"tenant_id"`
	ProjectID      string    `json:"project_id"`
	RecordID       string    `json:"record_id,omitempty"`
	WindowStart    time.Time `json:"window_start"`
	WindowEnd      time.Time `json:"window_end"`
}

// Rated is one rated usage line, written by the rater.
type Rated struct {
	UsageID        string    `json:"usage_id"`
	MeteringSource string    `json:"metering_source"`
	MeteringID     string    `json:"metering_id"`
	UnitID         string    `json:"unit_id"`
	UnitVersion    int64     `json:"unit_version"`
	Quantity       string    `json:"quantity"`
	UnitPrice      string    `json:"unit_price"`
	Amount         string    `json:"amount"`
	Currency       string    `json:"currency"`
	TenantID       string    `json:"tenant_id"`
	ProductID      string    `json:"product_id"`
	RatedAt        time.Time `json:"rated_at"`
}

// LedgerEntry is one posted ledger entry.
type LedgerEntry struct {
	LedgerEntryID  string    `json:"ledger_entry_id"`
	UsageID        string    `json:"usage_id"`
	MeteringSource string    `json:"metering_source"`
	MeteringID     string    `json:"metering_id"`
	Amount         string    `json:"amount"`
	Currency       string    `json:"currency"`
	PostedAt       time.Time `json:"posted_at"`
}
