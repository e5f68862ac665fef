package fleet

import (
	"fmt"
	"maps"
	"math/big"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/driftline/driftline/pipeline/contract"
)

// This file replays the generated stream through a small reference
// implementation of docs/drift-model.md, with the events spread over
// partitions as Kafka would spread them, and checks that the findings are
// exactly the generator's Truth.

var (
	liveStates   = map[string]bool{"active": true, "running": true, "allocated": true, "ready": true, "attached": true, "serving": true}
	absentStates = map[string]bool{"released": true, "deleted": true, "decommissioned": true, "retired": true}
)

type refFinding struct {
	open    bool
	retry   int
	posture string
}

type refIdentity struct {
	provider, providerID string
	rec                  *contract.PlatformRecord
	recAt                time.Time
	obs                  *contract.Observation
	obsAt                time.Time
	orphanSince          time.Time
	disagreements        int
	missingByScan        bool
	findings             map[string]*refFinding
}

type refPartition struct {
	maxTime time.Time
	seen    map[string]bool // dedupe identities
	ids     map[string]*refIdentity
}

type refModel struct {
	t     *testing.T
	w     Windows
	parts []*refPartition
}

func (m *refModel) identity(p *refPartition, provider, id string) *refIdentity {
	k := contract.IdentityKey(provider, id)
	st := p.ids[k]
	if st == nil {
		st = &refIdentity{provider: provider, providerID: id, findings: map[string]*refFinding{}}
		p.ids[k] = st
	}
	return st
}

func (m *refModel) apply(d decoded) {
	if _, ok := d.payload.(*contract.Usage); ok {
		return // not joined
	}
	if _, ok := d.payload.(*contract.ScanCompleted); ok {
		for _, p := range m.parts {
			m.applyTo(p, d)
		}
		return
	}
	m.applyTo(m.parts[contract.Partition(d.Key, int32(len(m.parts)))], d)
}

func (m *refModel) applyTo(p *refPartition, d decoded) {
	dk := fmt.Sprintf("%s\x00%d", d.env.Producer, d.env.Seq)
	if p.seen[dk] {
		return
	}
	p.seen[dk] = true
	prevW := p.maxTime.Add(-m.w.AllowedLateness)
	if d.OccurredAt.After(p.maxTime) {
		p.maxTime = d.OccurredAt
	}
	w := p.maxTime.Add(-m.w.AllowedLateness)
	var own *refIdentity
	ownObs := false
	scanProvider := "" // provider whose scan completed: it confirms open missing findings
	switch pl := d.payload.(type) {
	case *contract.PlatformRecord:
		st := m.identity(p, pl.Provider, pl.ProviderID)
		if st.rec == nil || pl.RecordVersion > st.rec.RecordVersion {
			st.rec, st.recAt = pl, d.OccurredAt
			if m.owned(st) {
				st.orphanSince = time.Time{}
			}
		}
		own = st
	case *contract.Observation:
		st := m.identity(p, pl.Provider, pl.ProviderID)
		if st.obs == nil || d.OccurredAt.After(st.obsAt) {
			st.obs, st.obsAt = pl, d.OccurredAt
			st.missingByScan = false
			if !m.owned(st) && liveStates[pl.ObservedState] {
				if st.orphanSince.IsZero() {
					st.orphanSince = d.OccurredAt
				}
			} else {
				st.orphanSince = time.Time{}
			}
			if m.owned(st) && m.disagrees(st) {
				st.disagreements++
			} else {
				st.disagreements = 0
			}
			ownObs = true
		}
		own = st
	case *contract.ScanCompleted:
		scanProvider = pl.Provider
		for _, st := range p.ids {
			if st.provider == pl.Provider && st.rec != nil && st.recAt.Before(pl.ScanStartedAt) &&
				(st.obs == nil || st.obsAt.Before(pl.ScanStartedAt)) {
				st.missingByScan = true
			}
		}
	}
	if own != nil && !w.After(prevW) {
		m.evaluate(own, w, prevW, ownObs, false)
		return
	}
	for _, st := range p.ids {
		m.evaluate(st, w, prevW, ownObs && st == own, scanProvider != "" && st.provider == scanProvider)
	}
}

