package contract

import (
	"slices"
	"testing"
)

func TestPolicies(t *testing.T) {
	for _, c := range Classifications {
		p, ok := PolicyOf(c)
		if !ok || !slices.Contains(Severities, p.Severity) || p.Posture == "" || p.Runbook != "runbooks/"+string(c) {
			t.Errorf("PolicyOf(%s) = %+v, %v", c, p, ok)
		}
	}
	if _, ok := PolicyOf("no_such_classification"); ok {
		t.Error("an unknown classification has a policy")
	}
	// CONTRACT section 4, spelled out once more so that a slip in the
	// table shows.
	for c, want := range map[Classification]Policy{
		ClassOrphan:      {SeverityWarning, PostureQuarantine, "runbooks/orphan_provider_resource"},
		ClassMissing:     {SeverityCritical, PostureBlockAdmission, "runbooks/missing_provider_resource"},
		ClassStale:       {SeverityWarning, PostureRetry, "runbooks/stale_lifecycle_state"},
		ClassIdentity:    {SeverityCritical, PostureQuarantine, "runbooks/identity_mismatch"},
		ClassQuota:       {SeverityCritical, PostureBlockAdmission, "runbooks/quota_or_capacity_mismatch"},
		ClassRoute:       {SeverityCritical, PostureQuarantine, "runbooks/route_or_dns_mismatch"},
		ClassAuthority:   {SeverityCritical, PostureBlockAdmission, "runbooks/authority_conflict"},
		ClassSupplyChain: {SeverityCritical, PostureQuarantine, "runbooks/supply_chain_violation"},
		ClassBilling:     {SeverityCritical, PostureOperatorReview, "runbooks/billing_mismatch"},
	} {
		if got, _ := PolicyOf(c); got != want {
			t.Errorf("PolicyOf(%s) = %+v, want %+v", c, got, want)
		}
	}
}

// TestVocabularyLists checks that every list holds distinct values, and
// that the heartbeat enumerations are exactly what the validator accepts.
func TestVocabularyLists(t *testing.T) {
	for name, l := range map[string][]string{
		"Classifications": Strings(Classifications), "Severities": Strings(Severities),
		"BillingKinds": Strings(BillingKinds), "Gates": Strings(Gates), "NodeAgentStates": Strings(NodeAgentStates),
		"ConnectivityModes": Strings(ConnectivityModes), "Healths": Strings(Healths), "UpdatePaths": Strings(UpdatePaths),
		"TerminalStreamProbes": Strings(TerminalStreamProbes), "WorkloadImpacts": Strings(WorkloadImpacts),
	} {
		if len(l) == 0 || len(slices.Compact(slices.Sorted(slices.Values(l)))) != len(l) {
			t.Errorf("%s = %v: empty or repeated", name, l)
		}
	}
	// The heartbeat's enumerations are exactly what its validator accepts.
	accepts := func(name string, set func(*Heartbeat, string), want []string) {
		t.Helper()
		valid := func(v string) bool {
			hb := Heartbeat{NodeID: "n1", AgentVersion: "1.2.3", HostFingerprint: "h", Health: string(HealthOK)}
			set(&hb, v)
			return hb.validate() == nil
		}
		for _, v := range want {
			if !valid(v) {
				t.Errorf("the validator refuses %s %q", name, v)
			}
		}
		for _, v := range []string{"ok", "none ", "PASSED", "Unknown"} {
			if valid(v) {
				t.Errorf("the validator accepts %s %q", name, v)
			}
		}
	}
	accepts("health", func(hb *Heartbeat, v string) { hb.Health = v }, Strings(Healths))
	accepts("update_path", func(hb *Heartbeat, v string) { hb.UpdatePath = v }, Strings(UpdatePaths))
	accepts("terminal_stream_probe", func(hb *Heartbeat, v string) { hb.TerminalStreamProbe = v }, Strings(TerminalStreamProbes))
	accepts("workload_impact", func(hb *Heartbeat, v string) { hb.WorkloadImpact = v }, Strings(WorkloadImpacts))
}
