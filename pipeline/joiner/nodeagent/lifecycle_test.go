package nodeagent_test

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/joiner/nodeagent"
	"github.com/driftline/driftline/pipeline/stream/snap"
)

const digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
const digestB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

// fleetHarness is a tracker with every status row, lifecycle transition
// and sync-debt row it emitted.
type fleetHarness struct {
	*harness
	trans []nodeagent.Transition
	debt  []nodeagent.SyncDebtRow
}

func newFleetHarness(t *testing.T) *fleetHarness {
	h := &fleetHarness{harness: newHarness(t, nil)}
	h.tr.SetFleetOutput(nodeagent.FleetOutput{
		Transition: func(tr *nodeagent.Transition) { h.trans = append(h.trans, *tr) },
		SyncDebt:   func(r *nodeagent.SyncDebtRow) { h.debt = append(h.debt, *r) },
	})
	return h
}

func artifact(id, digest string, revoked bool) *contract.Artifact {
	return &contract.Artifact{ArtifactID: id, Version: "2.0", Digest: digest, Revoked: revoked}
}

func bundle(id, target string, deadline time.Time, domains ...string) *contract.PolicyBundle {
	return &contract.PolicyBundle{PolicyBundleID: id, TargetVersion: target, ArtifactID: "art-1", Domains: domains, Deadline: deadline}
}

func fleetRecord(v int64, edit func(*contract.PlatformRecord)) *contract.PlatformRecord {
	r := nodeRecord(v)
	r.Tags = []string{"tier:edge", "domain:eu"}
	r.Authority = contract.Authority{MasterOfRecord: "REGION", ControllerIDs: []string{"ctl-a", "ctl-b"}}
	r.Desired = contract.Desired{PolicyBundleID: "pb-1", TargetVersion: "2.0"}
	if edit != nil {
		edit(r)
	}
	return r
}

// lifecycle returns n1's phase/state.
func (h *fleetHarness) lifecycle() string {
	p, s, _ := h.tr.Lifecycle("n1")
	return string(p) + "/" + string(s)
}

// path returns the transitions since the last call as from->to (reason).
func (h *fleetHarness) path() []string {
	var out []string
	for _, t := range h.trans {
		out = append(out, fmt.Sprintf("%s/%s (%s)", t.ToPhase, t.ToState, t.Reason))
	}
	h.trans = nil
	return out
}

