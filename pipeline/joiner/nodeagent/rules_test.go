package nodeagent

import (
	"math"
	"testing"
	"time"

	"github.com/driftline/driftline/pipeline/contract"
)

// healthy is the evidence of a node that passes every rule.
func healthy() evidence {
	return evidence{owned: true, health: symHealthOK, impact: symImpactNoneObserved, probe: symProbePassed, path: symPathNone, mode: Live}
}

// TestGateRules has one case per row of the gate table of
// docs/node-agent-model.md, plus the precedence between neighbouring rows.
func TestGateRules(t *testing.T) {
	var certExpired sym // a reported reason that is not a fixed symbol; set per case
	for _, tc := range []struct {
		rule   string
		edit   func(*evidence)
		state  State
		reason contract.NodeAgentReason
		gate   Gate
	}{
		{"1 cloned", func(e *evidence) { e.cloned, e.certMismatch = true, true }, StateSecurityActionRequired, contract.NodeReasonClonedIdentity, GateBlockProduction},
		{"2 cert issuer", func(e *evidence) { e.certMismatch, e.ingressMismatch = true, true }, StateSecurityActionRequired, contract.NodeReasonCertIssuerMismatch, GateBlockProduction},
		{"3 ingress trust", func(e *evidence) { e.ingressMismatch, e.health = true, symHealthFailed }, StateSecurityActionRequired, contract.NodeReasonCertUntrustedByIngress, GateBlockProduction},
		{"4 reported cloned", func(e *evidence) { e.reported = symReasonClonedIdentity }, StateSecurityActionRequired, contract.NodeReasonClonedIdentity, GateBlockProduction},
		{"4 reported ingress", func(e *evidence) { e.reported = symReasonCertUntrustedByIngress }, StateSecurityActionRequired, contract.NodeReasonCertUntrustedByIngress, GateBlockProduction},
		{"5 health failed", func(e *evidence) { e.health, e.owned = symHealthFailed, false }, StateOperatorActionRequired, contract.NodeReasonHealthFailed, GateBlockProduction},
		{"6 workload unavailable", func(e *evidence) { e.impact, e.mode = symImpactUnavailable, Disconnected }, StateOperatorActionRequired, contract.NodeReasonWorkloadUnavailable, GateBlockProduction},
		{"7 no owning record", func(e *evidence) { e.owned, e.mode = false, Disconnected }, StateOperatorActionRequired, contract.NodeReasonNoOwningRecord, GateInvestigate},
		{"8 disconnected, no impact", func(e *evidence) { e.mode, e.versionMismatch = Disconnected, true }, StateStale, contract.NodeReasonAgentDown, GateWarning},
		{"8 disconnected, impact unknown", func(e *evidence) { e.mode, e.impact = Disconnected, symImpactUnknown }, StateStale, contract.NodeReasonAgentDown, GateInvestigate},
		{"9 outdated, self update", func(e *evidence) { e.versionMismatch, e.path, e.mode = true, symPathSelfUpdate, Replaying }, StateRecovering, contract.NodeReasonAgentOutdated, GateRetry},
		{"9 outdated, recovery enrollment", func(e *evidence) { e.versionMismatch, e.path = true, symPathRecoveryEnrollment }, StateRecovering, contract.NodeReasonAgentOutdated, GateRetry},
		{"10 outdated, no update path", func(e *evidence) { e.versionMismatch = true }, StateOperatorActionRequired, contract.NodeReasonAgentOutdated, GateInvestigate},
		{"10 outdated, reimage", func(e *evidence) { e.versionMismatch, e.path = true, symPathFullReimage }, StateOperatorActionRequired, contract.NodeReasonAgentOutdated, GateInvestigate},
		{"11 returning", func(e *evidence) { e.mode, e.health = Returning, symHealthDegraded }, StateRecovering, contract.NodeReasonReplayInProgress, GateRetry},
		{"11 replaying", func(e *evidence) { e.mode, e.path = Replaying, symPathOperatorRebootstrap }, StateRecovering, contract.NodeReasonReplayInProgress, GateRetry},
		{"12 self update", func(e *evidence) { e.path = symPathSelfUpdate }, StateRecovering, contract.NodeReasonUpdateInProgress, GateRetry},
		{"12 recovery with reported reason", func(e *evidence) { e.path, e.reported = symPathRecoveryEnrollment, certExpired }, StateRecovering, "cert_expired", GateRetry},
		{"13 operator rebootstrap", func(e *evidence) { e.path = symPathOperatorRebootstrap }, StateOperatorActionRequired, contract.NodeReasonOperatorRecovery, GateInvestigate},
		{"13 full reimage with reason", func(e *evidence) { e.path, e.reported = symPathFullReimage, certExpired }, StateOperatorActionRequired, "cert_expired", GateInvestigate},
		{"14 reported reason", func(e *evidence) { e.reported, e.health = certExpired, symHealthDegraded }, StateOperatorActionRequired, "cert_expired", GateInvestigate},
		{"15 degraded, no impact", func(e *evidence) { e.health, e.mode = symHealthDegraded, Delayed }, StateOperatorActionRequired, contract.NodeReasonHealthDegraded, GateWarning},
		{"15 degraded, impact degraded", func(e *evidence) { e.health, e.impact = symHealthDegraded, symImpactDegraded }, StateOperatorActionRequired, contract.NodeReasonHealthDegraded, GateInvestigate},
		{"16 workload degraded", func(e *evidence) { e.impact, e.probe = symImpactDegraded, symProbeFailed }, StateOperatorActionRequired, contract.NodeReasonWorkloadDegraded, GateInvestigate},
		{"17 probe failed", func(e *evidence) { e.probe, e.mode = symProbeFailed, Delayed }, StateOperatorActionRequired, contract.NodeReasonTerminalProbeFailed, GateInvestigate},
		{"18 delayed by silence", func(e *evidence) { e.mode, e.cause = Delayed, causeSilence }, StateStale, contract.NodeReasonHeartbeatOverdue, GateWarning},
		{"18 autonomous by silence", func(e *evidence) { e.mode, e.cause = Autonomous, causeSilence }, StateStale, contract.NodeReasonHeartbeatOverdue, GateWarning},
		{"18 delayed by link", func(e *evidence) { e.mode, e.cause = Delayed, causeLink }, StateStale, contract.NodeReasonLinkDegraded, GateWarning},
		{"18 edge cached", func(e *evidence) { e.mode, e.cause = EdgeCached, causeSync }, StateStale, contract.NodeReasonSyncDebt, GateWarning},
		{"18 autonomous by sync debt, impact unknown", func(e *evidence) { e.mode, e.cause, e.impact = Autonomous, causeSync, symImpactUnknown }, StateStale, contract.NodeReasonSyncDebt, GateInvestigate},
		{"19 health unknown", func(e *evidence) { e.health = symHealthUnknown }, StateOperatorActionRequired, contract.NodeReasonEvidenceIncomplete, GateInvestigate},
		{"19 impact unknown", func(e *evidence) { e.impact = symImpactUnknown }, StateOperatorActionRequired, contract.NodeReasonEvidenceIncomplete, GateInvestigate},
		{"19 probe not executed", func(e *evidence) { e.probe = symProbeNotExecuted }, StateOperatorActionRequired, contract.NodeReasonEvidenceIncomplete, GateInvestigate},
		{"19 probe missing", func(e *evidence) { e.probe = symEmpty }, StateOperatorActionRequired, contract.NodeReasonEvidenceIncomplete, GateInvestigate},
		{"20 pass", func(*evidence) {}, StateHealthy, "", GatePass},
		{"20 pass, probe not required", func(e *evidence) { e.probe = symProbeNotRequired }, StateHealthy, "", GatePass},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			tab := newSymtab()
			certExpired = tab.Intern("cert_expired")
			e := healthy()
			tc.edit(&e)
			v := judge(&e)
			if v.state != tc.state || tab.Str(v.reason) != string(tc.reason) || v.gate != tc.gate {
				t.Fatalf("got %s/%s/%s, want %s/%s/%s", v.state, tab.Str(v.reason), v.gate, tc.state, tc.reason, tc.gate)
			}
			if identity := tc.rule[:2] == "1 " || tc.rule[:2] == "2 " || tc.rule[:2] == "3 "; v.identity != identity {
				t.Fatalf("identity = %v, want %v", v.identity, identity)
			}
		})
	}
}

