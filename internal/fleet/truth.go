package fleet

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/driftline/driftline/pipeline/contract"
)

// Finding is one expected drift finding: the fields of drift_evidence the
// generator can predict.
type Finding struct {
	EvidenceID     string `json:"evidence_id"`
	Classification string `json:"classification"`
	Severity       string `json:"severity"`
	Provider       string `json:"provider"`
	ProviderID     string `json:"provider_id"`
	Status         string `json:"status"`
	RetryCount     int    `json:"retry_count"`
	Posture        string `json:"posture"`
	Kind           string `json:"kind,omitempty"` // the injected drift kind (truth only; never compared)
}

// NodeFinding is the expected node-agent behaviour of one node that is not
// healthy.
type NodeFinding struct {
	NodeID               string `json:"node_id"`
	Kind                 string `json:"kind"`
	ExpectedAgentVersion string `json:"expected_agent_version"`
	ObservedAgentVersion string `json:"observed_agent_version"`
	Heartbeats           int    `json:"heartbeats"`        // heartbeat events sent (redeliveries not counted)
	HostFingerprints     int    `json:"host_fingerprints"` // distinct machines reporting the node_id
	// Classification is the drift finding the node implies under CONTRACT
	// section 4 (identity_mismatch for cert mismatch and cloned identity),
	// for the node-agent issue; the drift model does not raise it yet.
	Classification string `json:"classification,omitempty"`
}

// NodeTruth is the node-agent ground truth.
type NodeTruth struct {
	Counts map[string]int `json:"counts"` // nodes per node kind, healthy included
	Nodes  []NodeFinding  `json:"nodes"`  // every node that is not healthy, by node_id
	// Statuses is the expected final node_agent_status of every node that
	// heartbeats (healthy included), by node_id.
	Statuses []NodeStatus `json:"statuses"`
}

// NodeStatus is the expected node_agent_status of one node once the whole
// stream is applied, by the rules of docs/node-agent-model.md with the
// tracker's default thresholds (DISCONNECTED and the host window at the
// config's staleness window). The watermark at the end is the last scan
// marker's time minus the allowed lateness: markers reach every partition
// and are the newest events of each.
type NodeStatus struct {
	NodeID           string `json:"node_id"`
	Kind             string `json:"kind"`
	State            string `json:"node_agent_state"`
	Reason           string `json:"node_agent_reason"`
	Gate             string `json:"gate"`
	Mode             string `json:"connectivity_mode"`
	HostFingerprints int    `json:"host_fingerprints"` // distinct hosts within the host window
	// IdentityMismatch: the node's identity_mismatch finding on
	// maas/<node_id> is open (cloned identity or cert issuer mismatch).
	IdentityMismatch bool `json:"identity_mismatch"`
}

// Node-agent silence thresholds: the defaults of the node-agent tracker
// (docs/node-agent-model.md). Disconnection and the host window are the
// staleness window of Config.Windows.
const (
	nodeDelayedAfter    = 7 * time.Minute
	nodeAutonomousAfter = 8 * time.Minute
)

// nodeStatuses computes NodeTruth.Statuses: it walks each node's
// heartbeat times in emission order (the only input the rules need beyond
// the node kind) and applies the rules to what the generator injects.
func (g *Generator) nodeStatuses(e *emitter) []NodeStatus {
	var out []NodeStatus
	var buf []byte
	for i := range g.nodes {
		if !g.kinds[famNodes][i].active() {
			continue
		}
		sim, _, _ := g.simulate(i)
		ns := sim.agentStatus()
		buf = e.appendProviderID(buf[:0], famNodes, i)
		ns.NodeID = string(buf)
		out = append(out, ns)
	}
	slices.SortFunc(out, func(a, b NodeStatus) int { return cmp.Compare(a.NodeID, b.NodeID) })
	return out
}

