package apitypes

import (
	"time"

	"github.com/driftline/driftline/pipeline/contract"
)

// The contract's vocabulary as plain strings, for filters and answers,
// which take and return any string.
var (
	Classifications = contract.Strings(contract.Classifications)
	Severities      = contract.Strings(contract.Severities)
	BillingKinds    = contract.Strings(contract.BillingKinds)
	Gates           = contract.Strings(contract.Gates)
	// ConnectivityModes is the connectivity spectrum of seed 004, in the
	// order a node moves through it.
	ConnectivityModes = contract.Strings(contract.ConnectivityModes)
	// Enumerations of node_agent_status columns (seed 000, CONTRACT 3.3).
	NodeAgentStates      = contract.Strings(contract.NodeAgentStates)
	Healths              = contract.Strings(contract.Healths)
	WorkloadImpacts      = contract.Strings(contract.WorkloadImpacts)
	UpdatePaths          = contract.Strings(contract.UpdatePaths)
	TerminalStreamProbes = contract.Strings(contract.TerminalStreamProbes)
)

// StatusAll is the status filter value that selects open and resolved
// findings alike.
const StatusAll = "all"

// Finding is the current row of one drift finding (drift_evidence).
type Finding struct {
	EvidenceID      string     `json:"evidence_id"`
	CorrelationID   string     `json:"correlation_id"`
	ResourceFamily  string     `json:"resource_family"`
	ProductID       string     `json:"product_id"`
	OwningDomain    string     `json:"owning_domain"`
	OwningPackage   string     `json:"owning_package"`
	DomainID        string     `json:"domain_id"`
	RecordType      string     `json:"record_type"`
	RecordID        string     `json:"record_id"`
	ExpectedState   string     `json:"expected_state"`
	ExpectedVersion string     `json:"expected_version"`
	Provider        string     `json:"provider"`
	ProviderID      string     `json:"provider_id"`
	ObservedState   string     `json:"observed_state"`
	ObservedVersion string     `json:"observed_version"`
	ObservedAt      *time.Time `json:"observed_at"` // null: never observed
	Classification  string     `json:"classification"`
	Severity        string     `json:"severity"`
	Status          string     `json:"status"`
	FirstSeenAt     time.Time  `json:"first_seen_at"`
	LastSeenAt      time.Time  `json:"last_seen_at"`
	ResolvedAt      *time.Time `json:"resolved_at"` // null while open
	RetryCount      uint32     `json:"retry_count"`
	Posture         string     `json:"posture"`
	NextAttemptAt   *time.Time `json:"next_attempt_at"` // null: no retry scheduled
	Runbook         string     `json:"runbook"`
	AttentionScore  float64    `json:"attention_score"`
	Version         uint64     `json:"version"`    // row version; grows with every transition
	UpdatedAt       *time.Time `json:"updated_at"` // when the joiner wrote this version (wall clock)
	// The operator columns (docs/actions.md).
	AcknowledgedBy  string     `json:"acknowledged_by"`  // actor of the latest acknowledge; "" if none
	Assignee        string     `json:"assignee"`         // "" if unassigned
	SuppressedUntil *time.Time `json:"suppressed_until"` // null: not suppressed
	ActionState     string     `json:"action_state"`     // pending, succeeded, operator_review; "" if no request
	LastActionID    string     `json:"last_action_id"`   // command_id of the latest action applied
}

// DriftPage is the answer of GET /v1/drift.
type DriftPage struct {
	Findings []Finding `json:"findings"` // ordered by evidence_id; never null
	Count    int       `json:"count"`    // len(Findings)
	// NextCursor continues the listing after this page; absent on the last
	// page.
	NextCursor string `json:"next_cursor,omitempty"`
}