// TestLifecycleRules checks each rule of docs/fleet-core.md on its own,
// and that the first rule that matches wins.
func TestLifecycleRules(t *testing.T) {
	registry := func(h *fleetHarness) {
		h.tr.ApplyArtifact(artifact("art-1", digestA, false), at(-time.Hour), "")
		if err := h.tr.ApplyBundle(bundle("pb-1", "2.0", at(time.Hour)), at(-time.Hour), ""); err != nil {
			t.Fatal(err)
		}
	}
	updating := func(b *contract.Heartbeat) { b.ReportedVersion, b.UpdatePath = "1.9", "self_update" }
	cases := []struct {
		name      string
		record    func(*contract.PlatformRecord)
		beat      func(*contract.Heartbeat) // nil: no heartbeat
		operator  bool
		want      string
		rule      contract.LifecycleRule
		authority string
		supply    string
	}{
		{"retired", func(r *contract.PlatformRecord) { r.LifecycleIntent = "RETIRED" }, updating, true, "RETIRED/RETIRED", contract.RuleRetired, "", ""},
		{"deleted", func(r *contract.PlatformRecord) { r.Deleted = true }, nil, false, "RETIRED/RETIRED", contract.RuleRetired, "", ""},
		{"decommissioning", func(r *contract.PlatformRecord) { r.LifecycleIntent = "DECOMMISSIONING" }, nil, true, "DECOMMISSIONING/DECOMMISSIONING", contract.RuleDecommissioning, "", ""},
		{"operator quarantine", nil, func(b *contract.Heartbeat) { b.ArtifactID = "art-x" }, true, "QUARANTINED/OPERATOR_QUARANTINE", contract.RuleOperatorQuarantine, "", "artifact_unknown"},
		{"unknown artifact", nil, func(b *contract.Heartbeat) { b.ArtifactID = "art-x"; b.ControllerID = "ctl-z" }, false, "QUARANTINED/SUPPLY_CHAIN", contract.RuleSupplyChain, "controller_not_listed", "artifact_unknown"},
		{"digest mismatch", nil, func(b *contract.Heartbeat) { b.ArtifactID, b.ArtifactDigest = "art-1", digestB }, false, "QUARANTINED/SUPPLY_CHAIN", contract.RuleSupplyChain, "", "artifact_digest_mismatch"},
		{"controller not listed", nil, func(b *contract.Heartbeat) {
			b.ControllerID = "ctl-z"
			b.ArtifactID, b.ArtifactDigest = "art-1", digestA
		}, false, "QUARANTINED/AUTHORITY_CONFLICT", contract.RuleAuthorityConflict, "controller_not_listed", "ok"},
		{"gate blocked", nil, func(b *contract.Heartbeat) { b.CertIssuerFingerprint = "sha256:other"; b.ControllerID = "ctl-a" }, false, "QUARANTINED/GATE_BLOCKED", contract.RuleGateBlocked, "ok", ""},
		{"provisioning", func(r *contract.PlatformRecord) { r.LifecycleIntent = "PROVISIONING" }, nil, false, "PROVISIONING/PROVISIONING", contract.RuleProvisioning, "", ""},
		{"enrolled", func(r *contract.PlatformRecord) { r.LifecycleIntent = "ENROLLED" }, updating, false, "ENROLLED/ENROLLED", contract.RuleEnrolled, "", ""},
		{"update failed", nil, func(b *contract.Heartbeat) { updating(b); b.Health = "DEGRADED" }, false, "DEGRADED/UPDATE_FAILED", contract.RuleUpdateFailed, "", ""},
		{"health degraded", nil, func(b *contract.Heartbeat) { b.Health = "DEGRADED" }, false, "DEGRADED/HEALTH_DEGRADED", contract.RuleHealthDegraded, "", ""},
		// Health FAILED blocks production (docs/node-agent-model.md), so
		// rule 3 matches before rule 6.
		{"health failed blocks", nil, func(b *contract.Heartbeat) { b.Health = "FAILED" }, false, "QUARANTINED/GATE_BLOCKED", contract.RuleGateBlocked, "", ""},
		{"updating", nil, updating, false, "UPDATING/UPDATING", contract.RuleUpdating, "", ""},
		{"operator rebootstrap is no update", nil, func(b *contract.Heartbeat) { b.ReportedVersion, b.UpdatePath = "1.9", "operator_rebootstrap" }, false, "ACTIVE/LIVE_OK", contract.RuleConnectivity, "", ""},
		{"at target", nil, func(b *contract.Heartbeat) { b.ReportedVersion, b.UpdatePath = "2.0", "self_update" }, false, "ACTIVE/LIVE_OK", contract.RuleConnectivity, "", ""},
		{"edge cached", nil, func(b *contract.Heartbeat) { b.SecondsBehind = 120 }, false, "ACTIVE/EDGE_CACHED", contract.RuleConnectivity, "", ""},
		{"record only", nil, nil, false, "ACTIVE/LIVE_OK", contract.RuleConnectivity, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newFleetHarness(t)
			registry(h)
			h.tr.ApplyNodeRecord(fleetRecord(1, c.record), at(0), "corr-rec")
			if c.beat != nil {
				h.tr.ApplyHeartbeat(beat(c.beat), at(time.Second), "corr-hb")
			}
			if c.operator {
				h.tr.SetOperatorQuarantine("n1", true, at(2*time.Second), "corr-op")
			}
			if got := h.lifecycle(); got != c.want {
				t.Fatalf("lifecycle %s, want %s (transitions %v)", got, c.want, h.path())
			}
			last := h.trans[len(h.trans)-1]
			if last.Reason != c.rule || last.Seq != uint64(len(h.trans)) {
				t.Fatalf("last transition %+v, want reason %s and seq %d", last, c.rule, len(h.trans))
			}
			var s nodeagent.Status
			if c.beat != nil {
				if !h.tr.Lookup("n1", &s) {
					t.Fatal("no status")
				}
				if s.Authority != c.authority || s.SupplyChain != c.supply || s.Phase+"/"+s.LifecycleState != c.want ||
					s.Transitions != last.Seq || !s.PhaseSince.Equal(last.At) {
					t.Fatalf("status authority %q supply %q lifecycle %s/%s transitions %d since %v", s.Authority, s.SupplyChain,
						s.Phase, s.LifecycleState, s.Transitions, s.PhaseSince)
				}
				if strings.Join(s.Tags, ",") != "tier:edge,domain:eu" || s.MasterOfRecord != "REGION" || len(s.ControllerIDs) != 2 {
					t.Fatalf("status record fields %+v", s)
				}
				a, sc := h.tr.FleetVerdicts("n1")
				if a != (c.authority == "controller_not_listed" || c.authority == "split_brain") ||
					sc != (c.supply != "" && c.supply != "ok") || a != s.AuthorityConflict || sc != s.SupplyChainViolation {
					t.Fatalf("verdicts %v %v, status %v %v", a, sc, s.AuthorityConflict, s.SupplyChainViolation)
				}
			}
		})
	}
}

// TestReturnAndReplay walks seed 004's return-and-replay path: LIVE_OK,
// AUTONOMOUS in silence, RETURNING on the first heartbeat after it,
// REPLAYING while the backlog uploads, then LIVE_OK, or QUARANTINED when
// a trust rule holds at that point (here the returning node runs an
// artifact the registry does not know).
func TestReturnAndReplay(t *testing.T) {
	for _, end := range []string{"live", "quarantined"} {
		t.Run(end, func(t *testing.T) {
			h := newFleetHarness(t)
			h.tr.ApplyArtifact(artifact("art-1", digestA, false), at(-time.Hour), "")
			h.tr.ApplyNodeRecord(fleetRecord(1, nil), at(0), "c0")
			run := func(b *contract.Heartbeat) { b.ArtifactID, b.ArtifactDigest = "art-1", digestA }
			h.tr.ApplyHeartbeat(beat(run), at(time.Second), "c1")
			h.tr.Advance(at(9 * time.Minute))
			if end == "quarantined" {
				// The node comes back running an artifact the
				// registry does not know.
				run = func(b *contract.Heartbeat) { b.ArtifactID = "art-9" }
			}
			h.tr.ApplyHeartbeat(beat(run), at(10*time.Minute), "c2")
			h.tr.ApplyHeartbeat(beat(run, func(b *contract.Heartbeat) { b.ReplayRequired, b.BacklogMessages = true, 400 }), at(11*time.Minute), "c3")
			h.tr.ApplyHeartbeat(beat(run), at(12*time.Minute), "c4")
			// The watermark jumps past DELAYED to AUTONOMOUS: one
			// transition, at the AUTONOMOUS threshold it passed.
			want := []string{"ACTIVE/LIVE_OK (connectivity)", "ACTIVE/AUTONOMOUS (connectivity)",
				"ACTIVE/RETURNING (connectivity)", "ACTIVE/REPLAYING (connectivity)", "ACTIVE/LIVE_OK (connectivity)"}
			if end == "quarantined" {
				want = []string{"ACTIVE/LIVE_OK (connectivity)", "ACTIVE/AUTONOMOUS (connectivity)", "QUARANTINED/SUPPLY_CHAIN (supply_chain)"}
			}
			trans := append([]nodeagent.Transition(nil), h.trans...)
			if got := h.path(); !reflect.DeepEqual(got, want) {
				t.Fatalf("path %v\nwant %v", got, want)
			}
			// Watermark-made transitions carry the deadline passed and
			// no correlation id; event-made ones the event's.
			if tr := trans[1]; !tr.At.Equal(at(8*time.Minute+time.Second)) || tr.CorrelationID != "" || tr.Seq != 2 {
				t.Fatalf("AUTONOMOUS transition %+v", tr)
			}
			if tr := trans[2]; tr.CorrelationID != "c2" || tr.FromState != contract.StateAutonomous || !tr.At.Equal(at(10*time.Minute)) {
				t.Fatalf("transition after the silence %+v", tr)
			}
		})
	}
}