// UsageTotal is the exact total quantity of one tenant and unit.
type UsageTotal struct {
	TenantID string `json:"tenant_id"`
	UnitID   string `json:"unit_id"`
	Quantity string `json:"quantity"` // decimal string, six places
	Events   int    `json:"events"`
	micros   int64
}

// UsageAnomaly is one injected billing drift.
type UsageAnomaly struct {
	Kind           string `json:"kind"` // duplicate_usage | unknown_unit | conflicting_usage | rated_not_ledgered | amount_mismatch
	UsageID        string `json:"usage_id"`
	OtherUsageID   string `json:"other_usage_id,omitempty"` // duplicate_usage: the first usage_id of the key
	MeteringSource string `json:"metering_source"`
	MeteringID     string `json:"metering_id"`
	UnitID         string `json:"unit_id"`
	Quantity       string `json:"quantity"`
	// ConflictQuantity is conflicting_usage's corrected quantity (Quantity
	// is the first one's, the one rated).
	ConflictQuantity string `json:"conflict_quantity,omitempty"`
	TenantID         string `json:"tenant_id"`
	// RatedAmount, LedgerAmount and Currency: the ledger's anomalies
	// (Config.Ledger) only. LedgerAmount is empty for rated_not_ledgered.
	RatedAmount  string `json:"rated_amount,omitempty"`
	LedgerAmount string `json:"ledger_amount,omitempty"`
	Currency     string `json:"currency,omitempty"`
}

// UsageTruth is the billing ground truth. Totals count each metering key
// once (its first usage_id) and only units active in DefaultPriceBook: they
// are what a correct rater rates. Anomalies lists the rest.
type UsageTruth struct {
	Events    int            `json:"events"` // usage events sent, redeliveries not counted
	Totals    []UsageTotal   `json:"totals"` // by tenant, then unit
	Anomalies []UsageAnomaly `json:"anomalies"`
	// Ledgered is the number of ledger entries posted (Config.Ledger),
	// redeliveries not counted.
	Ledgered int `json:"ledgered,omitempty"`
}

// Truth is the exact ground truth of one generated fleet.
type Truth struct {
	Findings []Finding      `json:"findings"` // by evidence_id
	Counts   map[string]int `json:"counts"`   // findings per classification
	Kinds    map[string]int `json:"kinds"`    // resources per drift kind, healthy included
	Nodes    NodeTruth      `json:"nodes"`
	Usage    UsageTruth     `json:"usage"`
	Fleet    FleetTruth     `json:"fleet"` // the fleet core (Config.Core)
}