func (m *refModel) owned(st *refIdentity) bool {
	return st.rec != nil && !st.rec.Deleted && !absentStates[st.rec.ExpectedState]
}

func (m *refModel) disagrees(st *refIdentity) bool {
	return st.obs.ObservedState != st.rec.ExpectedState ||
		(st.rec.ExpectedVersion != "" && st.obs.ObservedVersion != st.rec.ExpectedVersion)
}

func greater(a, b string) bool {
	x, _ := new(big.Rat).SetString(a)
	y, _ := new(big.Rat).SetString(b)
	return x.Cmp(y) > 0
}

func (m *refModel) conditions(st *refIdentity, w time.Time) map[string]bool {
	owned := m.owned(st)
	c := map[string]bool{}
	if owned && liveStates[st.rec.ExpectedState] {
		last := st.recAt
		if st.obs != nil {
			last = st.obsAt
		}
		c[string(contract.ClassMissing)] = st.missingByScan || !w.Before(last.Add(m.w.Staleness))
	}
	if st.obs != nil && liveStates[st.obs.ObservedState] && !owned && !st.orphanSince.IsZero() {
		c[string(contract.ClassOrphan)] = !w.Before(st.orphanSince.Add(m.w.OrphanGrace))
	}
	if owned && st.obs != nil {
		c[string(contract.ClassStale)] = m.disagrees(st)
		c[string(contract.ClassQuota)] = st.rec.Quota != "" && st.obs.Usage != "" && greater(st.obs.Usage, st.rec.Quota)
		c[string(contract.ClassRoute)] = st.rec.RouteTarget != "" && st.obs.RouteTarget != "" && st.rec.RouteTarget != st.obs.RouteTarget
		c[string(contract.ClassIdentity)] = st.obs.OwnerRef != "" && st.obs.OwnerRef != st.rec.RecordID
	}
	return c
}

func (m *refModel) evaluate(st *refIdentity, w, prevW time.Time, ownObs, scanned bool) {
	now := m.conditions(st, w)
	for _, class := range []string{string(contract.ClassMissing), string(contract.ClassOrphan), string(contract.ClassStale), string(contract.ClassQuota), string(contract.ClassRoute), string(contract.ClassIdentity)} {
		f := st.findings[class]
		switch {
		case now[class] && (f == nil || !f.open):
			if ownObs && (class == string(contract.ClassOrphan) || class == string(contract.ClassMissing)) && !m.conditions(st, prevW)[class] {
				m.t.Errorf("%s/%s: %s opened by a watermark move of the identity's own observation: retry_count would be ambiguous", st.provider, st.providerID, class)
			}
			if f == nil {
				f = &refFinding{}
				st.findings[class] = f
			}
			f.open, f.retry = true, 0
		case now[class] && class != string(contract.ClassMissing) && ownObs, now[class] && class == string(contract.ClassMissing) && scanned:
			f.retry++ // a new observation confirms; for missing, a later scan that again does not see it
		case !now[class] && f != nil && f.open:
			f.open = false
		}
		if class == string(contract.ClassStale) && f != nil && f.open {
			f.posture = "retry"
			if st.disagreements >= m.w.ReviewAfter {
				f.posture = "operator_review"
			}
		}
	}
}

func (m *refModel) findings() []Finding {
	var out []Finding
	for _, p := range m.parts {
		for _, st := range p.ids {
			for class, f := range st.findings {
				sev, posture := severityPosture(class, f.posture)
				status := string(contract.StatusResolved)
				if f.open {
					status = string(contract.StatusOpen)
				}
				out = append(out, Finding{EvidenceID: class + ":" + contract.IdentityKey(st.provider, st.providerID),
					Classification: class, Severity: sev, Provider: st.provider, ProviderID: st.providerID,
					Status: status, RetryCount: f.retry, Posture: posture})
			}
		}
	}
	return out
}