// TestSplitBrain: two listed controllers obeyed within the staleness
// window are a split brain until the watermark passes the older one's
// last heartbeat plus the window; a controller not listed is a conflict
// as long as the newest heartbeat obeys it.
func TestSplitBrain(t *testing.T) {
	h := newFleetHarness(t)
	h.tr.ApplyNodeRecord(fleetRecord(1, nil), at(0), "")
	h.tr.ApplyHeartbeat(beat(func(b *contract.Heartbeat) { b.ControllerID = "ctl-a" }), at(time.Minute), "")
	h.tr.ApplyHeartbeat(beat(func(b *contract.Heartbeat) { b.ControllerID = "ctl-b" }), at(2*time.Minute), "")
	var s nodeagent.Status
	h.tr.Lookup("n1", &s)
	if s.Authority != "split_brain" || h.lifecycle() != "QUARANTINED/AUTHORITY_CONFLICT" {
		t.Fatalf("authority %q lifecycle %s", s.Authority, h.lifecycle())
	}
	h.tr.ApplyHeartbeat(beat(func(b *contract.Heartbeat) { b.ControllerID = "ctl-b" }), at(5*time.Minute), "")
	h.tr.Advance(at(11*time.Minute - time.Millisecond))
	if h.lifecycle() != "QUARANTINED/AUTHORITY_CONFLICT" {
		t.Fatalf("resolved early: %s", h.lifecycle())
	}
	h.trans = nil
	h.tr.Advance(at(11 * time.Minute)) // ctl-a's last heartbeat (1m) + 10m
	h.tr.Lookup("n1", &s)
	if s.Authority != "ok" || len(h.trans) != 1 || h.trans[0].ToPhase != contract.PhaseActive || !h.trans[0].At.Equal(at(11*time.Minute)) {
		t.Fatalf("after the window: authority %q transitions %+v", s.Authority, h.trans)
	}
	if a, _ := h.tr.FleetVerdicts("n1"); a {
		t.Fatal("authority conflict still open")
	}
	// A controller the record does not list.
	h.tr.ApplyHeartbeat(beat(func(b *contract.Heartbeat) { b.ControllerID = "ctl-z" }), at(30*time.Minute), "")
	h.tr.Lookup("n1", &s)
	if s.Authority != "controller_not_listed" || s.ControllerID != "ctl-z" {
		t.Fatalf("authority %q", s.Authority)
	}
	// The newest heartbeat obeys no controller: not listed no longer
	// holds, and the evidence seen before makes it ok.
	h.tr.ApplyHeartbeat(beat(), at(45*time.Minute), "")
	h.tr.Lookup("n1", &s)
	if s.Authority != "ok" {
		t.Fatalf("authority %q after a heartbeat without controller", s.Authority)
	}
}

// TestSplitBrainEndsBeforeHeartbeat: a heartbeat later than a split
// brain's end (the older controller's last heartbeat plus the window)
// is judged at its own event time, though the watermark has not passed
// the end yet: its row clears the conflict, and no row at its event time
// still reports it.
func TestSplitBrainEndsBeforeHeartbeat(t *testing.T) {
	for _, tc := range []struct {
		name  string
		when  time.Duration // the heartbeat without a controller
		split bool
	}{{"after the end", 13 * time.Minute, false}, {"at the end", 11 * time.Minute, false}, {"before the end", 11*time.Minute - 1, true}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newFleetHarness(t)
			h.tr.ApplyNodeRecord(fleetRecord(1, nil), at(0), "")
			h.tr.ApplyHeartbeat(beat(func(b *contract.Heartbeat) { b.ControllerID = "ctl-a" }), at(time.Minute), "")
			h.tr.ApplyHeartbeat(beat(func(b *contract.Heartbeat) { b.ControllerID = "ctl-b" }), at(2*time.Minute), "")
			h.tr.Advance(at(90 * time.Second))
			h.take()
			h.trans = nil
			h.tr.ApplyHeartbeat(beat(), at(tc.when), "")
			if a, _ := h.tr.FleetVerdicts("n1"); a != tc.split {
				t.Fatalf("authority conflict %v, want %v", a, tc.split)
			}
			for _, r := range h.take() {
				if r.AuthorityConflict != tc.split {
					t.Errorf("row at %v: authority %s, want conflict %v", r.At.Sub(t0), r.Authority, tc.split)
				}
			}
			if !tc.split && (len(h.trans) != 1 || h.trans[0].ToPhase != contract.PhaseActive || !h.trans[0].At.Equal(at(tc.when))) {
				t.Fatalf("transitions %+v, want one to ACTIVE at the heartbeat", h.trans)
			}
		})
	}
}