// Truth computes the ground truth without generating the event stream.
//
// Retry counts: a finding opened by an observation counts the later
// observations of its identity; every observed drift opens in round 0 (at
// the observation for stale, quota, route and identity; at round 0's first
// scan marker for orphans, whose grace has passed by then), so its
// retry_count is Rounds-1. Missing findings are opened by round 0's scan
// marker and see no observation: retry_count 0.
func (g *Generator) Truth() *Truth {
	t := &Truth{Counts: map[string]int{}, Kinds: map[string]int{}}
	rounds := g.cfg.Rounds
	e := &emitter{g: g}
	var buf []byte
	for f := range families {
		fam := &families[f]
		for i, k := range g.kinds[f] {
			t.Kinds[k.String()]++
			fd := Finding{Provider: fam.provider, Kind: k.String(), Status: string(contract.StatusOpen), RetryCount: rounds - 1}
			switch k {
			case KindHealthy:
				continue
			case KindMissing:
				// Opened by round 0's scan; each later scan confirms.
				fd.Classification = string(contract.ClassMissing)
			case KindOrphanUnowned, KindOrphanReleased, KindOrphanDeleted:
				fd.Classification = string(contract.ClassOrphan)
			case KindStaleState, KindStaleVersion:
				fd.Classification = string(contract.ClassStale)
				if rounds >= g.cfg.Windows.ReviewAfter {
					fd.Posture = string(contract.PostureOperatorReview)
				}
			case KindStaleResolved:
				fd.Classification, fd.RetryCount = string(contract.ClassStale), 0
				if rounds > 1 {
					fd.Status = string(contract.StatusResolved)
				}
			case KindQuota:
				fd.Classification = string(contract.ClassQuota)
			case KindRoute:
				fd.Classification = string(contract.ClassRoute)
			case KindOwnerRef:
				fd.Classification = string(contract.ClassIdentity)
			}
			fd.Severity, fd.Posture = severityPosture(fd.Classification, fd.Posture)
			buf = e.appendProviderID(buf[:0], f, i)
			fd.ProviderID = string(buf)
			fd.EvidenceID = fd.Classification + ":" + contract.IdentityKey(fd.Provider, fd.ProviderID)
			t.Findings = append(t.Findings, fd)
			t.Counts[fd.Classification]++
		}
	}
	slices.SortFunc(t.Findings, func(a, b Finding) int { return cmp.Compare(a.EvidenceID, b.EvidenceID) })

	t.Nodes.Counts = map[string]int{}
	for i, nk := range g.nodes {
		if !g.kinds[famNodes][i].active() {
			continue
		}
		t.Nodes.Counts[nk.String()]++
		if nk == NodeHealthy {
			continue
		}
		buf = e.appendProviderID(buf[:0], famNodes, i)
		nf := NodeFinding{NodeID: string(buf), Kind: nk.String(), ExpectedAgentVersion: agentVersion,
			ObservedAgentVersion: agentVersion, Heartbeats: rounds, HostFingerprints: 1}
		switch nk {
		case NodeAgentOutdated:
			nf.ObservedAgentVersion = outdatedAgentVersion
		case NodeClonedIdentity:
			nf.Heartbeats, nf.HostFingerprints, nf.Classification = 2*rounds, 2, string(contract.ClassIdentity)
		case NodeCertMismatch:
			nf.Classification = string(contract.ClassIdentity)
		case NodeDisconnected:
			nf.Heartbeats = 1
		}
		t.Nodes.Nodes = append(t.Nodes.Nodes, nf)
	}
	slices.SortFunc(t.Nodes.Nodes, func(a, b NodeFinding) int { return cmp.Compare(a.NodeID, b.NodeID) })
	// A foreign certificate or a cloned identity is an identity_mismatch
	// drift finding on maas/<node_id>: opened by the first heartbeat that
	// shows it (for a clone, the second host's first heartbeat) and
	// confirmed by every later heartbeat.
	for _, nf := range t.Nodes.Nodes {
		if nf.Classification != string(contract.ClassIdentity) {
			continue
		}
		fd := Finding{Classification: string(contract.ClassIdentity), Provider: contract.ProviderMAAS, ProviderID: nf.NodeID,
			Status: string(contract.StatusOpen), RetryCount: nf.Heartbeats - nf.HostFingerprints, Kind: nf.Kind}
		fd.Severity, fd.Posture = severityPosture(fd.Classification, "")
		fd.EvidenceID = fd.Classification + ":" + contract.IdentityKey(fd.Provider, fd.ProviderID)
		t.Findings = append(t.Findings, fd)
		t.Counts[fd.Classification]++
	}
	t.Nodes.Statuses = g.nodeStatuses(e)
	var core []Finding
	t.Fleet, core = g.fleetTruth(e)
	for _, fd := range core {
		t.Findings = append(t.Findings, fd)
		t.Counts[fd.Classification]++
	}
	slices.SortFunc(t.Findings, func(a, b Finding) int { return cmp.Compare(a.EvidenceID, b.EvidenceID) })

	t.Usage = g.usageTruth(e)
	return t
}