func TestReferenceJoinerMatchesTruth(t *testing.T) {
	for _, tc := range []struct {
		seed   int64
		rounds int
		parts  int
	}{{1, 3, 6}, {2, 3, 1}, {3, 1, 3}, {4, 2, 16}, {5, 4, 6}, {6, 3, 64}} {
		t.Run(fmt.Sprintf("seed%d_rounds%d_parts%d", tc.seed, tc.rounds, tc.parts), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Seed, cfg.Rounds = tc.seed, tc.rounds
			cfg.DuplicateRate = 0.05
			g := newGen(t, cfg)
			m := &refModel{t: t, w: cfg.Windows}
			for range tc.parts {
				m.parts = append(m.parts, &refPartition{seen: map[string]bool{}, ids: map[string]*refIdentity{}})
			}
			for _, d := range decodeAll(t, collect(t, g)) {
				m.apply(d)
			}
			got := m.findings()
			slices.SortFunc(got, func(a, b Finding) int { return compareStrings(a.EvidenceID, b.EvidenceID) })
			// The reference joiner models records and observations only;
			// node-agent findings are checked by pipeline/joiner/nodeagent.
			truth := g.Truth()
			truth.Findings = slices.DeleteFunc(truth.Findings, func(f Finding) bool { return f.FromNodeAgent() || f.FromFleetCore() })
			if d := truth.Compare(got, CompareOptions{}); !d.Empty() {
				t.Fatalf("reference joiner disagrees with Truth:\n%s", d)
			}
		})
	}
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// The fleet core's reference: a second, event-driven implementation of the
// fleet core's rules (docs/fleet-core.md), per partition with the
// partition's own watermark, fed the decoded stream. It checks the
// fleet-core findings, every node's final lifecycle, authority, supply
// chain and rollout category, and the transitions of scripted nodes
// against Truth.

type coreRefNode struct {
	id        string
	rec       *contract.PlatformRecord
	hb        *contract.Heartbeat // evidence
	hbAt      time.Time
	returning bool
	hosts     map[string]time.Time
	ctls      []ctlSeen // last two distinct, any order
	supply    string
	art, dig  string
	trans     []refTransition
	opened    map[string]bool
}

type refTransition struct {
	phase, state, reason string
	at                   time.Time
	corr                 string
	watermark            bool
}

type coreRefPart struct {
	maxTime   time.Time
	seen      map[string]bool
	nodes     map[string]*coreRefNode
	artifacts map[string]*contract.Artifact
	artAt     map[string]time.Time
	bundles   map[string]*contract.PolicyBundle
	bundleAt  map[string]time.Time
}

type coreRef struct {
	t           *testing.T
	w           Windows
	parts       []*coreRefPart
	quarantined map[string]int // joiner rejections by reason
}

func (m *coreRef) apply(d decoded) {
	switch d.payload.(type) {
	case *contract.Usage, *contract.Observation:
		// Observations move the watermark like any joined event.
		if _, ok := d.payload.(*contract.Usage); ok {
			return
		}
	}
	switch d.payload.(type) {
	case *contract.ScanCompleted, *contract.Artifact, *contract.PolicyBundle:
		for pi, p := range m.parts {
			m.applyTo(pi, p, d)
		}
		return
	}
	pi := int(contract.Partition(d.Key, int32(len(m.parts))))
	m.applyTo(pi, m.parts[pi], d)
}

func (m *coreRef) node(p *coreRefPart, id string) *coreRefNode {
	n := p.nodes[id]
	if n == nil {
		n = &coreRefNode{id: id, hosts: map[string]time.Time{}, opened: map[string]bool{}}
		p.nodes[id] = n
	}
	return n
}