// TestSplitBrainArrivalOrder: two controllers obeyed within the
// staleness window are a split brain (CONTRACT 8.3) whatever order their
// heartbeats arrive in: an older heartbeat's controller counts as its
// host does, without changing the newest heartbeat's evidence. Every
// arrival order of each set of heartbeats ends in the same authority and
// phase (the finer state may differ: whether a node is RETURNING depends
// on the heartbeat applied before the newest).
func TestSplitBrainArrivalOrder(t *testing.T) {
	type hb struct {
		ctl  string
		when time.Duration
	}
	for _, tc := range []struct {
		name      string
		beats     []hb
		authority string
	}{
		{"two controllers a minute apart", []hb{{"ctl-a", time.Minute}, {"ctl-b", 2 * time.Minute}}, "split_brain"},
		{"two controllers at once", []hb{{"ctl-a", time.Minute}, {"ctl-b", time.Minute}}, "split_brain"},
		{"the newest without a controller", []hb{{"ctl-a", time.Minute}, {"ctl-b", 5 * time.Minute}, {"", 6 * time.Minute}}, "split_brain"},
		{"a third, older than both", []hb{{"ctl-c", time.Minute}, {"ctl-a", 8 * time.Minute}, {"ctl-b", 15 * time.Minute}, {"ctl-a", 20 * time.Minute}}, "split_brain"},
		{"the window apart", []hb{{"ctl-a", time.Minute}, {"ctl-b", 11 * time.Minute}, {"ctl-b", 12 * time.Minute}}, "ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var first string
			permutations(len(tc.beats), func(order []int) {
				h := newFleetHarness(t)
				h.tr.ApplyNodeRecord(fleetRecord(1, nil), at(0), "")
				for _, i := range order {
					b := tc.beats[i]
					h.tr.ApplyHeartbeat(beat(func(hb *contract.Heartbeat) { hb.ControllerID = b.ctl }), at(b.when), "")
					h.tr.Advance(at(b.when - 30*time.Second))
				}
				var s nodeagent.Status
				h.tr.Lookup("n1", &s)
				phase, _, _ := h.tr.Lifecycle("n1")
				got := fmt.Sprintf("authority %s phase %s", s.Authority, phase)
				if s.Authority != tc.authority {
					t.Errorf("order %v: %s, want authority %s", order, got, tc.authority)
				}
				if first == "" {
					first = got
				} else if got != first {
					t.Errorf("order %v: %s; first order: %s", order, got, first)
				}
			})
		})
	}
}

// permutations calls fn with every order of 0..n-1 (fn must not keep
// the slice).
func permutations(n int, fn func([]int)) {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	var gen func(k int)
	gen = func(k int) {
		if k == n {
			fn(p)
			return
		}
		for i := k; i < n; i++ {
			p[k], p[i] = p[i], p[k]
			gen(k + 1)
			p[k], p[i] = p[i], p[k]
		}
	}
	gen(0)
}

// TestTombstoneRetiresUnownedNode: a tombstone makes a node RETIRED
// (docs/fleet-core.md) even when its record expected it decommissioned,
// so that the record did not own it; the node leaves its bundle's
// rollout and the sync debt. A second tombstone changes nothing.
func TestTombstoneRetiresUnownedNode(t *testing.T) {
	h := newFleetHarness(t)
	h.tr.ApplyArtifact(artifact("art-1", digestA, false), at(0), "")
	if err := h.tr.ApplyBundle(bundle("pb-1", "2.0", at(time.Hour)), at(0), ""); err != nil {
		t.Fatal(err)
	}
	h.tr.ApplyNodeRecord(fleetRecord(1, func(r *contract.PlatformRecord) { r.ExpectedState = "decommissioned" }), at(0), "")
	h.tr.ApplyHeartbeat(beat(func(b *contract.Heartbeat) { b.SecondsBehind, b.BacklogMessages = 90, 5 }), at(time.Minute), "")
	h.tr.Advance(at(time.Minute))
	if got, want := rollouts(h.tr), []string{"pb-1/dom-1 nodes 1 at_target 0 failed 0 behind 0 updating 0 pending 1"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("before the tombstone: rollouts %v, want %v", got, want)
	}
	h.take()
	h.trans = nil
	h.tr.ApplyTombstone(contract.ProviderMAAS, "n1", at(2*time.Minute))
	if got := h.lifecycle(); got != "RETIRED/RETIRED" {
		t.Fatalf("after a tombstone: lifecycle %s, want RETIRED/RETIRED", got)
	}
	rows := h.take()
	if len(rows) != 1 || rows[0].Phase != "RETIRED" || rows[0].LifecycleIntent != "RETIRED" || rows[0].Rollout != "" ||
		!rows[0].At.Equal(at(2*time.Minute)) || len(h.trans) != 1 || !h.trans[0].At.Equal(at(2*time.Minute)) {
		t.Fatalf("rows %+v transitions %+v, want one of each, retired, at 2m", rows, h.trans)
	}
	if got, want := rollouts(h.tr), []string{"pb-1/dom-1 nodes 0 at_target 0 failed 0 behind 0 updating 0 pending 0"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after the tombstone: rollouts %v, want %v", got, want)
	}
	h.debt = nil
	h.tr.Advance(at(3 * time.Minute))
	if len(h.debt) != 0 {
		t.Fatalf("a retired node in the sync debt: %+v", h.debt)
	}
	h.tr.ApplyTombstone(contract.ProviderMAAS, "n1", at(4*time.Minute))
	if rows := h.take(); len(rows) != 0 || len(h.trans) != 1 {
		t.Fatalf("a second tombstone: rows %+v transitions %+v", rows, h.trans)
	}
	// A node whose record the tracker never applied stays as it is, as it
	// would had the tombstone come before its heartbeat.
	h.tr.ApplyHeartbeat(beat(func(b *contract.Heartbeat) { b.NodeID, b.HostFingerprint = "n2", "h2" }), at(5*time.Minute), "")
	h.tr.ApplyTombstone(contract.ProviderMAAS, "n2", at(6*time.Minute))
	if p, _, _ := h.tr.Lifecycle("n2"); p != contract.PhaseActive {
		t.Fatalf("a node without a record: phase %s after a tombstone", p)
	}
}

