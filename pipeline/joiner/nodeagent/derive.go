package nodeagent

import (
	"math"
	"time"
)

// modeCause says which evidence set the connectivity mode: it picks the
// reason of the stale rule (docs/node-agent-model.md, rule 18).
type modeCause uint8

const (
	causeNone    modeCause = iota // LIVE, or a mode with its own rule
	causeSilence                  // no heartbeat for a while
	causeLink                     // reported rtt or loss
	causeSync                     // reported seconds_behind or backlog
)

// link is the reported link quality and sync debt of the newest heartbeat.
type link struct {
	rttMs, lossPct float64
	backlog        int64
	secondsBehind  int64
	replay         bool
}

// mode derives the connectivity mode (the mode table of
// docs/node-agent-model.md; first match wins). silence is the watermark
// minus last_seen_at (never negative); returning is set when the newest
// heartbeat came at least AutonomousAfter after the one before it.
func (o *Options) mode(silence time.Duration, returning bool, l *link) (Mode, modeCause) {
	behind := seconds(l.secondsBehind)
	switch {
	case silence >= o.DisconnectedAfter:
		return Disconnected, causeSilence
	case silence >= o.AutonomousAfter:
		return Autonomous, causeSilence
	case silence >= o.DelayedAfter:
		return Delayed, causeSilence
	case returning:
		return Returning, causeNone
	case l.replay:
		return Replaying, causeNone
	case behind >= o.AutonomousBehind:
		return Autonomous, causeSync
	case behind >= o.EdgeCachedBehind || l.backlog >= o.EdgeCachedBacklog:
		return EdgeCached, causeSync
	case l.rttMs >= o.DelayedRTTMs || l.lossPct >= o.DelayedLossPct:
		return Delayed, causeLink
	}
	return Live, causeNone
}

// seconds returns s seconds as a Duration, saturated at the longest
// Duration: seconds_behind is any non-negative int64, and s*time.Second
// overflows from about 292 years (a node that far behind would read as
// not behind at all).
func seconds(s int64) time.Duration {
	if s >= math.MaxInt64/int64(time.Second) {
		return math.MaxInt64
	}
	return time.Duration(max(s, 0)) * time.Second
}

// evidence is what the gate rules read for one node.
type evidence struct {
	cloned          bool // two or more host fingerprints within the host window
	certMismatch    bool // owned record's cert issuer fingerprint set and different
	ingressMismatch bool // owned record's ingress trust fingerprint set and different
	owned           bool // a record exists, is not deleted, does not expect the node gone
	versionMismatch bool // record's expected agent version set and different
	reported        sym  // the heartbeat's node_agent_reason
	health          sym
	impact          sym
	probe           sym
	path            sym
	mode            Mode
	cause           modeCause
}

// verdict is what the rules derive.
type verdict struct {
	state    State
	reason   sym
	gate     Gate
	identity bool // rules 1-3: the joiner's identity_mismatch finding holds
	security bool // rules 1-4: a trust or identity block
}

// warnOr is warning when no workload impact was observed, investigate
// otherwise (seed 000: warning means stale evidence without impact).
func warnOr(impact sym) Gate {
	if impact == symImpactNoneObserved {
		return GateWarning
	}
	return GateInvestigate
}

func orReason(reported, def sym) sym {
	if reported != symEmpty {
		return reported
	}
	return def
}