func (m *coreRef) applyTo(pi int, p *coreRefPart, d decoded) {
	dk := fmt.Sprintf("%s\x00%d", d.env.Producer, d.env.Seq)
	if p.seen[dk] {
		return
	}
	p.seen[dk] = true
	if d.OccurredAt.After(p.maxTime) {
		p.maxTime = d.OccurredAt
	}
	w := p.maxTime.Add(-m.w.AllowedLateness)
	var own *coreRefNode
	var touched []*coreRefNode
	switch pl := d.payload.(type) {
	case *contract.Artifact:
		if prev, ok := p.artAt[pl.ArtifactID]; ok && !d.OccurredAt.After(prev) {
			break
		}
		p.artifacts[pl.ArtifactID], p.artAt[pl.ArtifactID] = pl, d.OccurredAt
		for _, n := range p.nodes {
			if n.art == pl.ArtifactID {
				m.evalSupply(p, n)
				touched = append(touched, n)
			}
		}
	case *contract.PolicyBundle:
		if _, ok := p.artifacts[pl.ArtifactID]; !ok {
			if pi == 0 {
				m.quarantined[string(contract.ReasonUnknownArtifact)]++
			}
			return
		}
		if prev, ok := p.bundleAt[pl.PolicyBundleID]; ok && !d.OccurredAt.After(prev) {
			break
		}
		p.bundles[pl.PolicyBundleID], p.bundleAt[pl.PolicyBundleID] = pl, d.OccurredAt
	case *contract.PlatformRecord:
		if pl.Provider != contract.ProviderMAAS {
			break
		}
		n := m.node(p, pl.ProviderID)
		if n.rec == nil || pl.RecordVersion > n.rec.RecordVersion {
			n.rec = pl
			own = n
		}
	case *contract.Heartbeat:
		if pl.PolicyBundleID != "" && p.bundles[pl.PolicyBundleID] == nil {
			m.quarantined[string(contract.ReasonUnknownPolicyBundle)]++
			return
		}
		n := m.node(p, pl.NodeID)
		if t, ok := n.hosts[pl.HostFingerprint]; !ok || d.OccurredAt.After(t) {
			n.hosts[pl.HostFingerprint] = d.OccurredAt
		}
		if n.hb == nil || d.OccurredAt.After(n.hbAt) {
			n.returning = n.hb != nil && d.OccurredAt.Sub(n.hbAt) >= nodeAutonomousAfter
			n.hb, n.hbAt = pl, d.OccurredAt
		}
		if c := pl.ControllerID; c != "" {
			found := false
			for j := range n.ctls {
				if n.ctls[j].id == c {
					n.ctls[j].at = maxTime(n.ctls[j].at, d.OccurredAt)
					found = true
				}
			}
			if !found {
				n.ctls = append(n.ctls, ctlSeen{c, d.OccurredAt})
				slices.SortFunc(n.ctls, func(a, b ctlSeen) int { return b.at.Compare(a.at) })
				n.ctls = n.ctls[:min(len(n.ctls), 2)]
			}
		}
		if pl.ArtifactID != "" {
			n.art, n.dig = pl.ArtifactID, pl.ArtifactDigest
			m.evalSupply(p, n)
		}
		own = n
	}
	for _, n := range p.nodes {
		cause := n == own || slices.Contains(touched, n)
		m.evaluate(p, n, w, cause, d)
	}
}

func (m *coreRef) evalSupply(p *coreRefPart, n *coreRefNode) {
	a := p.artifacts[n.art]
	switch {
	case a == nil:
		n.supply = string(contract.SupplyChainUnknown)
	case a.Revoked:
		n.supply = string(contract.SupplyChainRevoked)
	case n.dig != "" && n.dig != a.Digest:
		n.supply = string(contract.SupplyChainDigestMismatch)
	default:
		n.supply = string(contract.SupplyChainOK)
	}
}

func (m *coreRef) authority(n *coreRefNode, w time.Time) string {
	if len(n.ctls) == 0 {
		return ""
	}
	if c := n.hb.ControllerID; c != "" && len(n.rec.Authority.ControllerIDs) > 0 && !slices.Contains(n.rec.Authority.ControllerIDs, c) {
		return string(contract.AuthorityNotListed)
	}
	if len(n.ctls) == 2 {
		a, b := n.ctls[0].at, n.ctls[1].at
		older := a
		if b.Before(a) {
			older = b
		}
		if a.Sub(b).Abs() < m.w.Staleness && w.Before(older.Add(m.w.Staleness)) {
			return string(contract.AuthoritySplitBrain)
		}
	}
	return string(contract.AuthorityOK)
}

func (m *coreRef) mode(n *coreRefNode, w time.Time) string {
	h := n.hb
	silence := max(w.Sub(n.hbAt), 0)
	switch {
	case silence >= m.w.Staleness:
		return string(contract.StateDisconnected)
	case silence >= 8*time.Minute:
		return string(contract.StateAutonomous)
	case silence >= 7*time.Minute:
		return string(contract.StateDelayed)
	case n.returning:
		return string(contract.StateReturning)
	case h.ReplayRequired:
		return string(contract.StateReplaying)
	case h.SecondsBehind >= 600:
		return string(contract.StateAutonomous)
	case h.SecondsBehind >= 60 || h.BacklogMessages >= 1000:
		return string(contract.StateEdgeCached)
	case h.RTTMs >= 250 || h.LossPct >= 2:
		return string(contract.StateDelayed)
	}
	return string(contract.StateLiveOK)
}

