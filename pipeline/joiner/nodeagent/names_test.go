package nodeagent

import (
	"testing"

	"github.com/driftline/driftline/pipeline/contract"
)

// TestNames pins each index to its contract name: the names come from
// the contract's lists by position.
func TestNames(t *testing.T) {
	for m, want := range map[Mode]contract.ConnectivityMode{
		Live: contract.ModeLive, Delayed: contract.ModeDelayed, EdgeCached: contract.ModeEdgeCached,
		Autonomous: contract.ModeAutonomous, Disconnected: contract.ModeDisconnected,
		Returning: contract.ModeReturning, Replaying: contract.ModeReplaying,
	} {
		if m.String() != string(want) {
			t.Errorf("mode %d is %q, want %q", m, m.String(), want)
		}
	}
	for g, want := range map[Gate]contract.Gate{
		GatePass: contract.GatePass, GateWarning: contract.GateWarning, GateRetry: contract.GateRetry,
		GateInvestigate: contract.GateInvestigate, GateBlockProduction: contract.GateBlockProduction,
	} {
		if g.String() != string(want) {
			t.Errorf("gate %d is %q, want %q", g, g.String(), want)
		}
	}
	for s, want := range map[State]contract.NodeAgentState{
		StateHealthy: contract.NodeStateHealthy, StateStale: contract.NodeStateStale,
		StateRecovering:             contract.NodeStateRecovering,
		StateOperatorActionRequired: contract.NodeStateOperatorActionRequired,
		StateSecurityActionRequired: contract.NodeStateSecurityActionRequired,
	} {
		if s.String() != string(want) {
			t.Errorf("state %d is %q, want %q", s, s.String(), want)
		}
	}
}
