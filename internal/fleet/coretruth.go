package fleet

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/driftline/driftline/pipeline/contract"
)

// Stages of a Rejection.
const (
	stageGateway = "gateway"
	stageJoiner  = "joiner"
)

// FleetTruth is the fleet-core ground truth: what a correct joiner derives
// from the stream by the fleet core's rules (docs/fleet-core.md), computed
// from the plan.
type FleetTruth struct {
	// Nodes holds every node whose final lifecycle is predicted, by
	// node_id: every node that heartbeats, and nodes whose record alone
	// decides it (deleted: RETIRED). A node with a record and no heartbeat
	// whose phase would be its connectivity is left out.
	Nodes []CoreNode `json:"nodes"`
	// Phases counts Nodes per final phase.
	Phases map[string]int `json:"phases"`
	// Roles counts the scripted nodes per role.
	Roles map[string]int `json:"roles"`
	// Rollouts are the final counts per policy bundle and domain.
	Rollouts []RolloutCount `json:"rollouts"`
	// Relays are the final sync debt per domain and relay ("" = direct).
	Relays []RelayDebt `json:"relays"`
	// Artifacts and Bundles are the final registry.
	Artifacts []contract.Artifact     `json:"artifacts"`
	Bundles   []contract.PolicyBundle `json:"bundles"`
	// Rejections are the bad-input events (Core.BadInput).
	Rejections []Rejection `json:"rejections,omitempty"`
}

// CoreNode is the expected fleet-core part of one node's
// node_agent_status row, and its lifecycle transitions.
type CoreNode struct {
	NodeID          string `json:"node_id"`
	DomainID        string `json:"domain_id"`
	Role            string `json:"role,omitempty"`
	Phase           string `json:"phase"`
	State           string `json:"state"`
	Authority       string `json:"authority"`
	SupplyChain     string `json:"supply_chain"`
	Rollout         string `json:"rollout"`
	PolicyBundleID  string `json:"policy_bundle_id"`
	TargetVersion   string `json:"target_version"`
	ReportedVersion string `json:"reported_version"`
	ControllerID    string `json:"controller_id"`
	RelayID         string `json:"relay_id"`
	ArtifactID      string `json:"artifact_id"`
	// Transitions is the predicted node_lifecycle_history of a scripted
	// node (nil for the others, and for every node when the timeline
	// leaves the path to the partitioning: transitionsExact):
	// Transitions[0] is the phase and state in force at TransitionsFrom,
	// each further one a row in order.
	TransitionsFrom time.Time    `json:"transitions_from,omitzero"`
	Transitions     []Transition `json:"transitions,omitempty"`
}

// Transition is one predicted lifecycle transition.
type Transition struct {
	Phase  string `json:"phase"`
	State  string `json:"state"`
	Reason string `json:"reason"`
	// At and CorrelationID are the causing event's; At is zero when the
	// watermark caused it, whose value depends on the partitioning.
	At            time.Time `json:"at,omitzero"`
	CorrelationID string    `json:"correlation_id,omitempty"`
}

// RolloutCount is the final rollout_status of one bundle and domain,
// summed over partitions.
type RolloutCount struct {
	PolicyBundleID string `json:"policy_bundle_id"`
	DomainID       string `json:"domain_id"`
	TargetVersion  string `json:"target_version"`
	AtTarget       int    `json:"at_target"`
	Updating       int    `json:"updating"`
	Behind         int    `json:"behind"`
	Failed         int    `json:"failed"`
	Pending        int    `json:"pending"`
}

// RelayDebt is the final sync debt of one domain and relay: nodes that
// heartbeat within the staleness window of the end and are not RETIRED.
type RelayDebt struct {
	DomainID         string `json:"domain_id"`
	RelayID          string `json:"relay_id"`
	Nodes            int    `json:"nodes"`
	MaxSecondsBehind int64  `json:"max_seconds_behind"`
	BacklogMessages  int64  `json:"backlog_messages"`
	// Moving: a node's seconds_behind or backlog changed after the last
	// round's first heartbeats (a returning node's replay). Fed through
	// the gateway, such a heartbeat and the last round's scan markers can
	// share one batch, the broker stamps them with one millisecond
	// (LogAppendTime) and the joiner's merge breaks the tie by stream,
	// observations before telemetry: the markers cross the minute before
	// the heartbeat is applied, and the last sync_debt_minute row counts
	// the node's earlier values. Only Nodes is exact then.
	Moving bool `json:"moving,omitempty"`
}