func (m *coreRef) blocked(n *coreRefNode, w time.Time) bool {
	hosts := 0
	for fp, at := range n.hosts {
		if fp == n.hb.HostFingerprint || w.Before(at.Add(m.w.Staleness)) {
			hosts++
		}
	}
	return hosts > 1 || n.hb.CertIssuerFingerprint != n.rec.CertIssuerFingerprint || n.hb.Health == string(contract.HealthFailed)
}

func (m *coreRef) updating(p *coreRefPart, n *coreRefNode) bool {
	if n.rec == nil || n.hb == nil || n.rec.Deleted {
		return false
	}
	b := p.bundles[n.rec.Desired.PolicyBundleID]
	return b != nil && n.hb.ReportedVersion != "" && n.hb.ReportedVersion != b.TargetVersion &&
		(n.hb.UpdatePath == string(contract.UpdatePathSelfUpdate) || n.hb.UpdatePath == string(contract.UpdatePathRecoveryEnrollment))
}

// lifecycle returns phase, state, reason; ok false when unknown (no
// heartbeat and nothing but connectivity would decide).
func (m *coreRef) lifecycle(p *coreRefPart, n *coreRefNode, w time.Time) (string, string, string, bool) {
	if n.rec == nil {
		return "", "", "", false
	}
	intent := n.rec.LifecycleIntent
	if intent == "" {
		intent = string(contract.IntentActive)
	}
	if n.rec.Deleted {
		intent = string(contract.IntentRetired)
	}
	switch intent {
	case string(contract.IntentRetired):
		return string(contract.PhaseRetired), string(contract.StateRetired), string(contract.RuleRetired), true
	case string(contract.IntentDecommissioning):
		return string(contract.PhaseDecommissioning), string(contract.StateDecommissioning), string(contract.RuleDecommissioning), true
	}
	if n.hb != nil {
		a := m.authority(n, w)
		switch {
		case n.supply != "" && n.supply != string(contract.SupplyChainOK):
			return string(contract.PhaseQuarantined), string(contract.StateSupplyChain), string(contract.RuleSupplyChain), true
		case a == string(contract.AuthorityNotListed) || a == string(contract.AuthoritySplitBrain):
			return string(contract.PhaseQuarantined), string(contract.StateAuthorityConflict), string(contract.RuleAuthorityConflict), true
		case m.blocked(n, w):
			return string(contract.PhaseQuarantined), string(contract.StateGateBlocked), string(contract.RuleGateBlocked), true
		}
	}
	switch intent {
	case string(contract.IntentProvisioning):
		return string(contract.PhaseProvisioning), string(contract.StateProvisioning), string(contract.RuleProvisioning), true
	case string(contract.IntentEnrolled):
		return string(contract.PhaseEnrolled), string(contract.StateEnrolled), string(contract.RuleEnrolled), true
	}
	if n.hb == nil {
		return "", "", "", false
	}
	if n.hb.Health == string(contract.HealthDegraded) || n.hb.Health == string(contract.HealthFailed) {
		if m.updating(p, n) {
			return string(contract.PhaseDegraded), string(contract.StateUpdateFailed), string(contract.RuleUpdateFailed), true
		}
		if n.hb.Health == string(contract.HealthFailed) {
			return string(contract.PhaseDegraded), string(contract.StateHealthFailed), string(contract.RuleHealthFailed), true
		}
		return string(contract.PhaseDegraded), string(contract.StateHealthDegraded), string(contract.RuleHealthDegraded), true
	}
	if m.updating(p, n) {
		return string(contract.PhaseUpdating), string(contract.StateUpdating), string(contract.RuleUpdating), true
	}
	return string(contract.PhaseActive), m.mode(n, w), string(contract.RuleConnectivity), true
}