// severityPosture returns the severity and default posture of a
// classification (CONTRACT section 4); posture, when set, wins.
func severityPosture(class, posture string) (string, string) {
	p, ok := contract.PolicyOf(contract.Classification(class))
	if !ok {
		panic("BUG: no contract policy for classification " + class)
	}
	if posture == "" {
		posture = string(p.Posture)
	}
	return string(p.Severity), posture
}

func (g *Generator) usageTruth(e *emitter) UsageTruth {
	type tu struct {
		tenant int
		unit   string
	}
	active := map[string]bool{}
	for _, u := range DefaultPriceBook().Units {
		active[u.UnitID] = u.Lifecycle == "active"
	}
	var ut UsageTruth
	totals := map[tu]*UsageTotal{}
	var buf []byte
	w := g.newUsageWalker()
	for r := 0; r < g.cfg.Rounds; r++ {
		_ = w.round(r, func(u *usageRec) error {
			ut.Events++
			if u.corrected {
				a := UsageAnomaly{Kind: string(contract.KindConflictingUsage), UnitID: u.unit, Quantity: FormatMicros(u.micros),
					ConflictQuantity: FormatMicros(u.micros + correctionMicros),
					MeteringSource:   g.meterProducers[u.f][u.i/g.per[u.f]], TenantID: string(appendTenant(nil, u.tenant))}
				a.MeteringID = string(e.appendMeteringID(buf[:0], u))
				a.UsageID = string(e.appendUsageID(buf[:0], u))
				ut.Anomalies = append(ut.Anomalies, a)
				return nil // the first copy is rated and counted
			}
			if u.duplicate || u.anomaly == usageUnknownUnit {
				a := UsageAnomaly{Kind: string(contract.KindDuplicateUsage), UnitID: u.unit, Quantity: FormatMicros(u.micros),
					MeteringSource: g.meterProducers[u.f][u.i/g.per[u.f]], TenantID: string(appendTenant(nil, u.tenant))}
				a.MeteringID = string(e.appendMeteringID(buf[:0], u))
				a.UsageID = string(e.appendUsageID(buf[:0], u))
				if u.duplicate {
					dup := *u
					dup.duplicate = false
					a.OtherUsageID = string(e.appendUsageID(buf[:0], &dup))
				} else {
					a.Kind = string(contract.KindUnknownUnit)
				}
				ut.Anomalies = append(ut.Anomalies, a)
				return nil
			}
			if !active[u.unit] {
				panic("BUG: usage of a unit the price book does not have")
			}
			if g.cfg.Ledger.Enabled {
				ut.Ledgered++
				a := UsageAnomaly{UnitID: u.unit, Quantity: FormatMicros(u.micros),
					MeteringSource: g.meterProducers[u.f][u.i/g.per[u.f]], TenantID: string(appendTenant(nil, u.tenant))}
				if a, ok := g.ledgerAnomaly(u, a); ok {
					a.MeteringID = string(e.appendMeteringID(buf[:0], u))
					a.UsageID = string(e.appendUsageID(buf[:0], u))
					ut.Anomalies = append(ut.Anomalies, a)
					if a.Kind == string(contract.KindRatedNotLedgered) {
						ut.Ledgered--
					}
				}
			}
			key := tu{u.tenant, u.unit}
			t := totals[key]
			if t == nil {
				t = &UsageTotal{TenantID: string(appendTenant(nil, u.tenant)), UnitID: u.unit}
				totals[key] = t
			}
			t.micros += u.micros
			t.Events++
			return nil
		})
	}
	for _, t := range totals {
		t.Quantity = FormatMicros(t.micros)
		ut.Totals = append(ut.Totals, *t)
	}
	slices.SortFunc(ut.Totals, func(a, b UsageTotal) int {
		return cmp.Or(cmp.Compare(a.TenantID, b.TenantID), cmp.Compare(a.UnitID, b.UnitID))
	})
	slices.SortFunc(ut.Anomalies, func(a, b UsageAnomaly) int { return cmp.Compare(a.UsageID, b.UsageID) })
	return ut
}

