package nodeagent

import (
	"time"

	"github.com/driftline/driftline/pipeline/contract"
)

// Mode is a connectivity mode of seed 004, as a small index (the names are
// contract.ConnectivityModes).
type Mode uint8

// Connectivity modes, in spectrum order.
const (
	Live Mode = iota
	Delayed
	EdgeCached
	Autonomous
	Disconnected
	Returning
	Replaying
	numModes
)

// The indexes count in the order of the contract's lists, which name them.
func init() {
	if len(contract.ConnectivityModes) != int(numModes) || len(contract.Gates) != int(numGates) ||
		len(contract.NodeAgentStates) != int(numStates) {
		panic("BUG: nodeagent's modes, gates or states differ from the contract's lists")
	}
}

func (m Mode) String() string { return nameOf(contract.ConnectivityModes, m, "UNKNOWN") }

// nameOf returns the name the contract's list gives index i, or unknown
// for an index past its end.
func nameOf[N ~string, I ~uint8](names []N, i I, unknown string) string {
	if int(i) < len(names) {
		return string(names[i])
	}
	return unknown
}

// Gate is a release gate of seed 000, as a small index (the names are
// contract.Gates).
type Gate uint8

// Gates, from best to worst.
const (
	GatePass Gate = iota
	GateWarning
	GateRetry
	GateInvestigate
	GateBlockProduction
	numGates
)

func (g Gate) String() string { return nameOf(contract.Gates, g, "unknown") }

// State is a node_agent_state of seed 000, as a small index (the names
// are contract.NodeAgentStates).
type State uint8

// Node-agent states.
const (
	StateHealthy State = iota
	StateStale
	StateRecovering
	StateOperatorActionRequired
	StateSecurityActionRequired
	numStates
)

func (s State) String() string { return nameOf(contract.NodeAgentStates, s, "unknown") }

// Status is the derived node_agent_status row of one node (CONTRACT
// sections 4 and 6). Strings are shared with the tracker and must not be
// modified; the Status passed to the emit callback is reused after the
// callback returns.
type Status struct {
	NodeID       string
	DomainID     string // from the node record
	OwningDomain string // from the node record

	State      string // node_agent_state
	Reason     string // node_agent_reason
	Gate       string
	UpdatePath string

	ExpectedAgentVersion    string // from the node record
	ObservedAgentVersion    string // from the newest heartbeat
	CertIssuerFingerprint   string // reported by the newest heartbeat
	IngressTrustFingerprint string // reported by the newest heartbeat
	// Expected fingerprints, from the node record (not columns of
	// node_agent_status; the identity_mismatch finding names them).
	ExpectedCertIssuerFingerprint   string
	ExpectedIngressTrustFingerprint string
	HostFingerprint                 string // of the newest heartbeat
	// HostFingerprints is the number of distinct host fingerprints seen
	// within the host window; two or more is a cloned identity.
	HostFingerprints int

	TerminalStreamProbe string
	WorkloadImpact      string
	Health              string

	ConnectivityMode string
	RTTMs            float64
	LossPct          float64
	BandwidthKbps    float64
	BacklogMessages  int64
	SecondsBehind    int64
	ReplayRequired   bool
	LastSeenAt       time.Time

	AttentionScore float64

	// IdentityMismatch is set while the node's identity contradicts the
	// platform registry: a cloned identity, or a certificate-issuer or
	// ingress-trust fingerprint that differs from the record's. The
	// joiner keeps identity_mismatch on maas/<node_id> open exactly while
	// it is set. IdentityReason is the first of cloned_identity_detected,
	// cert_issuer_mismatch, cert_untrusted_by_ingress that holds.
	IdentityMismatch bool
	IdentityReason   string

	// The fleet core (CONTRACT 8, docs/fleet-core.md): the record's tags,
	// kind, intent and authority, the lifecycle phase and state with the
	// at of the last transition and their count, the controller, relay,
	// versions and artifact the newest heartbeat reports, the derived
	// authority, rollout and supply-chain states, and the node's recent
	// events as <topic>/<partition>/<offset>, newest first.
	Tags                 []string
	NodeKind             string
	LifecycleIntent      string
	Phase                string
	LifecycleState       string
	PhaseSince           time.Time
	Transitions          uint64
	MasterOfRecord       string
	ControllerIDs        []string
	ControllerID         string
	Authority            string
	RelayID              string
	PolicyBundleID       string
	TargetVersion        string
	ReportedVersion      string
	Rollout              string
	ArtifactID           string
	ArtifactDigest       string
	SupplyChain          string
	UptimeS              int64
	Recent               Recent // RecentEvents formats it
	AuthorityConflict    bool   // authority_conflict is open
	SupplyChainViolation bool   // supply_chain_violation is open

	// CorrelationID is the correlation_id of the newest heartbeat.
	CorrelationID string
	// At is the event time of the change this row reports: the
	// heartbeat's or record's occurred_at, or the silence or host-window
	// deadline the watermark passed.
	At time.Time
	// Version grows with every row of the node and with event time
	// (max(previous+1, At in microseconds)), so the highest version is
	// the current row whatever path led to it.
	Version uint64
}