func (m *coreRef) evaluate(p *coreRefPart, n *coreRefNode, w time.Time, cause bool, d decoded) {
	if n.hb != nil {
		if a := m.authority(n, w); a == string(contract.AuthorityNotListed) || a == string(contract.AuthoritySplitBrain) {
			n.opened[string(contract.ClassAuthority)] = true
		}
		if n.supply != "" && n.supply != string(contract.SupplyChainOK) {
			n.opened[string(contract.ClassSupplyChain)] = true
		}
	}
	phase, state, reason, ok := m.lifecycle(p, n, w)
	if !ok {
		return
	}
	if k := len(n.trans); k > 0 && n.trans[k-1].phase == phase && n.trans[k-1].state == state {
		return
	}
	t := refTransition{phase: phase, state: state, reason: reason, at: w, watermark: true}
	if cause {
		t.at, t.corr, t.watermark = d.OccurredAt, d.env.CorrelationID, false
	}
	n.trans = append(n.trans, t)
}

func (m *coreRef) rollout(p *coreRefPart, n *coreRefNode, w time.Time) string {
	if n.rec == nil || n.rec.Deleted {
		return ""
	}
	b := p.bundles[n.rec.Desired.PolicyBundleID]
	if b == nil || (len(b.Domains) > 0 && !slices.Contains(b.Domains, n.rec.DomainID)) {
		return ""
	}
	reported, health := "", ""
	if n.hb != nil {
		reported, health = n.hb.ReportedVersion, n.hb.Health
	}
	switch {
	case reported == b.TargetVersion:
		return string(contract.RolloutAtTarget)
	case (health == string(contract.HealthDegraded) || health == string(contract.HealthFailed)) && m.updating(p, n):
		return string(contract.RolloutFailed)
	case !w.Before(b.Deadline):
		return string(contract.RolloutBehind)
	case m.updating(p, n):
		return string(contract.RolloutUpdating)
	}
	return string(contract.RolloutPending)
}