// CompareOptions selects the fields Compare checks beyond identity and
// status.
type CompareOptions struct {
	IgnoreRetryCount bool // do not compare retry_count
	IgnorePosture    bool // do not compare posture
	IgnoreSeverity   bool // do not compare severity
}

// Mismatch is one field that differs between an expected and an observed
// finding.
type Mismatch struct {
	EvidenceID string
	Field      string
	Want, Got  string
}

// Diff is the difference between the ground truth and an observed set.
type Diff struct {
	Missing    []Finding  // expected, not observed
	Unexpected []Finding  // observed, not expected
	Mismatched []Mismatch // observed with other field values
}

// Empty reports whether the observed set matched exactly.
func (d Diff) Empty() bool { return len(d.Missing)+len(d.Unexpected)+len(d.Mismatched) == 0 }

// String renders the diff for a test failure; at most 20 lines per section.
func (d Diff) String() string {
	if d.Empty() {
		return "no difference"
	}
	var sb strings.Builder
	section := func(title string, n int, line func(int) string) {
		if n == 0 {
			return
		}
		fmt.Fprintf(&sb, "%s (%d):\n", title, n)
		for i := 0; i < n && i < 20; i++ {
			sb.WriteString("  " + line(i) + "\n")
		}
		if n > 20 {
			fmt.Fprintf(&sb, "  ... and %d more\n", n-20)
		}
	}
	section("missing (expected, not found)", len(d.Missing), func(i int) string { return describe(d.Missing[i]) })
	section("unexpected (found, not expected)", len(d.Unexpected), func(i int) string { return describe(d.Unexpected[i]) })
	section("mismatched", len(d.Mismatched), func(i int) string {
		m := d.Mismatched[i]
		return fmt.Sprintf("%s: %s want %q got %q", m.EvidenceID, m.Field, m.Want, m.Got)
	})
	return sb.String()
}

func describe(f Finding) string {
	s := fmt.Sprintf("%s status=%s retry_count=%d posture=%s", f.EvidenceID, f.Status, f.RetryCount, f.Posture)
	if f.Kind != "" {
		s += " (injected " + f.Kind + ")"
	}
	return s
}

// Compare diffs an observed set of findings (for instance the current rows
// of drift_evidence) against the truth. Observed findings are keyed by
// EvidenceID; their Kind is ignored.
func (t *Truth) Compare(got []Finding, opts CompareOptions) Diff {
	var d Diff
	want := make(map[string]*Finding, len(t.Findings))
	for i := range t.Findings {
		want[t.Findings[i].EvidenceID] = &t.Findings[i]
	}
	seen := make(map[string]bool, len(got))
	for _, g := range got {
		w, ok := want[g.EvidenceID]
		if !ok || seen[g.EvidenceID] {
			d.Unexpected = append(d.Unexpected, g)
			continue
		}
		seen[g.EvidenceID] = true
		check := func(field, a, b string) {
			if a != b {
				d.Mismatched = append(d.Mismatched, Mismatch{EvidenceID: g.EvidenceID, Field: field, Want: a, Got: b})
			}
		}
		check("classification", w.Classification, g.Classification)
		check("provider", w.Provider, g.Provider)
		check("provider_id", w.ProviderID, g.ProviderID)
		check("status", w.Status, g.Status)
		if !opts.IgnoreSeverity {
			check("severity", w.Severity, g.Severity)
		}
		if !opts.IgnoreRetryCount && !w.FromFleetCore() {
			check("retry_count", fmt.Sprint(w.RetryCount), fmt.Sprint(g.RetryCount))
		}
		if !opts.IgnorePosture {
			check("posture", w.Posture, g.Posture)
		}
	}
	for _, w := range t.Findings {
		if !seen[w.EvidenceID] {
			d.Missing = append(d.Missing, w)
		}
	}
	return d
}