// Rejection is one bad-input event and the reason it must be rejected
// with.
type Rejection struct {
	Type     string `json:"event_type"`
	Producer string `json:"producer"`
	Seq      uint64 `json:"seq"`
	Reason   string `json:"reason"`
	Field    string `json:"field,omitempty"`
	// Stage is "gateway" (the validator rejects it) or "joiner" (the
	// joiner's registry check quarantines it, once, from partition 0).
	Stage string `json:"stage"`
}

// Node-agent link and sync-debt thresholds: the tracker's defaults
// (docs/node-agent-model.md).
const (
	nodeDelayedRTTMs      = 250
	nodeDelayedLossPct    = 2
	nodeEdgeCachedBehind  = 60
	nodeEdgeCachedBacklog = 1000
	nodeAutonomousBehind  = 600
)

// nodeSim is the state of one node as the rules see it.
type nodeSim struct {
	g       *Generator
	i       int
	hasRec  bool
	intent  string
	deleted bool
	ev      *hbSpec // evidence: the newest heartbeat
	evSet   bool
	evCopy  hbSpec
	retn    bool // returning
	hosts   [2]time.Time
	hostSet [2]bool
	ctl     [2]ctlSeen // the last two distinct controllers, newest first
	supply  string
	art     string // last reported artifact
	digest  string
	revoked bool // the registry has revoked artRevoked
	w       time.Time
}

type ctlSeen struct {
	id string
	at time.Time
}

func (s *nodeSim) finalW() time.Time {
	g := s.g
	return g.roundStart(g.cfg.Rounds - 1).Add(g.cfg.ScanDuration + time.Duration(len(families)-1)*markerStep - g.cfg.Windows.AllowedLateness)
}

func (s *nodeSim) advance(at time.Time) {
	if w := at.Add(-s.g.cfg.Windows.AllowedLateness); w.After(s.w) {
		s.w = w
	}
}

