package fleet

import (
	"testing"

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
		"return": "ACTIVE/LIVE_OK", "return_quarantined": "QUARANTINED/SUPPLY_CHAIN", "revoked_artifact": "QUARANTINED/SUPPLY_CHAIN",
		"unknown_artifact": "QUARANTINED/SUPPLY_CHAIN", "digest_mismatch": "QUARANTINED/SUPPLY_CHAIN",
		"split_brain": "QUARANTINED/AUTHORITY_CONFLICT", "split_brain_resolved": "ACTIVE/LIVE_OK",
		"unlisted_controller": "QUARANTINED/AUTHORITY_CONFLICT", "behind": "ACTIVE/LIVE_OK", "updating": "UPDATING/UPDATING",
		"update_failed": "DEGRADED/UPDATE_FAILED", "update_completes": "ACTIVE/LIVE_OK", "canary_updating": "UPDATING/UPDATING",
		"provisioning": "PROVISIONING/PROVISIONING", "enrolled": "ENROLLED/ENROLLED",
		"decommissioning": "DECOMMISSIONING/DECOMMISSIONING", "retired": "RETIRED/RETIRED",
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
		if len(got) != 5 || got[0] != "LIVE_OK" || got[1] != "AUTONOMOUS" || got[2] != "RETURNING" || got[3] != "REPLAYING" || got[4] != "LIVE_OK" {
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
	if findings[string(contract.ClassAuthority)+"/open"] != 3 || findings[string(contract.ClassAuthority)+"/resolved"] != 1 ||
		findings[string(contract.ClassSupplyChain)+"/open"] != 6 {
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