// TestModeRules has one case per row of the connectivity table.
func TestModeRules(t *testing.T) {
	o := DefaultOptions()
	fine := link{rttMs: 20}
	for _, tc := range []struct {
		name      string
		silence   time.Duration
		returning bool
		l         link
		mode      Mode
		cause     modeCause
	}{
		{"1 disconnected", 10 * time.Minute, true, link{replay: true}, Disconnected, causeSilence},
		{"2 autonomous by silence", 8 * time.Minute, false, fine, Autonomous, causeSilence},
		{"2 just below", 8*time.Minute - 1, false, fine, Delayed, causeSilence},
		{"3 delayed by silence", 7 * time.Minute, true, fine, Delayed, causeSilence},
		{"3 just below", 7*time.Minute - 1, false, fine, Live, causeNone},
		{"4 returning", time.Minute, true, link{replay: true, rttMs: 900}, Returning, causeNone},
		{"5 replaying", 0, false, link{replay: true, secondsBehind: 3600, backlog: 5000}, Replaying, causeNone},
		{"6 autonomous by sync debt", 0, false, link{secondsBehind: 600, rttMs: 900}, Autonomous, causeSync},
		{"6 autonomous by 1e10 s", 0, false, link{secondsBehind: 1e10}, Autonomous, causeSync},
		{"6 autonomous by the longest Duration in s", 0, false, link{secondsBehind: math.MaxInt64 / int64(time.Second)}, Autonomous, causeSync},
		{"6 autonomous by the largest seconds_behind", 0, false, link{secondsBehind: math.MaxInt64}, Autonomous, causeSync},
		{"7 edge cached by seconds behind", 0, false, link{secondsBehind: 60}, EdgeCached, causeSync},
		{"7 edge cached by backlog", 0, false, link{backlog: 1000, lossPct: 50}, EdgeCached, causeSync},
		{"7 below both", 0, false, link{secondsBehind: 59, backlog: 999}, Live, causeNone},
		{"8 delayed by rtt", 0, false, link{rttMs: 250}, Delayed, causeLink},
		{"8 delayed by loss", 0, false, link{lossPct: 2}, Delayed, causeLink},
		{"9 live", 0, false, link{rttMs: 249.9, lossPct: 1.9}, Live, causeNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, c := o.mode(tc.silence, tc.returning, &tc.l)
			if m != tc.mode || c != tc.cause {
				t.Fatalf("got %s (cause %d), want %s (cause %d)", m, c, tc.mode, tc.cause)
			}
		})
	}
}