// heartbeat applies h.
func (s *nodeSim) heartbeat(h hbSpec) {
	if !s.hostSet[h.clone] || h.at.After(s.hosts[h.clone]) {
		s.hosts[h.clone], s.hostSet[h.clone] = h.at, true
	}
	if !s.evSet || h.at.After(s.evCopy.at) {
		s.retn = s.evSet && h.at.Sub(s.evCopy.at) >= nodeAutonomousAfter
		s.evCopy, s.evSet = h, true
		s.ev = &s.evCopy
	}
	if h.controller != "" {
		switch h.controller {
		case s.ctl[0].id:
			s.ctl[0].at = maxTime(s.ctl[0].at, h.at)
		case s.ctl[1].id:
			s.ctl[1].at = maxTime(s.ctl[1].at, h.at)
		default:
			if s.ctl[0].id == "" {
				s.ctl[0] = ctlSeen{h.controller, h.at}
			} else if s.ctl[1].id == "" || s.ctl[1].at.Before(s.ctl[0].at) {
				s.ctl[1] = ctlSeen{h.controller, h.at}
			} else {
				s.ctl[0] = ctlSeen{h.controller, h.at}
			}
		}
	}
	if h.artifactID != "" {
		s.art, s.digest = h.artifactID, h.digest
		s.evalSupply()
	}
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func (s *nodeSim) evalSupply() {
	a := slices.Index(artifactIDs[:], s.art)
	switch {
	case s.art == "":
		s.supply = ""
	case a < 0:
		s.supply = string(contract.SupplyChainUnknown)
	case a == artRevoked && s.revoked:
		s.supply = string(contract.SupplyChainRevoked)
	case s.digest != "" && s.digest != s.g.artifactDigest(a):
		s.supply = string(contract.SupplyChainDigestMismatch)
	default:
		s.supply = string(contract.SupplyChainOK)
	}
}

// authority returns node_agent_status.authority now.
func (s *nodeSim) authority() string {
	if s.ctl[0].id == "" {
		return ""
	}
	d := s.i / s.g.per[famNodes]
	if c := s.ev.controller; c != "" && c != s.g.controller(d, 0) && c != s.g.controller(d, 1) {
		return string(contract.AuthorityNotListed)
	}
	if s.ctl[1].id != "" {
		a, b := s.ctl[0].at, s.ctl[1].at
		older, gap := min(a.UnixNano(), b.UnixNano()), a.Sub(b).Abs()
		stale := s.g.cfg.Windows.Staleness
		if gap < stale && s.w.Before(time.Unix(0, older).Add(stale)) {
			return string(contract.AuthoritySplitBrain)
		}
	}
	return string(contract.AuthorityOK)
}

// mode returns the connectivity mode and its cause ("silence", "link",
// "sync" or "").
func (s *nodeSim) mode() (contract.ConnectivityMode, string) {
	h := s.ev
	silence := max(s.w.Sub(h.at), 0)
	switch {
	case silence >= s.g.cfg.Windows.Staleness:
		return contract.ModeDisconnected, "silence"
	case silence >= nodeAutonomousAfter:
		return contract.ModeAutonomous, "silence"
	case silence >= nodeDelayedAfter:
		return contract.ModeDelayed, "silence"
	case s.retn:
		return contract.ModeReturning, ""
	case h.replay:
		return contract.ModeReplaying, ""
	case h.behind >= nodeAutonomousBehind:
		return contract.ModeAutonomous, "sync"
	case h.behind >= nodeEdgeCachedBehind || h.backlog >= nodeEdgeCachedBacklog:
		return contract.ModeEdgeCached, "sync"
	case h.rtt >= nodeDelayedRTTMs || h.loss >= nodeDelayedLossPct:
		return contract.ModeDelayed, "link"
	}
	return contract.ModeLive, ""
}

// hostsInWindow counts the evidence host and every other host sighted
// within the host window.
func (s *nodeSim) hostsInWindow() int {
	n := 1
	for c := range s.hosts {
		if c != s.ev.clone && s.hostSet[c] && s.w.Before(s.hosts[c].Add(s.g.cfg.Windows.Staleness)) {
			n++
		}
	}
	return n
}

// agentStatus returns the node-agent status (docs/node-agent-model.md) of
// the attributes the generator varies.
func (s *nodeSim) agentStatus() NodeStatus {
	h := s.ev
	mode, cause := s.mode()
	ns := NodeStatus{Kind: s.g.nodes[s.i].String(), Mode: string(mode), HostFingerprints: s.hostsInWindow()}
	set := func(state contract.NodeAgentState, reason contract.NodeAgentReason, gate contract.Gate) {
		ns.State, ns.Reason, ns.Gate = string(state), string(reason), string(gate)
	}
	selfUpdate := h.updatePath == string(contract.UpdatePathSelfUpdate) || h.updatePath == string(contract.UpdatePathRecoveryEnrollment)
	switch {
	case ns.HostFingerprints > 1:
		set(contract.NodeStateSecurityActionRequired, contract.NodeReasonClonedIdentity, contract.GateBlockProduction)
		ns.IdentityMismatch = true
	case !h.certOK:
		set(contract.NodeStateSecurityActionRequired, contract.NodeReasonCertIssuerMismatch, contract.GateBlockProduction)
		ns.IdentityMismatch = true
	case h.health == string(contract.HealthFailed):
		set(contract.NodeStateOperatorActionRequired, contract.NodeReasonHealthFailed, contract.GateBlockProduction)
	case mode == contract.ModeDisconnected:
		set(contract.NodeStateStale, contract.NodeReasonAgentDown, contract.GateWarning)
	case h.agent != agentVersion && selfUpdate:
		set(contract.NodeStateRecovering, contract.NodeReasonAgentOutdated, contract.GateRetry)
	case h.agent != agentVersion:
		set(contract.NodeStateOperatorActionRequired, contract.NodeReasonAgentOutdated, contract.GateInvestigate)
	case mode == contract.ModeReturning || mode == contract.ModeReplaying:
		set(contract.NodeStateRecovering, contract.NodeReasonReplayInProgress, contract.GateRetry)
	case selfUpdate:
		set(contract.NodeStateRecovering, contract.NodeReasonUpdateInProgress, contract.GateRetry)
	case h.health == string(contract.HealthDegraded):
		set(contract.NodeStateOperatorActionRequired, contract.NodeReasonHealthDegraded, contract.GateWarning)
	case mode == contract.ModeDelayed || mode == contract.ModeEdgeCached || mode == contract.ModeAutonomous:
		reason := contract.NodeReasonHeartbeatOverdue
		switch cause {
		case "link":
			reason = contract.NodeReasonLinkDegraded
		case "sync":
			reason = contract.NodeReasonSyncDebt
		}
		set(contract.NodeStateStale, reason, contract.GateWarning)
	case h.health != string(contract.HealthOK):
		set(contract.NodeStateOperatorActionRequired, contract.NodeReasonEvidenceIncomplete, contract.GateInvestigate)
	default:
		set(contract.NodeStateHealthy, "", contract.GatePass)
	}
	return ns
}

// bundle returns the node's desired bundle (-1: none).
func (s *nodeSim) bundle() int {
	if !s.hasRec || s.deleted {
		return -1
	}
	return s.g.nodeBundle(s.i)
}

// updating is lifecycle rule 7's test.
func (s *nodeSim) updating() bool {
	b := s.bundle()
	if b < 0 || !s.evSet {
		return false
	}
	h := s.ev
	return h.reported != "" && h.reported != artifactVersions[bundleArtifact[b]] &&
		(h.updatePath == string(contract.UpdatePathSelfUpdate) || h.updatePath == string(contract.UpdatePathRecoveryEnrollment))
}

// lifecycle returns the phase, state and reason now; known is false when
// the phase would be the connectivity of a node that never heartbeat.
func (s *nodeSim) lifecycle() (phase contract.Phase, state, reason string, known bool) {
	intent := s.intent
	if intent == "" {
		intent = string(contract.IntentActive)
	}
	if s.deleted {
		intent = string(contract.IntentRetired)
	}
	switch intent {
	case string(contract.IntentRetired):
		return contract.PhaseRetired, string(contract.PhaseRetired), string(contract.RuleRetired), true
	case string(contract.IntentDecommissioning):
		return contract.PhaseDecommissioning, string(contract.PhaseDecommissioning), string(contract.RuleDecommissioning), true
	}
	if s.evSet {
		gate := s.agentStatus().Gate
		auth := s.authority()
		switch {
		case s.supply == string(contract.SupplyChainUnknown) || s.supply == string(contract.SupplyChainRevoked) || s.supply == string(contract.SupplyChainDigestMismatch):
			return contract.PhaseQuarantined, string(contract.StateSupplyChain), string(contract.RuleSupplyChain), true
		case auth == string(contract.AuthorityNotListed) || auth == string(contract.AuthoritySplitBrain):
			return contract.PhaseQuarantined, string(contract.StateAuthorityConflict), string(contract.RuleAuthorityConflict), true
		case gate == string(contract.GateBlockProduction):
			return contract.PhaseQuarantined, string(contract.StateGateBlocked), string(contract.RuleGateBlocked), true
		}
	}
	switch intent {
	case string(contract.IntentProvisioning):
		return contract.PhaseProvisioning, string(contract.PhaseProvisioning), string(contract.RuleProvisioning), true
	case string(contract.IntentEnrolled):
		return contract.PhaseEnrolled, string(contract.PhaseEnrolled), string(contract.RuleEnrolled), true
	}
	if !s.evSet {
		return "", "", "", false
	}
	h := s.ev
	switch h.health {
	case string(contract.HealthDegraded), string(contract.HealthFailed):
		if s.updating() {
			return contract.PhaseDegraded, string(contract.StateUpdateFailed), string(contract.RuleUpdateFailed), true
		}
		if h.health == string(contract.HealthFailed) {
			return contract.PhaseDegraded, string(contract.StateHealthFailed), string(contract.RuleHealthFailed), true
		}
		return contract.PhaseDegraded, string(contract.StateHealthDegraded), string(contract.RuleHealthDegraded), true
	}
	if s.updating() {
		return contract.PhaseUpdating, string(contract.PhaseUpdating), string(contract.RuleUpdating), true
	}
	mode, _ := s.mode()
	st := string(mode)
	if mode == contract.ModeLive {
		st = string(contract.StateLiveOK)
	}
	return contract.PhaseActive, st, string(contract.RuleConnectivity), true
}

// rollout returns rollout_status's category of the node now ("": it counts
// for no bundle).
func (s *nodeSim) rollout() string {
	b := s.bundle()
	if b < 0 {
		return ""
	}
	target := artifactVersions[bundleArtifact[b]]
	reported := ""
	health := ""
	if s.evSet {
		reported, health = s.ev.reported, s.ev.health
	}
	switch {
	case reported == target:
		return string(contract.RolloutAtTarget)
	case (health == string(contract.HealthDegraded) || health == string(contract.HealthFailed)) && s.updating():
		return string(contract.RolloutFailed)
	case !s.w.Before(s.g.bundleDeadline(b)):
		return string(contract.RolloutBehind)
	case s.updating():
		return string(contract.RolloutUpdating)
	}
	return string(contract.RolloutPending)
}

// simStep is one event of a node's simulation.
type simStep struct {
	at   time.Time
	kind uint8 // stepRecord, stepHeartbeat, stepRevoke, stepMarker
	hb   hbSpec
	ver  int64
	corr string
}

const (
	stepRecord uint8 = iota
	stepHeartbeat
	stepRevoke
	stepMarker
)

// steps lists, in emission order, the events that touch node i or move
// every partition's watermark (registry events and scan markers).
func (g *Generator) steps(i int) []simStep {
	var out []simStep
	k := g.kinds[famNodes][i]
	if k.hasRecord() {
		v1, v2 := g.recordTimes(famNodes, i)
		out = append(out, simStep{at: v1, kind: stepRecord, ver: 1, corr: corrRecordsV1})
		if k == KindOrphanDeleted || g.flags[famNodes][i]&flagUpdated != 0 {
			out = append(out, simStep{at: v2, kind: stepRecord, ver: 2, corr: corrRecordsV2})
		}
	}
	var hbs []hbSpec
	for r := 0; r < g.cfg.Rounds; r++ {
		rs := g.roundStart(r)
		if g.cfg.Core.Enabled && r == g.revokeRound() {
			out = append(out, simStep{at: rs, kind: stepRevoke, corr: corrRevoke})
			if _, v2 := g.intents(i); v2 != "" && k.hasRecord() {
				out = append(out, simStep{at: rs, kind: stepRecord, ver: 2, corr: corrRecordsIntent})
			}
		}
		if k.active() {
			hbs = g.heartbeats(i, r, hbs)
			for _, h := range hbs {
				if h.slot == 0 {
					out = append(out, simStep{at: h.at, kind: stepHeartbeat, hb: h})
				}
			}
			for slot := 1; slot < numSlots; slot++ {
				for _, h := range hbs {
					if h.slot == slot {
						out = append(out, simStep{at: h.at, kind: stepHeartbeat, hb: h})
					}
				}
			}
		}
		for f := range families {
			out = append(out, simStep{at: rs.Add(g.cfg.ScanDuration + time.Duration(f)*markerStep), kind: stepMarker})
		}
	}
	return out
}

// simulate runs node i's steps. It returns the final state and the
// transitions from the first known lifecycle on.
func (g *Generator) simulate(i int) (*nodeSim, time.Time, []Transition) {
	s := &nodeSim{g: g, i: i}
	var (
		from  time.Time
		trans []Transition
		last  Transition
		known bool
	)
	for _, st := range g.steps(i) {
		s.advance(st.at)
		own := true
		switch st.kind {
		case stepRecord:
			s.hasRec = true
			v1, v2 := g.intents(i)
			s.intent = v1
			if st.ver == 2 && st.corr == corrRecordsIntent {
				s.intent = v2
			}
			if st.ver == 2 && g.kinds[famNodes][i] == KindOrphanDeleted {
				s.deleted = true
			}
			if !g.cfg.Core.Enabled {
				s.intent = ""
			}
		case stepHeartbeat:
			s.heartbeat(st.hb)
		case stepRevoke:
			s.revoked = true
			own = s.art == artifactIDs[artRevoked]
			if own {
				s.evalSupply()
			}
		case stepMarker:
			own = false
		}
		phase, state, reason, ok := s.lifecycle()
		if !ok {
			continue
		}
		t := Transition{Phase: string(phase), State: state, Reason: reason}
		if own {
			t.At, t.CorrelationID = st.at, st.corr
		}
		if !known {
			known, from, last = true, st.at, t
			trans = append(trans, t)
			continue
		}
		if t.Phase != last.Phase || t.State != last.State {
			last = t
			trans = append(trans, t)
		}
	}
	if !s.w.Equal(s.finalW()) {
		panic("BUG: simulated final watermark " + s.w.String() + " is not the last scan marker's")
	}
	return s, from, trans
}

// scripted reports whether node i's transitions are predicted: a node with
// a role, on a timeline that fixes its path whatever the partitioning.
func (g *Generator) scripted(i int) bool { return g.roles[i] != RoleNone && g.transitionsExact() }

// transitionsExact reports whether the timeline puts every silence
// deadline of a scripted node where only its own events and the broadcast
// ones (scan markers, the registry) can pass it: between a node's
// heartbeats the other nodes' events move a partition's watermark to a
// value that depends on the partitioning, so no deadline may fall there.
// The default timeline keeps it; sparser rounds (RoundInterval above about
// 6m) make AUTONOMOUS, DELAYED and RETURNING steps depend on the
// partitioning, and Transitions is then left out.
func (g *Generator) transitionsExact() bool {
	c := g.cfg
	w := c.Windows
	spread, late, markers := c.ObservationSpread, w.AllowedLateness, c.ScanDuration+time.Duration(len(families)-1)*markerStep
	if w.Staleness <= nodeAutonomousAfter || spread > time.Minute {
		return false
	}
	// A node heartbeating every round never reaches DELAYED: its silence
	// before its next heartbeat is at most the later of the round's
	// markers and the next round's events.
	if max(markers, c.RoundInterval+spread)-late >= nodeDelayedAfter {
		return false
	}
	// The returning nodes: last heartbeat of round 0 at 2m+[0,spread);
	// silence below DELAYED through round 1's own events, AUTONOMOUS (not
	// DISCONNECTED) at round 1's markers and until round 2's events.
	last := 2 * time.Minute
	return c.RoundInterval+3*time.Minute+spread-late-last < nodeDelayedAfter &&
		c.RoundInterval+c.ScanDuration-late-(last+spread) >= nodeAutonomousAfter &&
		c.RoundInterval+markers-late-last < w.Staleness &&
		2*c.RoundInterval+spread-late-last < w.Staleness
}

// fleetTruth computes Truth.Fleet and the fleet-core findings.
func (g *Generator) fleetTruth(e *emitter) (FleetTruth, []Finding) {
	ft := FleetTruth{Phases: map[string]int{}, Roles: map[string]int{}}
	var findings []Finding
	type rk struct {
		bundle int
		domain int
	}
	type dk struct {
		domain int
		relay  string
	}
	rollouts := map[rk]*RolloutCount{}
	relays := map[dk]*RelayDebt{}
	var buf []byte
	for i, k := range g.kinds[famNodes] {
		if !k.hasRecord() {
			continue
		}
		d := i / g.per[famNodes]
		buf = e.appendProviderID(buf[:0], famNodes, i)
		id := string(buf)
		s, from, trans := g.simulate(i)
		if g.roles[i] != RoleNone {
			ft.Roles[g.roles[i].String()]++
		}
		// Findings: opened if the condition ever held.
		if g.cfg.Core.Enabled && s.evSet {
			opened := map[string]bool{}
			for _, t := range trans {
				switch t.State {
				case string(contract.StateAuthorityConflict):
					opened[string(contract.ClassAuthority)] = true
				case string(contract.StateSupplyChain):
					opened[string(contract.ClassSupplyChain)] = true
				}
			}
			// A node whose phase hides the condition (intent rules
			// first) still has the finding: check the conditions too.
			if a := s.authority(); a == string(contract.AuthorityNotListed) || a == string(contract.AuthoritySplitBrain) {
				opened[string(contract.ClassAuthority)] = true
			}
			if s.supply != "" && s.supply != string(contract.SupplyChainOK) {
				opened[string(contract.ClassSupplyChain)] = true
			}
			for class := range opened {
				open := false
				switch class {
				case string(contract.ClassAuthority):
					a := s.authority()
					open = a == string(contract.AuthorityNotListed) || a == string(contract.AuthoritySplitBrain)
				case string(contract.ClassSupplyChain):
					open = s.supply != "" && s.supply != string(contract.SupplyChainOK)
				}
				fd := Finding{Classification: class, Provider: contract.ProviderMAAS, ProviderID: id,
					Status: string(contract.StatusResolved), Kind: g.roles[i].String()}
				if open {
					fd.Status = string(contract.StatusOpen)
				}
				fd.Severity, fd.Posture = severityPosture(class, "")
				fd.EvidenceID = class + ":" + contract.NodeKey(id)
				findings = append(findings, fd)
			}
		}
		phase, state, _, ok := s.lifecycle()
		if !ok {
			continue
		}
		cn := CoreNode{NodeID: id, DomainID: g.domains[d].id, Role: g.roles[i].String(), Phase: string(phase), State: state}
		if s.evSet {
			cn.Authority, cn.SupplyChain = s.authority(), s.supply
			cn.ReportedVersion, cn.ControllerID, cn.RelayID, cn.ArtifactID = s.ev.reported, s.ev.controller, s.ev.relay, s.ev.artifactID
		}
		if b := s.bundle(); b >= 0 && g.cfg.Core.Enabled {
			cn.PolicyBundleID, cn.TargetVersion = bundleIDs[b], artifactVersions[bundleArtifact[b]]
			cn.Rollout = s.rollout()
			key := rk{b, d}
			rc := rollouts[key]
			if rc == nil {
				rc = &RolloutCount{PolicyBundleID: bundleIDs[b], DomainID: g.domains[d].id, TargetVersion: cn.TargetVersion}
				rollouts[key] = rc
			}
			switch cn.Rollout {
			case string(contract.RolloutAtTarget):
				rc.AtTarget++
			case string(contract.RolloutFailed):
				rc.Failed++
			case string(contract.RolloutBehind):
				rc.Behind++
			case string(contract.RolloutUpdating):
				rc.Updating++
			default:
				rc.Pending++
			}
		}
		if g.scripted(i) {
			cn.TransitionsFrom, cn.Transitions = from, trans
		}
		if g.cfg.Core.Enabled && s.evSet && phase != contract.PhaseRetired && s.w.Sub(s.ev.at) < g.cfg.Windows.Staleness {
			key := dk{d, s.ev.relay}
			rd := relays[key]
			if rd == nil {
				rd = &RelayDebt{DomainID: g.domains[d].id, RelayID: s.ev.relay}
				relays[key] = rd
			}
			rd.Nodes++
			rd.MaxSecondsBehind = max(rd.MaxSecondsBehind, s.ev.behind)
			rd.BacklogMessages += s.ev.backlog
			rd.Moving = rd.Moving || g.debtMoves(i)
		}
		ft.Phases[cn.Phase]++
		ft.Nodes = append(ft.Nodes, cn)
	}
	slices.SortFunc(ft.Nodes, func(a, b CoreNode) int { return cmp.Compare(a.NodeID, b.NodeID) })
	for _, rc := range rollouts {
		ft.Rollouts = append(ft.Rollouts, *rc)
	}
	slices.SortFunc(ft.Rollouts, func(a, b RolloutCount) int {
		return cmp.Or(cmp.Compare(a.PolicyBundleID, b.PolicyBundleID), cmp.Compare(a.DomainID, b.DomainID))
	})
	for _, rd := range relays {
		ft.Relays = append(ft.Relays, *rd)
	}
	slices.SortFunc(ft.Relays, func(a, b RelayDebt) int {
		return cmp.Or(cmp.Compare(a.DomainID, b.DomainID), cmp.Compare(a.RelayID, b.RelayID))
	})
	if !g.cfg.Core.Enabled {
		return ft, findings
	}
	for a := 0; a < numArtifacts; a++ {
		v := artifactVersions[a]
		ft.Artifacts = append(ft.Artifacts, contract.Artifact{ArtifactID: artifactIDs[a], Version: v, Digest: g.artifactDigest(a),
			SignedBy: "release-signer-2026", SBOMRef: "sbom://agent/" + v, ProvenanceRef: "slsa://builds/agent-" + v,
			Revoked: a == artRevoked})
	}
	for b := 0; b < numBundles; b++ {
		ft.Bundles = append(ft.Bundles, contract.PolicyBundle{PolicyBundleID: bundleIDs[b], TargetVersion: artifactVersions[bundleArtifact[b]],
			ArtifactID: artifactIDs[bundleArtifact[b]], Domains: g.bundleDomains(b), Deadline: g.bundleDeadline(b)})
	}
	if g.cfg.Core.BadInput && g.badNode >= 0 {
		buf = e.appendProviderID(buf[:0], famNodes, g.badNode)
		id := string(buf)
		d := g.badNode / g.per[famNodes]
		// Seqs: records are numbered per domain in emission order; the bad
		// record follows every version-1 record of its domain.
		recSeq := uint64(0)
		for f := range families {
			for j, k := range g.kinds[f] {
				if k.hasRecord() && j/g.per[f] == d {
					recSeq++
				}
			}
		}
		ft.Rejections = []Rejection{
			{Type: contract.TypePlatformRecord, Producer: g.recProducers[d], Seq: recSeq + 1,
				Reason: string(contract.ReasonInvalidField), Field: "payload.node_kind", Stage: stageGateway},
			{Type: contract.TypePolicyBundle, Producer: registryProducer, Seq: numArtifacts + numBundles + 1,
				Reason: string(contract.ReasonUnknownArtifact), Stage: stageJoiner},
			{Type: contract.TypeHeartbeat, Producer: "nodeagent-" + id, Seq: 2,
				Reason: string(contract.ReasonUnknownPolicyBundle), Stage: stageJoiner},
		}
	}
	if !g.revokes() {
		ft.Artifacts[artRevoked].Revoked = false
	}
	return ft, findings
}

// revokes reports whether the stream revokes artRevoked (always, with the
// fleet core: revokeRound exists for any Rounds >= 1).
func (g *Generator) revokes() bool { return g.cfg.Core.Enabled && g.cfg.Rounds > 0 }

// LifecycleRow is one node_lifecycle_history row as read back.
type LifecycleRow struct {
	Seq           int
	Phase, State  string
	Reason        string
	At            time.Time
	CorrelationID string
}

// MatchTransitions checks a node's lifecycle rows (in seq order) against
// its predicted transitions: the row in force at TransitionsFrom must have
// Transitions[0]'s phase and state, and the rows after it must be
// Transitions[1:] exactly (phase, state, reason, and at and
// correlation_id where the truth knows them).
func MatchTransitions(cn CoreNode, rows []LifecycleRow) error {
	if len(cn.Transitions) == 0 {
		return nil
	}
	k := -1
	for j, r := range rows {
		if !r.At.After(cn.TransitionsFrom) {
			k = j
		}
	}
	if k < 0 {
		return fmt.Errorf("no lifecycle row at or before %s; rows %s", cn.TransitionsFrom.Format(time.RFC3339Nano), formatRows(rows))
	}
	want := cn.Transitions
	if rows[k].Phase != want[0].Phase || rows[k].State != want[0].State {
		return fmt.Errorf("at %s: %s/%s, want %s/%s; rows %s", cn.TransitionsFrom.Format(time.RFC3339Nano),
			rows[k].Phase, rows[k].State, want[0].Phase, want[0].State, formatRows(rows))
	}
	got := rows[k+1:]
	if len(got) != len(want)-1 {
		return fmt.Errorf("%d transitions after %s, want %d: rows %s, want %s", len(got),
			cn.TransitionsFrom.Format(time.RFC3339Nano), len(want)-1, formatRows(rows), formatTransitions(want))
	}
	for j, r := range got {
		w := want[j+1]
		if r.Phase != w.Phase || r.State != w.State || r.Reason != w.Reason ||
			(!w.At.IsZero() && (!r.At.Equal(w.At) || r.CorrelationID != w.CorrelationID)) {
			return fmt.Errorf("transition %d: rows %s, want %s", j+1, formatRows(rows), formatTransitions(want))
		}
	}
	return nil
}

func formatRows(rows []LifecycleRow) string {
	var sb strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&sb, "[%d %s/%s %s %s %q]", r.Seq, r.Phase, r.State, r.Reason, r.At.Format("15:04:05.000"), r.CorrelationID)
	}
	return sb.String()
}

func formatTransitions(ts []Transition) string {
	var sb strings.Builder
	for _, t := range ts {
		at := "watermark"
		if !t.At.IsZero() {
			at = t.At.Format("15:04:05.000")
		}
		fmt.Fprintf(&sb, "[%s/%s %s %s %q]", t.Phase, t.State, t.Reason, at, t.CorrelationID)
	}
	return sb.String()
}

// debtMoves reports whether node i's seconds_behind or backlog changes
// between heartbeats of the last round (RelayDebt.Moving).
func (g *Generator) debtMoves(i int) bool {
	hbs := g.heartbeats(i, g.cfg.Rounds-1, nil)
	for _, h := range hbs[min(1, len(hbs)):] {
		if h.behind != hbs[0].behind || h.backlog != hbs[0].backlog {
			return true
		}
	}
	return false
}