func TestReferenceFleetCoreMatchesTruth(t *testing.T) {
	for _, tc := range []struct {
		seed     int64
		rounds   int
		parts    int
		interval time.Duration
	}{{1, 3, 6, 0}, {2, 3, 1, 0}, {3, 1, 3, 0}, {4, 2, 16, 0}, {5, 4, 6, 0}, {6, 3, 64, 0}, {7, 3, 6, 9 * time.Minute}, {8, 4, 12, 9 * time.Minute}} {
		t.Run(fmt.Sprintf("seed%d_rounds%d_parts%d_interval%v", tc.seed, tc.rounds, tc.parts, tc.interval), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Seed, cfg.Rounds = tc.seed, tc.rounds
			if tc.interval > 0 {
				cfg.RoundInterval = tc.interval
			}
			cfg.DuplicateRate = 0.05
			cfg.Core.BadInput = true
			g := newGen(t, cfg)
			m := &coreRef{t: t, w: cfg.Windows, quarantined: map[string]int{}}
			for range tc.parts {
				m.parts = append(m.parts, &coreRefPart{seen: map[string]bool{}, nodes: map[string]*coreRefNode{},
					artifacts: map[string]*contract.Artifact{}, artAt: map[string]time.Time{},
					bundles: map[string]*contract.PolicyBundle{}, bundleAt: map[string]time.Time{}})
			}
			gatewayRejected := 0
			v := contract.Validator{Environment: contract.EnvLocalParity}
			for _, e := range collect(t, g) {
				env, verr := v.Decode(e.Line)
				var p any
				if verr == nil {
					var perr *contract.ValidationError
					if p, perr = contract.DecodePayload(env.EventType, env.Payload); perr != nil {
						verr = perr
					}
				}
				if verr != nil {
					if verr.Reason != contract.ReasonInvalidField || verr.Field != "payload.node_kind" {
						t.Fatalf("rejected %v: %s", verr, e.Line)
					}
					if !e.Redelivery {
						gatewayRejected++
					}
					continue
				}
				m.apply(decoded{Event: e, env: env, payload: p})
			}
			truth := g.Truth()
			ft := truth.Fleet
			// Rejections.
			want := map[string]int{}
			gw := 0
			for _, r := range ft.Rejections {
				if r.Stage == stageGateway {
					gw++
				} else {
					want[r.Reason]++
				}
			}
			if gatewayRejected != gw || !maps.Equal(want, m.quarantined) {
				t.Errorf("rejections: gateway %d joiner %v, truth %d %v", gatewayRejected, m.quarantined, gw, want)
			}
			// Findings.
			var got []Finding
			nodes := map[string]*coreRefNode{}
			var w time.Time
			parts := map[string]*coreRefPart{}
			for _, p := range m.parts {
				w = p.maxTime.Add(-cfg.Windows.AllowedLateness)
				for id, n := range p.nodes {
					nodes[id], parts[id] = n, p
					for class := range n.opened {
						open := false
						switch class {
						case string(contract.ClassAuthority):
							a := m.authority(n, w)
							open = a == string(contract.AuthorityNotListed) || a == string(contract.AuthoritySplitBrain)
						default:
							open = n.supply != string(contract.SupplyChainOK)
						}
						sev, posture := severityPosture(class, "")
						st := string(contract.StatusResolved)
						if open {
							st = string(contract.StatusOpen)
						}
						got = append(got, Finding{EvidenceID: class + ":" + contract.NodeKey(id), Classification: class,
							Severity: sev, Provider: contract.ProviderMAAS, ProviderID: id, Status: st, Posture: posture})
					}
				}
			}
			core := slices.DeleteFunc(slices.Clone(truth.Findings), func(f Finding) bool { return !f.FromFleetCore() })
			tc := &Truth{Findings: core}
			if d := tc.Compare(got, CompareOptions{}); !d.Empty() {
				t.Errorf("fleet-core findings disagree with Truth:\n%s", d)
			}
			if len(core) == 0 {
				t.Error("no fleet-core findings")
			}
			// Nodes.
			rollouts := map[string]int{}
			for _, cn := range ft.Nodes {
				n := nodes[cn.NodeID]
				if n == nil {
					t.Errorf("node %s: not in the reference", cn.NodeID)
					continue
				}
				p := parts[cn.NodeID]
				phase, state, _, _ := m.lifecycle(p, n, w)
				gotN := CoreNode{NodeID: cn.NodeID, DomainID: cn.DomainID, Role: cn.Role, Phase: phase, State: state,
					Rollout: m.rollout(p, n, w), TransitionsFrom: cn.TransitionsFrom, Transitions: cn.Transitions}
				if n.hb != nil {
					gotN.Authority, gotN.SupplyChain = m.authority(n, w), n.supply
					gotN.ReportedVersion, gotN.ControllerID, gotN.RelayID, gotN.ArtifactID = n.hb.ReportedVersion, n.hb.ControllerID, n.hb.RelayID, n.hb.ArtifactID
				}
				if gotN.Rollout != "" {
					b := p.bundles[n.rec.Desired.PolicyBundleID]
					gotN.PolicyBundleID, gotN.TargetVersion = b.PolicyBundleID, b.TargetVersion
					rollouts[b.PolicyBundleID+"/"+n.rec.DomainID+"/"+gotN.Rollout]++
				}
				if !reflect.DeepEqual(gotN, cn) {
					t.Errorf("node %s:\n got  %+v\n want %+v", cn.NodeID, gotN, cn)
				}
				if cn.Transitions != nil {
					if err := MatchTransitions(cn, refRows(n.trans)); err != nil {
						t.Errorf("node %s (%s): %v", cn.NodeID, cn.Role, err)
					}
				}
			}
			wantRollouts := map[string]int{}
			for _, rc := range ft.Rollouts {
				for cat, c := range map[string]int{string(contract.RolloutAtTarget): rc.AtTarget, string(contract.RolloutUpdating): rc.Updating, string(contract.RolloutBehind): rc.Behind, string(contract.RolloutFailed): rc.Failed, string(contract.RolloutPending): rc.Pending} {
					if c > 0 {
						wantRollouts[rc.PolicyBundleID+"/"+rc.DomainID+"/"+cat] = c
					}
				}
			}
			if !maps.Equal(rollouts, wantRollouts) {
				t.Errorf("rollouts %v, truth %v", rollouts, wantRollouts)
			}
		})
	}
}

func refRows(ts []refTransition) []LifecycleRow {
	var out []LifecycleRow
	for i, t := range ts {
		r := LifecycleRow{Seq: i + 1, Phase: t.phase, State: t.state, Reason: t.reason, At: t.at, CorrelationID: t.corr}
		out = append(out, r)
	}
	return out
}