// TestRevocationReevaluates: an artifact revoked (or re-digested) later
// re-evaluates the nodes running it at once, and its reinstatement
// resolves them.
func TestRevocationReevaluates(t *testing.T) {
	h := newFleetHarness(t)
	h.tr.ApplyArtifact(artifact("art-1", digestA, false), at(0), "")
	for i := range 3 {
		r := fleetRecord(1, nil)
		r.ProviderID = fmt.Sprintf("n%d", i+1)
		h.tr.ApplyNodeRecord(r, at(time.Second), "")
		h.tr.ApplyHeartbeat(beat(func(b *contract.Heartbeat) {
			b.NodeID, b.HostFingerprint = r.ProviderID, "h"+r.ProviderID
			if i < 2 {
				b.ArtifactID = "art-1"
			}
		}), at(2*time.Second), "")
	}
	h.trans = nil
	h.tr.ApplyArtifact(artifact("art-1", digestA, true), at(time.Minute), "rev")
	if len(h.trans) != 2 || h.trans[0].NodeID != "n1" || h.trans[1].NodeID != "n2" || h.trans[0].ToState != contract.StateSupplyChain ||
		h.trans[0].CorrelationID != "rev" {
		t.Fatalf("revocation transitions %+v", h.trans)
	}
	// An older registry entry arriving late changes nothing.
	h.trans = nil
	h.tr.ApplyArtifact(artifact("art-1", digestA, false), at(30*time.Second), "")
	if len(h.trans) != 0 {
		t.Fatalf("a late artifact changed %+v", h.trans)
	}
	h.tr.ApplyArtifact(artifact("art-1", digestB, false), at(2*time.Minute), "")
	var s nodeagent.Status
	h.tr.Lookup("n1", &s)
	if s.SupplyChain != "ok" || h.lifecycle() != "ACTIVE/LIVE_OK" {
		t.Fatalf("reinstated with a new digest, reported none: %q %s", s.SupplyChain, h.lifecycle())
	}
}

// TestRegistryRefusals: a bundle naming an unknown artifact and a
// heartbeat naming an unknown bundle are refused with their reasons.
func TestRegistryRefusals(t *testing.T) {
	h := newFleetHarness(t)
	err := h.tr.ApplyBundle(bundle("pb-1", "2.0", at(time.Hour)), at(0), "")
	if err == nil || err.Reason != contract.ReasonUnknownArtifact || err.Field != "payload.artifact_id" {
		t.Fatalf("bundle of an unknown artifact: %v", err)
	}
	hb := beat(func(b *contract.Heartbeat) { b.PolicyBundleID = "pb-1" })
	if err := h.tr.CheckHeartbeat(hb); err == nil || err.Reason != contract.ReasonUnknownPolicyBundle || err.Field != "payload.policy_bundle_id" {
		t.Fatalf("heartbeat of an unknown bundle: %v", err)
	}
	h.tr.ApplyArtifact(artifact("art-1", digestA, false), at(0), "")
	if err := h.tr.ApplyBundle(bundle("pb-1", "2.0", at(time.Hour)), at(0), ""); err != nil {
		t.Fatal(err)
	}
	if err := h.tr.CheckHeartbeat(hb); err != nil {
		t.Fatal(err)
	}
	if err := h.tr.CheckHeartbeat(beat()); err != nil {
		t.Fatal(err)
	}
}

