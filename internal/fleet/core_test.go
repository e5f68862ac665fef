package fleet

import (
	"slices"
	"testing"
	"time"

	"github.com/driftline/driftline/pipeline/contract"
)

// TestFleetCore checks that the default fleet exercises every path of the
// fleet core the package documentation promises.
func TestFleetCore(t *testing.T) {
	g := newGen(t, DefaultConfig())
	ft := g.Truth().Fleet
	for r := RoleNone + 1; r < numRoles; r++ {
		if ft.Roles[r.String()] != roleCount[r] {
			t.Errorf("role %s: %d nodes, want %d", r, ft.Roles[r.String()], roleCount[r])
		}
	}
	final := map[string]map[string]int{} // role -> phase/state -> nodes
	for _, n := range ft.Nodes {
		if n.Role == "" {
			continue
		}
		if final[n.Role] == nil {
			final[n.Role] = map[string]int{}
		}
		final[n.Role][n.Phase+"/"+n.State]++
		if len(n.Transitions) == 0 {
			t.Errorf("scripted node %s (%s) without transitions", n.NodeID, n.Role)
		}
	}
	want := map[string]string{
		"return": ps(contract.PhaseActive, contract.StateLiveOK), "return_quarantined": ps(contract.PhaseQuarantined, contract.StateSupplyChain), "revoked_artifact": ps(contract.PhaseQuarantined, contract.StateSupplyChain),
		"unknown_artifact": ps(contract.PhaseQuarantined, contract.StateSupplyChain), "digest_mismatch": ps(contract.PhaseQuarantined, contract.StateSupplyChain),
		"split_brain": ps(contract.PhaseQuarantined, contract.StateAuthorityConflict), "split_brain_resolved": ps(contract.PhaseActive, contract.StateLiveOK),
		"unlisted_controller": ps(contract.PhaseQuarantined, contract.StateAuthorityConflict), "behind": ps(contract.PhaseActive, contract.StateLiveOK), "updating": ps(contract.PhaseUpdating, contract.StateUpdating),
		"update_failed": ps(contract.PhaseDegraded, contract.StateUpdateFailed), "update_completes": ps(contract.PhaseActive, contract.StateLiveOK), "canary_updating": ps(contract.PhaseUpdating, contract.StateUpdating),
		"provisioning": ps(contract.PhaseProvisioning, contract.StateProvisioning), "enrolled": ps(contract.PhaseEnrolled, contract.StateEnrolled),
		"decommissioning": ps(contract.PhaseDecommissioning, contract.StateDecommissioning), "retired": ps(contract.PhaseRetired, contract.StateRetired),
	}
	for role, ps := range want {
		if len(final[role]) != 1 || final[role][ps] == 0 {
			t.Errorf("role %s ends %v, want all %s", role, final[role], ps)
		}
	}
	// The return path walks every state of seed 004's return and replay.
	for _, n := range ft.Nodes {
		if n.Role != "return" {
			continue
		}
		var got []string
		for _, tr := range n.Transitions {
			got = append(got, tr.State)
		}
		path := []string{string(contract.StateLiveOK), string(contract.StateAutonomous), string(contract.StateReturning),
			string(contract.StateReplaying), string(contract.StateLiveOK)}
		if !slices.Equal(got, path) {
			t.Errorf("return path of %s: %v", n.NodeID, got)
		}
	}
	var cats RolloutCount
	for _, rc := range ft.Rollouts {
		cats.AtTarget += rc.AtTarget
		cats.Updating += rc.Updating
		cats.Behind += rc.Behind
		cats.Failed += rc.Failed
	}
	if cats.AtTarget == 0 || cats.Updating == 0 || cats.Behind == 0 || cats.Failed == 0 {
		t.Errorf("rollout categories %+v: every one should occur", cats)
	}
	findings := map[string]int{}
	for _, f := range g.Truth().Findings {
		if f.FromFleetCore() {
			findings[f.Classification+"/"+f.Status]++
		}
	}
	if findings[string(contract.ClassAuthority)+"/"+string(contract.StatusOpen)] != 3 || findings[string(contract.ClassAuthority)+"/"+string(contract.StatusResolved)] != 1 ||
		findings[string(contract.ClassSupplyChain)+"/"+string(contract.StatusOpen)] != 6 {
		t.Errorf("fleet-core findings %v", findings)
	}
	relayed := 0
	for _, r := range ft.Relays {
		if r.RelayID != "" {
			relayed += r.Nodes
		}
	}
	if relayed == 0 || len(ft.Artifacts) != numArtifacts || !ft.Artifacts[artRevoked].Revoked || len(ft.Bundles) != numBundles {
		t.Errorf("relays %v, registry %v %v", ft.Relays, ft.Artifacts, ft.Bundles)
	}
}