// TestScoreOrder checks the attention score's promise over every
// combination of the evidence the score reads: identity and security
// blocks score at least 1500, every item that is not blocked below 1000
// (drift.AttentionScore's order), and other blocks in between.
func TestScoreOrder(t *testing.T) {
	healths := []sym{symHealthOK, symHealthDegraded, symHealthFailed, symHealthUnknown, symEmpty}
	impacts := []sym{symImpactNoneObserved, symImpactDegraded, symImpactUnavailable, symImpactUnknown}
	paths := []sym{symPathNone, symPathSelfUpdate, symPathFullReimage}
	probes := []sym{symProbePassed, symProbeFailed, symProbeNotExecuted}
	reasons := []sym{symEmpty, symReasonClonedIdentity, symReasonAgentDown}
	debts := []link{{}, {secondsBehind: 1 << 40, backlog: 1 << 40}}
	n := 0
	for bits := 0; bits < 1<<5; bits++ {
		for _, h := range healths {
			for _, im := range impacts {
				for _, p := range paths {
					for _, pr := range probes {
						for _, r := range reasons {
							for m := Mode(0); m < numModes; m++ {
								for _, l := range debts {
									e := evidence{cloned: bits&1 != 0, certMismatch: bits&2 != 0, ingressMismatch: bits&4 != 0,
										owned: bits&8 != 0, versionMismatch: bits&16 != 0, reported: r, health: h, impact: im,
										probe: pr, path: p, mode: m, cause: causeSilence}
									v := judge(&e)
									s := score(&v, &e, &l)
									switch {
									case v.security && s < 1500:
										t.Fatalf("security block %+v scores %d", e, s)
									case v.gate != GateBlockProduction && s >= 1000:
										t.Fatalf("%s item %+v scores %d", v.gate, e, s)
									case v.gate == GateBlockProduction && !v.security && (s < 1000 || s >= 1500):
										t.Fatalf("block %+v scores %d", e, s)
									case v.gate == GatePass && l == (link{}) && s != 0:
										t.Fatalf("pass %+v scores %d", e, s)
									}
									n++
								}
							}
						}
					}
				}
			}
		}
	}
	t.Logf("%d combinations", n)
}

func TestOptionsValidate(t *testing.T) {
	o := DefaultOptions()
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	for field, edit := range map[string]func(*Options){
		"DelayedAfter":      func(o *Options) { o.DelayedAfter = 0 },
		"AutonomousAfter":   func(o *Options) { o.AutonomousAfter = o.DelayedAfter },
		"DisconnectedAfter": func(o *Options) { o.DisconnectedAfter = o.AutonomousAfter },
		"HostWindow":        func(o *Options) { o.HostWindow = -1 },
		"DelayedRTTMs":      func(o *Options) { o.DelayedLossPct = 0 },
		"EdgeCachedBehind":  func(o *Options) { o.EdgeCachedBacklog = 0 },
		"AutonomousBehind":  func(o *Options) { o.AutonomousBehind = o.EdgeCachedBehind },
		"Refresh":           func(o *Options) { o.Refresh = -time.Second },
	} {
		o := DefaultOptions()
		edit(&o)
		err := o.Validate()
		if oe, ok := err.(*OptionsError); !ok || oe.Field != field {
			t.Errorf("%s: got %v", field, err)
		}
	}
}