// HistoryEntry is one transition of a finding (drift_history).
type HistoryEntry struct {
	Version         uint64    `json:"version"`
	Transition      string    `json:"transition"` // opened, updated, resolved, reopened
	Classification  string    `json:"classification"`
	Severity        string    `json:"severity"`
	Status          string    `json:"status"`
	Posture         string    `json:"posture"`
	ExpectedState   string    `json:"expected_state"`
	ObservedState   string    `json:"observed_state"`
	ObservedVersion string    `json:"observed_version"`
	RetryCount      uint32    `json:"retry_count"`
	At              time.Time `json:"at"` // event time of the transition
	CorrelationID   string    `json:"correlation_id"`
	// ActionState is the finding's action_state after the transition.
	ActionState string `json:"action_state"`
	// Action, ActionID, ActorID and Reason describe the operator action of
	// an action or action_refused transition; Refusal is why the joiner
	// refused it.
	Action   string `json:"action,omitempty"`
	ActionID string `json:"action_id,omitempty"`
	ActorID  string `json:"actor_id,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Refusal  string `json:"refusal,omitempty"`
}

// Action is what an operator or the platform should do about a finding.
type Action struct {
	// Required is false once the finding is resolved.
	Required bool   `json:"required"`
	Posture  string `json:"posture"`
	Runbook  string `json:"runbook"`
	// Summary says in one sentence what the posture means for the resource.
	Summary       string     `json:"summary"`
	NextAttemptAt *time.Time `json:"next_attempt_at"` // posture retry: when the next attempt is due
}

// DriftDetail is the answer of GET /v1/drift/{evidence_id}.
type DriftDetail struct {
	Finding Finding        `json:"finding"`
	History []HistoryEntry `json:"history"` // ordered by version; never null
	Action  Action         `json:"action"`
}

// Status is the answer of GET /v1/status.
type Status struct {
	GeneratedAt time.Time `json:"generated_at"` // server wall clock
	// LastRun is the latest consumer_progress.updated_at of any consumer:
	// the last time a pipeline process reported progress. Null before any.
	LastRun *time.Time `json:"last_run"`
	// Watermark is the smallest consumer watermark (see ConsumerStatus):
	// every finding due at or before it has been classified. Null before
	// any progress.
	Watermark *time.Time `json:"watermark"`
	// WatermarkAgeSeconds is GeneratedAt - Watermark: how far event-time
	// processing trails the wall clock. Null with Watermark.
	WatermarkAgeSeconds *float64         `json:"watermark_age_seconds"`
	Consumers           []ConsumerStatus `json:"consumers"` // sorted by name; never null
	Findings            FindingCounts    `json:"findings"`
	Lag                 LagStatus        `json:"lag"`

	// Billing is the conservation of the billing windows (billing.go).
	Billing BillingConservation `json:"billing"`

	// Producers lists, per consumer, the producers whose well-formed
	// records were not applied (a clock ahead of the log, events older
	// than the partition keeps open, ids reused with other content), most
	// rejected first, at most 100 lines; never null. The records
	// themselves are in ingest.quarantine.
	Producers []ProducerRejections `json:"producers"`
}

// ProducerRejections counts one producer's records one consumer rejected
// for one reason (contract.ProducerReasons).
type ProducerRejections struct {
	Consumer string    `json:"consumer"`
	Producer string    `json:"producer"`
	Reason   string    `json:"reason"`
	Events   uint64    `json:"events"`
	LastAt   time.Time `json:"last_at"` // broker timestamp of the latest
}

// ConsumerStatus is the progress of one pipeline consumer, summed over the
// partitions it reported (consumer_progress).
type ConsumerStatus struct {
	Consumer   string `json:"consumer"`
	Partitions int    `json:"partitions"` // partitions with a progress row
	// Watermark is the smallest partition watermark: the consumer has
	// classified everything due at or before it on every partition.
	Watermark *time.Time `json:"watermark"`
	// MaxWatermark is the largest partition watermark.
	MaxWatermark        *time.Time `json:"max_watermark"`
	WatermarkAgeSeconds *float64   `json:"watermark_age_seconds"`
	Events              uint64     `json:"events"`        // events applied, all partitions
	FindingsOpen        uint64     `json:"findings_open"` // as the consumer last reported it
	UpdatedAt           *time.Time `json:"updated_at"`    // latest report of any partition
}

// FindingCounts counts current drift findings.
type FindingCounts struct {
	Open     uint64 `json:"open"`
	Resolved uint64 `json:"resolved"`
	// CriticalOpen counts open findings of severity critical.
	CriticalOpen uint64 `json:"critical_open"`
	// BlockedAdmissions counts open findings with posture block_admission.
	BlockedAdmissions uint64 `json:"blocked_admissions"`
	// Open findings by classification, severity and posture. Every known
	// classification and severity is present, with 0 when none.
	OpenByClassification map[string]uint64 `json:"open_by_classification"`
	OpenBySeverity       map[string]uint64 `json:"open_by_severity"`
	OpenByPosture        map[string]uint64 `json:"open_by_posture"`
}

// Lag states.
const (
	// LagOK: every group's lag is known.
	LagOK = "ok"
	// LagUnknown: the broker could not be asked, or a group could not be
	// described or has committed no offsets yet; Error says which.
	LagUnknown = "unknown"
	// LagNotConfigured: the server has no broker to ask.
	LagNotConfigured = "not_configured"
)

// LagStatus is the consumer lag of the pipeline's consumer groups.
type LagStatus struct {
	State  string     `json:"state"`           // LagOK, LagUnknown or LagNotConfigured
	Error  string     `json:"error,omitempty"` // why the lag is unknown
	Groups []GroupLag `json:"groups"`          // never null
}

// GroupLag is the lag of one consumer group.
type GroupLag struct {
	Group string `json:"group"`
	State string `json:"state"` // Kafka group state: Stable, Empty, Dead, ...
	// Total is the summed lag of every partition with a known lag; null
	// when the group could not be described or has committed no offsets.
	Total  *int64     `json:"total"`
	Error  string     `json:"error,omitempty"`
	Topics []TopicLag `json:"topics"` // sorted by topic; never null
}

// TopicLag is the lag of one group on one topic.
type TopicLag struct {
	Topic      string         `json:"topic"`
	Lag        int64          `json:"lag"` // sum of the known partition lags
	Partitions []PartitionLag `json:"partitions"`
}

// PartitionLag is the lag of one group on one partition.
type PartitionLag struct {
	Partition int32  `json:"partition"`
	Committed int64  `json:"committed"` // committed offset, -1 if none
	End       int64  `json:"end"`       // end offset, -1 if unknown
	Lag       int64  `json:"lag"`       // -1 when unknown
	Error     string `json:"error,omitempty"`
}

// Heatmap is the answer of GET /v1/heatmap: finding counts per owning
// domain and classification.
type Heatmap struct {
	Status string `json:"status"` // the status filter applied
	// Domains is the row axis: every owning_domain with a finding, sorted.
	Domains []string `json:"domains"`
	// Classifications is the column axis: every known classification in
	// contract order, then any other present in the data, sorted.
	Classifications []string `json:"classifications"`
	// Cells holds the non-empty cells, ordered by domain then
	// classification axis order.
	Cells []HeatCell `json:"cells"`
}

// HeatCell is one owning_domain x classification cell.
type HeatCell struct {
	OwningDomain   string `json:"owning_domain"`
	Classification string `json:"classification"`
	Count          uint64 `json:"count"`
	Critical       uint64 `json:"critical"`     // findings of severity critical
	MaxSeverity    string `json:"max_severity"` // most severe severity in the cell
}

// ErrorBody is the JSON body of every error answer.
type ErrorBody struct {
	Error     string   `json:"error"`
	Parameter string   `json:"parameter,omitempty"` // the offending query parameter
	Value     string   `json:"value,omitempty"`     // its offending value
	Allowed   []string `json:"allowed,omitempty"`   // allowed values of an enumeration
	// RequestID names the request in the query service's log and the
	// audit log; a failed read's detail is there, not in the answer.
	RequestID string `json:"request_id,omitempty"`
	// Reason is the refusal reason of an action (contract.ActionReasons).
	Reason string `json:"reason,omitempty"`
}

// ActionAccepted is the answer of POST /v1/findings/{evidence_id}/actions
// (202), and one finding of a batch: the action is on the commands topic
// and the joiner applies it in stream order (its effect shows in the
// finding's row and history once applied).
type ActionAccepted struct {
	CommandID  string    `json:"command_id,omitempty"` // absent in a preview
	EvidenceID string    `json:"evidence_id"`
	Action     string    `json:"action"`
	ActorID    string    `json:"actor_id"`
	Status     string    `json:"status"` // accepted, or preview
	AcceptedAt time.Time `json:"accepted_at"`
}

// ActionRefusal is a finding a batch action does not apply to, and why.
type ActionRefusal struct {
	EvidenceID string `json:"evidence_id"`
	Reason     string `json:"reason"`
	Detail     string `json:"detail,omitempty"` // what the reason means here, when it needs saying
}

// BatchAccepted is the answer of POST /v1/actions/batch.
type BatchAccepted struct {
	Action     string           `json:"action"`
	ActorID    string           `json:"actor_id"`
	Preview    bool             `json:"preview"`
	AcceptedAt time.Time        `json:"accepted_at"`
	Count      int              `json:"count"`      // len(AppliedTo)
	AppliedTo  []ActionAccepted `json:"applied_to"` // never null
	Refused    []ActionRefusal  `json:"refused"`    // never null
	// Skipped are the findings of nodes outside the key's authority
	// levels (reason authority_out_of_scope); never null.
	Skipped []ActionRefusal `json:"skipped"`
}

// Node is the current node-agent evidence and gate of one node
// (node_agent_status).
type Node struct {
	NodeID                  string     `json:"node_id"`
	DomainID                string     `json:"domain_id"`
	OwningDomain            string     `json:"owning_domain"`
	NodeAgentState          string     `json:"node_agent_state"`
	NodeAgentReason         string     `json:"node_agent_reason"`
	UpdatePath              string     `json:"update_path"`
	ExpectedAgentVersion    string     `json:"expected_agent_version"`
	ObservedAgentVersion    string     `json:"observed_agent_version"`
	CertIssuerFingerprint   string     `json:"cert_issuer_fingerprint"`
	IngressTrustFingerprint string     `json:"ingress_trust_fingerprint"`
	HostFingerprint         string     `json:"host_fingerprint"`
	TerminalStreamProbe     string     `json:"terminal_stream_probe"`
	WorkloadImpact          string     `json:"workload_impact"`
	Health                  string     `json:"health"`
	Gate                    string     `json:"gate"`
	ConnectivityMode        string     `json:"connectivity_mode"`
	RTTMs                   float64    `json:"rtt_ms"`
	LossPct                 float64    `json:"loss_pct"`
	BandwidthKbps           float64    `json:"bandwidth_kbps"`
	BacklogMessages         int64      `json:"backlog_messages"`
	SecondsBehind           int64      `json:"seconds_behind"`
	ReplayRequired          bool       `json:"replay_required"`
	LastSeenAt              *time.Time `json:"last_seen_at"` // null: never seen
	AttentionScore          float64    `json:"attention_score"`
	Version                 uint64     `json:"version"`
	UpdatedAt               *time.Time `json:"updated_at"`
	NodeFleet
}

// NodePage is the answer of GET /v1/nodes.
type NodePage struct {
	Nodes      []Node `json:"nodes"` // never null
	Count      int    `json:"count"`
	Sort       string `json:"sort"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// Comparison is one desired-vs-observed field of a node or resource.
type Comparison struct {
	Field    string `json:"field"`
	Desired  string `json:"desired"`
	Observed string `json:"observed"`
	// Match is false when both sides are known and differ.
	Match  bool   `json:"match"`
	Source string `json:"source"` // the row the pair comes from: node_agent_status or an evidence_id
}

// GateExplanation says what a node's gate means.
type GateExplanation struct {
	Gate    string `json:"gate"`
	Summary string `json:"summary"`
	// Blocking is true when the gate stops a production release.
	Blocking bool `json:"blocking"`
}

// NodeDetail is the answer of GET /v1/nodes/{node_id}: the node's
// evidence and gate, desired vs observed, and its drift findings (provider
// maas, provider_id = node_id) with their history; then the fleet core's
// panels (CONTRACT section 8), each null when the node has no status row.
type NodeDetail struct {
	Node       *Node           `json:"node"` // null when only findings name the node
	Gate       GateExplanation `json:"gate"`
	Comparison []Comparison    `json:"comparison"` // never null
	Findings   []DriftDetail   `json:"findings"`   // all statuses, open first then by evidence_id; never null

	Lifecycle   *Lifecycle   `json:"lifecycle"`
	Authority   *Authority   `json:"authority"`
	SupplyChain *SupplyChain `json:"supply_chain"`
	Replay      *Replay      `json:"replay"`
	// Diff is desired vs actual, field by field; never null.
	Diff []DiffField `json:"diff"`
	// Observations are the node's recent events (newest first, at most
	// eight), read from Kafka by their coordinates; never null.
	Observations []Observation `json:"observations"`
}

// ConnectivityCount is the number of nodes in one connectivity mode.
type ConnectivityCount struct {
	Mode  string `json:"mode"`
	Count uint64 `json:"count"`
}

// ConnectivityDomain is the spectrum of one owning domain.
type ConnectivityDomain struct {
	OwningDomain string              `json:"owning_domain"`
	Total        uint64              `json:"total"`
	Modes        []ConnectivityCount `json:"modes"` // every mode of contract.ConnectivityModes, in order, then others
}

// Connectivity is the answer of GET /v1/connectivity: node counts per
// connectivity mode, over all nodes and per owning domain.
type Connectivity struct {
	Total   uint64               `json:"total"`
	Modes   []ConnectivityCount  `json:"modes"`
	Domains []ConnectivityDomain `json:"domains"` // sorted by owning_domain; never null
}

// Attention item kinds.
const (
	KindFinding = "finding"
	KindNode    = "node"
)

// AttentionItem is one entry of the attention queue: an open finding or a
// node, with the score that ranks it.
type AttentionItem struct {
	Kind           string   `json:"kind"` // KindFinding or KindNode
	ID             string   `json:"id"`   // evidence_id or node_id
	AttentionScore float64  `json:"attention_score"`
	OwningDomain   string   `json:"owning_domain"`
	DomainID       string   `json:"domain_id"`
	Finding        *Finding `json:"finding,omitempty"`
	Node           *Node    `json:"node,omitempty"`
}

// AttentionDomain is the attention queue of one owning domain.
type AttentionDomain struct {
	OwningDomain string          `json:"owning_domain"`
	Items        []AttentionItem `json:"items"`
}

// Attention is the answer of GET /v1/attention.
type Attention struct {
	N int `json:"n"` // the requested size of each queue
	// Global is the top N over everything the filters select, by
	// attention_score descending, ties by id.
	Global []AttentionItem `json:"global"`
	// Domains holds the top N of each owning domain when by=domain was
	// asked, sorted by owning_domain; else absent.
	Domains []AttentionDomain `json:"domains,omitempty"`
}

// BillingMismatch is the current row of one billing finding
// (billing_mismatch). Amounts are decimal strings as written; empty when
// unknown.
type BillingMismatch struct {
	MismatchID     string `json:"mismatch_id"`
	Kind           string `json:"kind"`
	UsageID        string `json:"usage_id"`
	MeteringSource string `json:"metering_source"`
	MeteringID     string `json:"metering_id"`
	TenantID       string `json:"tenant_id"`
	ProductID      string `json:"product_id"`
	UnitID         string `json:"unit_id"`
	Quantity       string `json:"quantity"`
	// ConflictQuantity is set on conflicting_usage: the quantity of the
	// latest usage that repeated the usage_id with other content
	// (Quantity is the first one's, the one rated); else empty.
	ConflictQuantity string    `json:"conflict_quantity"`
	RatedAmount      string    `json:"rated_amount"`
	LedgerAmount     string    `json:"ledger_amount"`
	Currency         string    `json:"currency"`
	Status           string    `json:"status"`
	FirstSeenAt      time.Time `json:"first_seen_at"`
	LastSeenAt       time.Time `json:"last_seen_at"`
	// AmountAtRisk is |rated - ledger| for amount_mismatch, else the rated
	// amount, else the ledger amount; empty when the row has neither
	// (usage never priced: usage_not_rated, unknown_unit).
	AmountAtRisk string `json:"amount_at_risk"`
	Version      uint64 `json:"version"`
}

// MoneyTotal sums billing mismatches of one currency (and kind). Amounts
// are exact decimal strings.
type MoneyTotal struct {
	Currency     string `json:"currency"`
	Kind         string `json:"kind,omitempty"`
	Count        uint64 `json:"count"`
	AmountAtRisk string `json:"amount_at_risk"`
	RatedAmount  string `json:"rated_amount"`
	LedgerAmount string `json:"ledger_amount"`
	// Unpriced counts mismatches with neither a rated nor a ledger amount:
	// at risk, but of unknown value.
	Unpriced uint64 `json:"unpriced"`
	// Invalid counts amounts that are not decimal strings; they are summed
	// as 0 and are a bug of the writer.
	Invalid uint64 `json:"invalid"`
}

// BillingTotals are the totals over every mismatch the filters select, not
// only the page. Amounts of different currencies are never added.
type BillingTotals struct {
	Count      uint64       `json:"count"`
	ByCurrency []MoneyTotal `json:"by_currency"` // sorted by currency; never null
	ByKind     []MoneyTotal `json:"by_kind"`     // sorted by currency, kind; never null
}

// BillingPage is the answer of GET /v1/billing/mismatches.
type BillingPage struct {
	Mismatches []BillingMismatch `json:"mismatches"` // never null
	Count      int               `json:"count"`
	Sort       string            `json:"sort"`
	NextCursor string            `json:"next_cursor,omitempty"`
	Totals     BillingTotals     `json:"totals"`
}

// RatedTotal is one group of rated lines (rated_usage).
type RatedTotal struct {
	TenantID  string `json:"tenant_id,omitempty"`
	ProductID string `json:"product_id,omitempty"`
	UnitID    string `json:"unit_id,omitempty"`
	Day       string `json:"day,omitempty"` // YYYY-MM-DD
	Currency  string `json:"currency"`
	Lines     uint64 `json:"lines"`
	// Quantity is the summed quantity; it only means something when the
	// group is per unit.
	Quantity string `json:"quantity"`
	Amount   string `json:"amount"`
	Invalid  uint64 `json:"invalid"` // amounts or quantities that are not decimals, summed as 0
}

// RatedTotals is the answer of GET /v1/billing/rated.
type RatedTotals struct {
	GroupBy   []string     `json:"group_by"`
	Totals    []RatedTotal `json:"totals"` // sorted by the group columns, currency; never null
	Truncated bool         `json:"truncated"`
}