// TestRolloutCategories counts nodes per (bundle, domain) in each
// category, moves pending nodes to behind when the watermark reaches the
// deadline, and leaves out nodes of domains the bundle does not target.
func TestRolloutCategories(t *testing.T) {
	h := newFleetHarness(t)
	h.tr.ApplyArtifact(artifact("art-1", digestA, false), at(0), "")
	if err := h.tr.ApplyBundle(bundle("pb-1", "2.0", at(20*time.Minute), "dom-1", "dom-2"), at(0), ""); err != nil {
		t.Fatal(err)
	}
	nodes := []struct {
		id, domain string
		beat       func(*contract.Heartbeat)
		want       string
	}{
		{"a", "dom-1", func(b *contract.Heartbeat) { b.ReportedVersion = "2.0" }, "at_target"},
		{"b", "dom-1", func(b *contract.Heartbeat) {
			b.ReportedVersion, b.UpdatePath, b.Health = "1.9", "self_update", "DEGRADED"
		}, "failed"},
		{"c", "dom-1", func(b *contract.Heartbeat) { b.ReportedVersion, b.UpdatePath = "1.9", "recovery_enrollment" }, "updating"},
		{"d", "dom-1", func(b *contract.Heartbeat) { b.ReportedVersion = "1.9" }, "pending"},
		{"e", "dom-2", nil, "pending"},
		{"f", "dom-3", func(b *contract.Heartbeat) { b.ReportedVersion = "2.0" }, ""},
	}
	for _, n := range nodes {
		r := fleetRecord(1, nil)
		r.ProviderID, r.DomainID = n.id, n.domain
		h.tr.ApplyNodeRecord(r, at(time.Minute), "")
		h.tr.ApplyHeartbeat(beat(n.beat, func(b *contract.Heartbeat) { b.NodeID, b.HostFingerprint = n.id, "h"+n.id }), at(2*time.Minute), "")
	}
	for _, n := range nodes {
		var s nodeagent.Status
		if !h.tr.Lookup(n.id, &s) || s.Rollout != n.want || (n.want != "" && s.TargetVersion != "2.0") {
			t.Fatalf("node %s rollout %q target %q, want %q", n.id, s.Rollout, s.TargetVersion, n.want)
		}
	}
	rows := rollouts(h.tr)
	want := []string{"pb-1/dom-1 nodes 4 at_target 1 failed 1 behind 0 updating 1 pending 1",
		"pb-1/dom-2 nodes 1 at_target 0 failed 0 behind 0 updating 0 pending 1"}
	if !reflect.DeepEqual(rows, want) {
		t.Fatalf("rollouts %v\nwant %v", rows, want)
	}
	if rows := rollouts(h.tr); len(rows) != 0 {
		t.Fatalf("unchanged counts written again: %v", rows)
	}
	h.tr.Advance(at(20 * time.Minute))
	rows = rollouts(h.tr)
	want = []string{"pb-1/dom-1 nodes 4 at_target 1 failed 1 behind 2 updating 0 pending 0",
		"pb-1/dom-2 nodes 1 at_target 0 failed 0 behind 1 updating 0 pending 0"}
	if !reflect.DeepEqual(rows, want) {
		t.Fatalf("after the deadline %v\nwant %v", rows, want)
	}
}

// TestRolloutBehindAtHeartbeat: a heartbeat past a bundle's deadline
// from a node not at its target is judged at its own event time, though
// the watermark has not reached the deadline yet: the node is behind on
// the heartbeat's row, and the watermark reaching the deadline changes
// nothing more.
func TestRolloutBehindAtHeartbeat(t *testing.T) {
	h := newFleetHarness(t)
	h.tr.ApplyArtifact(artifact("art-1", digestA, false), at(0), "")
	if err := h.tr.ApplyBundle(bundle("pb-1", "2.0", at(20*time.Minute)), at(0), ""); err != nil {
		t.Fatal(err)
	}
	h.tr.ApplyNodeRecord(fleetRecord(1, nil), at(time.Minute), "")
	h.tr.ApplyHeartbeat(beat(func(b *contract.Heartbeat) { b.ReportedVersion = "1.9" }), at(19*time.Minute), "")
	h.tr.Advance(at(18*time.Minute + 30*time.Second))
	rollouts(h.tr)
	h.take()
	h.tr.ApplyHeartbeat(beat(func(b *contract.Heartbeat) { b.ReportedVersion, b.Health = "1.9", "DEGRADED" }), at(21*time.Minute), "")
	rows := h.take()
	if len(rows) != 1 || rows[0].Rollout != "behind" || !rows[0].At.Equal(at(21*time.Minute)) {
		t.Fatalf("rows %+v, want one behind at 21m", rows)
	}
	if got, want := rollouts(h.tr), []string{"pb-1/dom-1 nodes 1 at_target 0 failed 0 behind 1 updating 0 pending 0"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("rollouts %v, want %v", got, want)
	}
	h.tr.Advance(at(20*time.Minute + 30*time.Second))
	if rows := h.take(); len(rows) != 0 {
		t.Fatalf("rows when the watermark reached the deadline: %+v", rows)
	}
	if got := rollouts(h.tr); len(got) != 0 {
		t.Fatalf("rollouts written again: %v", got)
	}
}

func rollouts(tr *nodeagent.Tracker) []string {
	var out []string
	tr.Rollouts(func(r *nodeagent.RolloutRow) {
		out = append(out, fmt.Sprintf("%s/%s nodes %d at_target %d failed %d behind %d updating %d pending %d",
			r.PolicyBundleID, r.DomainID, r.Nodes, r.AtTarget, r.Failed, r.Behind, r.Updating, r.Pending))
	})
	return out
}