// TestFleetCoreOff: without the fleet core, no fleet-core event, field or
// finding is generated.
func TestFleetCoreOff(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Core.Enabled = false
	g := newGen(t, cfg)
	for _, d := range decodeAll(t, collect(t, g)) {
		switch p := d.payload.(type) {
		case *contract.Artifact, *contract.PolicyBundle:
			t.Fatalf("registry event without the fleet core: %s", d.Line)
		case *contract.Heartbeat:
			if p.ControllerID != "" || p.ArtifactID != "" || p.ReportedVersion != "" {
				t.Fatalf("fleet-core heartbeat fields: %s", d.Line)
			}
		case *contract.PlatformRecord:
			if p.NodeKind != "" || len(p.Authority.ControllerIDs) > 0 || p.Desired.PolicyBundleID != "" {
				t.Fatalf("fleet-core record fields: %s", d.Line)
			}
		}
	}
	truth := g.Truth()
	for _, f := range truth.Findings {
		if f.FromFleetCore() {
			t.Fatalf("fleet-core finding without the fleet core: %+v", f)
		}
	}
	if len(truth.Fleet.Rollouts)+len(truth.Fleet.Relays)+len(truth.Fleet.Artifacts) != 0 {
		t.Fatalf("fleet truth without the fleet core: %+v", truth.Fleet)
	}
}

func ps(p contract.Phase, s contract.LifecycleState) string { return string(p) + "/" + string(s) }

// TestMatchTransitions: the rows in force at TransitionsFrom and after it
// must be the predicted ones; times and correlation ids count where the
// truth has them.
func TestMatchTransitions(t *testing.T) {
	at := DefaultStart
	cn := CoreNode{TransitionsFrom: at.Add(time.Second), Transitions: []Transition{
		{Phase: "A", State: "a", Reason: "r1", At: at.Add(time.Second)},
		{Phase: "B", State: "b", Reason: "r2"}, // the watermark's
		{Phase: "A", State: "a", Reason: "r1", At: at.Add(3 * time.Second), CorrelationID: "c"},
	}}
	rows := []LifecycleRow{
		{Seq: 1, Phase: "A", State: "a", Reason: "r0", At: at}, // in force before, another cause
		{Seq: 2, Phase: "B", State: "b", Reason: "r2", At: at.Add(2 * time.Second)},
		{Seq: 3, Phase: "A", State: "a", Reason: "r1", At: at.Add(3 * time.Second), CorrelationID: "c"},
	}
	if err := MatchTransitions(cn, rows); err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func([]LifecycleRow){
		"wrong state in force": func(r []LifecycleRow) { r[0].State = "x" },
		"wrong reason":         func(r []LifecycleRow) { r[1].Reason = "x" },
		"wrong time":           func(r []LifecycleRow) { r[2].At = r[2].At.Add(time.Second) },
		"wrong correlation":    func(r []LifecycleRow) { r[2].CorrelationID = "" },
		"nothing in force":     func(r []LifecycleRow) { r[0].At = at.Add(time.Hour) },
	} {
		r := slices.Clone(rows)
		edit(r)
		if MatchTransitions(cn, r) == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if MatchTransitions(cn, rows[:2]) == nil || MatchTransitions(cn, append(slices.Clone(rows), rows[2])) == nil {
		t.Error("a missing or an extra transition accepted")
	}
}

// TestTransitionsNotPredictedWhenSparse: 9-minute rounds put silence
// deadlines where the partitioning decides them; no transitions are
// predicted then, final states still are.
func TestTransitionsNotPredictedWhenSparse(t *testing.T) {
	cfg := DefaultConfig()
	cfg.RoundInterval = 9 * time.Minute
	ft := newGen(t, cfg).Truth().Fleet
	if len(ft.Nodes) == 0 {
		t.Fatal("no nodes")
	}
	for _, n := range ft.Nodes {
		if n.Transitions != nil {
			t.Fatalf("node %s (%s): transitions predicted on a sparse timeline", n.NodeID, n.Role)
		}
	}
}