// judge applies the gate rules of docs/node-agent-model.md; the first rule
// that matches wins. The rule numbers are the table's.
func judge(e *evidence) verdict {
	automatic := e.path == symPathSelfUpdate || e.path == symPathRecoveryEnrollment
	switch {
	case e.cloned: // 1
		return verdict{StateSecurityActionRequired, symReasonClonedIdentity, GateBlockProduction, true, true}
	case e.certMismatch: // 2
		return verdict{StateSecurityActionRequired, symReasonCertIssuerMismatch, GateBlockProduction, true, true}
	case e.ingressMismatch: // 3
		return verdict{StateSecurityActionRequired, symReasonCertUntrustedByIngress, GateBlockProduction, true, true}
	case e.reported == symReasonClonedIdentity || e.reported == symReasonCertUntrustedByIngress: // 4
		return verdict{StateSecurityActionRequired, e.reported, GateBlockProduction, false, true}
	case e.health == symHealthFailed: // 5
		return verdict{StateOperatorActionRequired, symReasonHealthFailed, GateBlockProduction, false, false}
	case e.impact == symImpactUnavailable: // 6
		return verdict{StateOperatorActionRequired, symReasonWorkloadUnavailable, GateBlockProduction, false, false}
	case !e.owned: // 7
		return verdict{StateOperatorActionRequired, symReasonNoOwningRecord, GateInvestigate, false, false}
	case e.mode == Disconnected: // 8
		return verdict{StateStale, symReasonAgentDown, warnOr(e.impact), false, false}
	case e.versionMismatch && automatic: // 9
		return verdict{StateRecovering, symReasonAgentOutdated, GateRetry, false, false}
	case e.versionMismatch: // 10
		return verdict{StateOperatorActionRequired, symReasonAgentOutdated, GateInvestigate, false, false}
	case e.mode == Returning || e.mode == Replaying: // 11
		return verdict{StateRecovering, symReasonReplayInProgress, GateRetry, false, false}
	case automatic: // 12
		return verdict{StateRecovering, orReason(e.reported, symReasonUpdateInProgress), GateRetry, false, false}
	case e.path == symPathOperatorRebootstrap || e.path == symPathFullReimage: // 13
		return verdict{StateOperatorActionRequired, orReason(e.reported, symReasonOperatorRecovery), GateInvestigate, false, false}
	case e.reported != symEmpty: // 14
		return verdict{StateOperatorActionRequired, e.reported, GateInvestigate, false, false}
	case e.health == symHealthDegraded: // 15
		return verdict{StateOperatorActionRequired, symReasonHealthDegraded, warnOr(e.impact), false, false}
	case e.impact == symImpactDegraded: // 16
		return verdict{StateOperatorActionRequired, symReasonWorkloadDegraded, GateInvestigate, false, false}
	case e.probe == symProbeFailed: // 17
		return verdict{StateOperatorActionRequired, symReasonTerminalProbeFailed, GateInvestigate, false, false}
	case e.mode == Delayed || e.mode == EdgeCached || e.mode == Autonomous: // 18
		reason := symReasonSyncDebt
		switch e.cause {
		case causeSilence:
			reason = symReasonHeartbeatOverdue
		case causeLink:
			reason = symReasonLinkDegraded
		}
		return verdict{StateStale, reason, warnOr(e.impact), false, false}
	case e.health != symHealthOK || e.impact != symImpactNoneObserved ||
		(e.probe != symProbePassed && e.probe != symProbeNotRequired): // 19
		return verdict{StateOperatorActionRequired, symReasonEvidenceIncomplete, GateInvestigate, false, false}
	}
	return verdict{StateHealthy, symEmpty, GatePass, false, false} // 20
}

// Attention score points (docs/node-agent-model.md).
const (
	scoreSecurity    = 1500 // block_production by rules 1-4
	scoreCloned      = 100  // added for a cloned identity (rule 1)
	scoreBlock       = 1000 // block_production by rules 5-6
	scoreInvestigate = 300
	scoreRetry       = 150
	scoreWarning     = 100
	scoreOutdated    = 25 // supply chain: the agent is not the expected build
	scoreDebtCap     = 50 // cap of each sync-debt term
)

var modePoints = [numModes]int{Live: 0, Delayed: 10, EdgeCached: 20, Autonomous: 30, Returning: 30, Replaying: 30, Disconnected: 50}

func healthPoints(h sym) int {
	switch h {
	case symHealthOK:
		return 0
	case symHealthDegraded:
		return 40
	case symHealthFailed:
		return 80
	}
	return 20 // UNKNOWN or missing
}

// score is the node's attention score: gate base + health + connectivity
// + sync debt + supply chain. Every node that is not blocked scores below
// 1000, every identity or security block at least 1500, the order of
// drift.AttentionScore.
func score(v *verdict, e *evidence, l *link) int {
	s := 0
	switch v.gate {
	case GateBlockProduction:
		s = scoreBlock
		if v.security {
			s = scoreSecurity
			if v.reason == symReasonClonedIdentity {
				s += scoreCloned
			}
		}
	case GateInvestigate:
		s = scoreInvestigate
	case GateRetry:
		s = scoreRetry
	case GateWarning:
		s = scoreWarning
	}
	s += healthPoints(e.health)
	s += modePoints[e.mode]
	s += int(min(l.secondsBehind/60, scoreDebtCap) + min(l.backlog/1000, scoreDebtCap))
	if e.versionMismatch {
		s += scoreOutdated
	}
	return s
}