// TestSyncDebtMinutes writes, per crossed minute, the minute that ended:
// per (domain, relay) the nodes heard within the staleness window, their
// worst seconds_behind and summed backlog; retired and silent nodes are
// left out.
func TestSyncDebtMinutes(t *testing.T) {
	h := newFleetHarness(t)
	add := func(id, relay string, behind, backlog int64, beatAt time.Duration, edit func(*contract.PlatformRecord)) {
		r := fleetRecord(1, edit)
		r.ProviderID = id
		h.tr.ApplyNodeRecord(r, at(0), "")
		h.tr.ApplyHeartbeat(beat(func(b *contract.Heartbeat) {
			b.NodeID, b.HostFingerprint, b.RelayID, b.SecondsBehind, b.BacklogMessages = id, "h"+id, relay, behind, backlog
		}), at(beatAt), "")
	}
	h.tr.Advance(at(10 * time.Second))
	add("a", "relay-1", 30, 100, 20*time.Second, nil)
	add("b", "relay-1", 90, 5, 21*time.Second, nil)
	add("c", "", 0, 0, 22*time.Second, nil)
	add("d", "relay-1", 500, 500, 23*time.Second, func(r *contract.PlatformRecord) { r.LifecycleIntent = "RETIRED" })
	if len(h.debt) != 0 {
		t.Fatalf("rows before a minute ended: %+v", h.debt)
	}
	h.tr.Advance(at(61 * time.Second))
	want := []nodeagent.SyncDebtRow{
		{DomainID: "dom-1", RelayID: "", Minute: at(0), Nodes: 1},
		{DomainID: "dom-1", RelayID: "relay-1", Minute: at(0), Nodes: 2, MaxSecondsBehind: 90, BacklogMessages: 105},
	}
	if !reflect.DeepEqual(h.debt, want) {
		t.Fatalf("sync debt %+v\nwant %+v", h.debt, want)
	}
	// A jump over several minutes writes the minute that just ended; a
	// node silent for the staleness window no longer counts.
	h.debt = nil
	h.tr.ApplyHeartbeat(beat(func(b *contract.Heartbeat) { b.NodeID, b.HostFingerprint, b.RelayID = "c", "hc", "relay-2" }), at(5*time.Minute), "")
	h.tr.Advance(at(12*time.Minute + 30*time.Second))
	want = []nodeagent.SyncDebtRow{{DomainID: "dom-1", RelayID: "relay-2", Minute: at(11 * time.Minute), Nodes: 1}}
	if !reflect.DeepEqual(h.debt, want) {
		t.Fatalf("sync debt %+v\nwant %+v", h.debt, want)
	}
}

// TestSyncDebtBacklogSaturates: backlog_messages is any non-negative
// int64; a minute's sum saturates at the largest one rather than wrap
// negative.
func TestSyncDebtBacklogSaturates(t *testing.T) {
	h := newFleetHarness(t)
	h.tr.Advance(at(0))
	for _, id := range []string{"a", "b", "c"} {
		r := fleetRecord(1, nil)
		r.ProviderID = id
		h.tr.ApplyNodeRecord(r, at(0), "")
		h.tr.ApplyHeartbeat(beat(func(b *contract.Heartbeat) {
			b.NodeID, b.HostFingerprint, b.BacklogMessages = id, "h"+id, math.MaxInt64/2+1
		}), at(10*time.Second), "")
	}
	h.tr.Advance(at(time.Minute))
	if len(h.debt) != 1 || h.debt[0].Nodes != 3 || h.debt[0].BacklogMessages != math.MaxInt64 {
		t.Fatalf("sync debt %+v, want 3 nodes with backlog %d", h.debt, int64(math.MaxInt64))
	}
}

// fleetEvents is a stream touching every part of the fleet core, as
// closures over a tracker, each at its own event time.
func fleetEvents() []func(tr *nodeagent.Tracker) {
	var evs []func(tr *nodeagent.Tracker)
	evs = append(evs,
		func(tr *nodeagent.Tracker) { tr.ApplyArtifact(artifact("art-1", digestA, false), at(0), "a1") },
		func(tr *nodeagent.Tracker) {
			_ = tr.ApplyBundle(bundle("pb-1", "2.0", at(30*time.Minute)), at(0), "b1")
		},
	)
	for i := range 12 {
		id := fmt.Sprintf("n%02d", i)
		evs = append(evs, func(tr *nodeagent.Tracker) {
			r := fleetRecord(1, func(r *contract.PlatformRecord) {
				r.ProviderID, r.DomainID = id, fmt.Sprintf("dom-%d", i%3)
				r.LifecycleIntent = []string{"", "ACTIVE", "PROVISIONING", "ENROLLED", "DECOMMISSIONING", ""}[i%6]
			})
			tr.ApplyNodeRecord(r, at(time.Duration(i)*time.Second), "r"+id)
			tr.RecordEvent(id, 0, int64(i))
		})
	}
	for step := range 30 {
		for i := range 12 {
			if (i+step)%7 == 0 {
				continue // some silence
			}
			id := fmt.Sprintf("n%02d", i)
			when := at(time.Duration(step)*time.Minute + time.Duration(i)*time.Second + 15*time.Second)
			evs = append(evs, func(tr *nodeagent.Tracker) {
				tr.ApplyHeartbeat(beat(func(b *contract.Heartbeat) {
					b.NodeID, b.HostFingerprint = id, "h"+id
					b.ReportedVersion = []string{"1.9", "2.0"}[min(step/10, 1)]
					b.UpdatePath = []string{"self_update", "none"}[i%2]
					b.ArtifactID, b.ArtifactDigest = "art-1", digestA
					b.ControllerID = []string{"ctl-a", "ctl-b", "ctl-z"}[(i+step/5)%3]
					b.RelayID = []string{"", "relay-1"}[i%2]
					b.SecondsBehind, b.BacklogMessages = int64(step*i), int64(i*100)
					b.ReplayRequired = step%9 == 1
				}), when, fmt.Sprintf("h%s-%d", id, step))
				tr.RecordEvent(id, 2, int64(1000+step*12+i))
				tr.Advance(when.Add(-30 * time.Second))
			})
		}
		if step == 12 {
			evs = append(evs, func(tr *nodeagent.Tracker) {
				tr.ApplyArtifact(artifact("art-1", digestA, true), at(12*time.Minute+50*time.Second), "rev")
			})
		}
		if step == 14 {
			evs = append(evs, func(tr *nodeagent.Tracker) { tr.SetOperatorQuarantine("n03", true, at(14*time.Minute), "op") })
		}
		if step == 16 {
			evs = append(evs, func(tr *nodeagent.Tracker) {
				tr.ApplyArtifact(artifact("art-1", digestA, false), at(16*time.Minute+50*time.Second), "unrev")
			})
		}
		if step == 20 {
			evs = append(evs, func(tr *nodeagent.Tracker) { tr.SetOperatorQuarantine("n03", false, at(20*time.Minute), "op2") })
		}
		if step == 22 {
			// A late heartbeat of n05 from another host obeying another
			// controller (a clone and a split brain found from an older
			// heartbeat), and n06's record expecting it decommissioned.
			evs = append(evs, func(tr *nodeagent.Tracker) {
				tr.ApplyHeartbeat(beat(func(b *contract.Heartbeat) {
					b.NodeID, b.HostFingerprint, b.ControllerID = "n05", "hn05-clone", "ctl-q"
				}), at(21*time.Minute), "late")
			}, func(tr *nodeagent.Tracker) {
				tr.ApplyNodeRecord(fleetRecord(2, func(r *contract.PlatformRecord) {
					r.ProviderID, r.DomainID, r.ExpectedState = "n06", "dom-0", "decommissioned"
				}), at(22*time.Minute+50*time.Second), "r2n06")
			})
		}
		if step == 24 {
			evs = append(evs, func(tr *nodeagent.Tracker) {
				tr.ApplyTombstone(contract.ProviderMAAS, "n06", at(24*time.Minute+50*time.Second))
			})
		}
	}
	return evs
}

// fleetRun records everything a tracker emits, with the rollout rows
// gathered after every event.
type fleetRun struct {
	rows  []nodeagent.Status
	trans []nodeagent.Transition
	debt  []nodeagent.SyncDebtRow
	roll  []string
}

func newFleetTracker(run *fleetRun) *nodeagent.Tracker {
	tr := nodeagent.New(nodeagent.DefaultOptions(), func(s *nodeagent.Status, _ *uint32) { run.rows = append(run.rows, *s) })
	tr.SetCoordinates([]string{"platform.records", "provider.observations", "nodeagent.telemetry"}, 3)
	tr.SetFleetOutput(nodeagent.FleetOutput{
		Transition: func(t *nodeagent.Transition) { run.trans = append(run.trans, *t) },
		SyncDebt:   func(r *nodeagent.SyncDebtRow) { run.debt = append(run.debt, *r) },
	})
	return tr
}

// TestFleetSnapshotReplay restores the tracker from a snapshot taken
// between any two events (cuts every few events) and replays the rest:
// the same status rows, transitions (seq numbering included), rollout
// rows and sync-debt rows as without the cut. A snapshot of the restored
// tracker is byte-identical to the original's.
func TestFleetSnapshotReplay(t *testing.T) {
	evs := fleetEvents()
	var whole fleetRun
	tr := newFleetTracker(&whole)
	for _, ev := range evs {
		ev(tr)
		whole.roll = append(whole.roll, rollouts(tr)...)
	}
	if len(whole.trans) < 40 || len(whole.debt) < 20 || len(whole.roll) < 10 {
		t.Fatalf("the stream exercises too little: %d transitions, %d sync-debt rows, %d rollout rows", len(whole.trans), len(whole.debt), len(whole.roll))
	}
	reasons := map[contract.LifecycleRule]bool{}
	for _, tr := range whole.trans {
		reasons[tr.Reason] = true
	}
	for _, r := range []contract.LifecycleRule{contract.RuleProvisioning, contract.RuleEnrolled, contract.RuleDecommissioning,
		contract.RuleUpdating, contract.RuleSupplyChain, contract.RuleAuthorityConflict, contract.RuleOperatorQuarantine, contract.RuleConnectivity,
		contract.RuleRetired} {
		if !reasons[r] {
			t.Errorf("the stream has no %s transition", r)
		}
	}
	for cut := 0; cut < len(evs); cut += 37 {
		var before, after fleetRun
		a := newFleetTracker(&before)
		for _, ev := range evs[:cut] {
			ev(a)
			before.roll = append(before.roll, rollouts(a)...)
		}
		var w snap.Writer
		a.AppendSnapshot(&w)
		b := newFleetTracker(&after)
		if err := b.LoadSnapshot(snap.NewReader(w.B)); err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		var w2 snap.Writer
		b.AppendSnapshot(&w2)
		if string(w.B) != string(w2.B) {
			t.Fatalf("cut %d: the restored tracker's snapshot differs", cut)
		}
		after.rows, after.trans, after.debt, after.roll = before.rows, before.trans, before.debt, before.roll
		for _, ev := range evs[cut:] {
			ev(b)
			after.roll = append(after.roll, rollouts(b)...)
		}
		if !reflect.DeepEqual(after.trans, whole.trans) {
			t.Fatalf("cut %d: transitions differ (%d against %d)", cut, len(after.trans), len(whole.trans))
		}
		if !reflect.DeepEqual(after.debt, whole.debt) || !reflect.DeepEqual(after.roll, whole.roll) {
			t.Fatalf("cut %d: sync-debt or rollout rows differ", cut)
		}
		if !reflect.DeepEqual(after.rows, whole.rows) {
			t.Fatalf("cut %d: status rows differ", cut)
		}
	}
	// The ring holds the last events, newest first, as coordinates.
	var s nodeagent.Status
	if !tr.Lookup("n01", &s) || len(s.Recent.Strings()) != nodeagent.RecentEvents || !strings.HasPrefix(s.Recent.Strings()[0], "nodeagent.telemetry/3/") {
		t.Fatalf("recent events %v", s.Recent.Strings())
	}
}
