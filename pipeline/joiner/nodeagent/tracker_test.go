package nodeagent_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/joiner/classify"
	"github.com/driftline/driftline/pipeline/joiner/drift"
	"github.com/driftline/driftline/pipeline/joiner/nodeagent"
	"github.com/driftline/driftline/pipeline/joiner/ownerstate"
)

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

// harness is a tracker with every row it emitted.
type harness struct {
	t    *testing.T
	tr   *nodeagent.Tracker
	rows []nodeagent.Status
}

func newHarness(t *testing.T, edit func(*nodeagent.Options)) *harness {
	h := &harness{t: t}
	o := nodeagent.DefaultOptions()
	o.Refresh = time.Hour // rows on changes only, unless a test asks
	if edit != nil {
		edit(&o)
	}
	h.tr = nodeagent.New(o, func(s *nodeagent.Status, _ *uint32) {
		if n := len(h.rows); n > 0 {
			for i := n - 1; i >= 0; i-- {
				if p := h.rows[i]; p.NodeID == s.NodeID {
					if s.Version <= p.Version {
						t.Fatalf("version %d after %d", s.Version, p.Version)
					}
					break
				}
			}
		}
		if s.Version < uint64(s.At.UnixMicro()) {
			t.Fatalf("version %d below the event time %v", s.Version, s.At)
		}
		h.rows = append(h.rows, *s)
	})
	return h
}

// take returns the rows emitted since the last take.
func (h *harness) take() []nodeagent.Status {
	r := h.rows
	h.rows = nil
	return r
}

// expect checks the rows emitted since the last take: one per want, with
// its connectivity mode, gate, reason and event time.
func (h *harness) expect(want ...row) {
	h.t.Helper()
	got := h.take()
	if len(got) != len(want) {
		h.t.Fatalf("%d rows, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.ConnectivityMode != w.mode || g.Gate != w.gate || g.Reason != w.reason || !g.At.Equal(at(w.at)) {
			h.t.Fatalf("row %d: %s %s %q at %v, want %s %s %q at %v", i, g.ConnectivityMode, g.Gate, g.Reason,
				g.At.Sub(t0), w.mode, w.gate, w.reason, w.at)
		}
	}
}

type row struct {
	mode, gate, reason string
	at                 time.Duration
}

func nodeRecord(v int64) *contract.PlatformRecord {
	return &contract.PlatformRecord{RecordType: "inventory_node", RecordID: "rec-n1", RecordVersion: v,
		ResourceFamily: contract.FamilyGPUaaS, OwningDomain: "gpuaas", DomainID: "dom-1", Provider: contract.ProviderMAAS,
		ProviderID: "n1", ExpectedState: "allocated", ExpectedAgentVersion: "1.14.2",
		CertIssuerFingerprint: "sha256:c1", IngressTrustFingerprint: "sha256:i1"}
}

func beat(edit ...func(*contract.Heartbeat)) *contract.Heartbeat {
	h := &contract.Heartbeat{NodeID: "n1", AgentVersion: "1.14.2", CertIssuerFingerprint: "sha256:c1",
		IngressTrustFingerprint: "sha256:i1", HostFingerprint: "sha256:h1", UpdatePath: "none",
		TerminalStreamProbe: "passed", WorkloadImpact: "none_observed", Health: "OK", RTTMs: 20, BandwidthKbps: 1e5}
	for _, e := range edit {
		if e != nil {
			e(h)
		}
	}
	return h
}

// TestSilenceTransitions walks the connectivity spectrum in event time:
// LIVE, DELAYED, AUTONOMOUS and DISCONNECTED as silence grows, RETURNING
// on the first heartbeat after the gap, REPLAYING while the backlog
// uploads, LIVE again, and a watermark jump straight to DISCONNECTED.
func TestSilenceTransitions(t *testing.T) {
	h := newHarness(t, nil)
	h.tr.ApplyRecord(nodeRecord(1), at(-time.Minute))
	h.expect()
	h.tr.ApplyHeartbeat(beat(), at(0), "")
	h.expect(row{"LIVE", "pass", "", 0})
	h.tr.Advance(at(7*time.Minute - time.Millisecond))
	h.expect()
	h.tr.Advance(at(7 * time.Minute))
	h.expect(row{"DELAYED", "warning", "heartbeat_overdue", 7 * time.Minute})
	h.tr.Advance(at(8 * time.Minute))
	h.expect(row{"AUTONOMOUS", "warning", "heartbeat_overdue", 8 * time.Minute})
	h.tr.Advance(at(9 * time.Minute))
	h.expect()
	h.tr.Advance(at(10 * time.Minute))
	h.expect(row{"DISCONNECTED", "warning", "agent_down", 10 * time.Minute})
	h.tr.ApplyHeartbeat(beat(), at(10*time.Minute+30*time.Second), "")
	h.expect(row{"RETURNING", "retry", "replay_in_progress", 10*time.Minute + 30*time.Second})
	h.tr.ApplyHeartbeat(beat(func(b *contract.Heartbeat) { b.ReplayRequired, b.BacklogMessages = true, 5000 }), at(11*time.Minute), "")
	h.expect(row{"REPLAYING", "retry", "replay_in_progress", 11 * time.Minute})
	h.tr.ApplyHeartbeat(beat(), at(11*time.Minute+30*time.Second), "")
	h.expect(row{"LIVE", "pass", "", 11*time.Minute + 30*time.Second})
	// The watermark jumps past every threshold: one row, at the moment
	// the node became DISCONNECTED.
	h.tr.Advance(at(40 * time.Minute))
	h.expect(row{"DISCONNECTED", "warning", "agent_down", 21*time.Minute + 30*time.Second})
	// A watermark that goes back changes nothing.
	h.tr.Advance(at(time.Minute))
	h.expect()
	if w := h.tr.Watermark(); !w.Equal(at(40 * time.Minute)) {
		t.Fatalf("watermark %v", w)
	}
}

// TestReportedTransitions derives modes from what heartbeats report.
func TestReportedTransitions(t *testing.T) {
	h := newHarness(t, nil)
	h.tr.ApplyRecord(nodeRecord(1), at(0))
	step := func(d time.Duration, edit func(*contract.Heartbeat), want row) {
		t.Helper()
		h.tr.ApplyHeartbeat(beat(edit), at(d), "")
		h.tr.Advance(at(d - 30*time.Second))
		want.at = d
		h.expect(want)
	}
	step(time.Minute, nil, row{"LIVE", "pass", "", 0})
	step(2*time.Minute, func(b *contract.Heartbeat) { b.RTTMs = 300 }, row{"DELAYED", "warning", "link_degraded", 0})
	step(150*time.Second, nil, row{"LIVE", "pass", "", 0})
	step(3*time.Minute, func(b *contract.Heartbeat) { b.LossPct = 5 }, row{"DELAYED", "warning", "link_degraded", 0})
	step(4*time.Minute, func(b *contract.Heartbeat) { b.SecondsBehind = 90 }, row{"EDGE_CACHED", "warning", "sync_debt", 0})
	step(5*time.Minute, func(b *contract.Heartbeat) { b.SecondsBehind = 700 }, row{"AUTONOMOUS", "warning", "sync_debt", 0})
	step(6*time.Minute, func(b *contract.Heartbeat) { b.BacklogMessages = 2000 }, row{"EDGE_CACHED", "warning", "sync_debt", 0})
	step(7*time.Minute, func(b *contract.Heartbeat) { b.ReplayRequired = true }, row{"REPLAYING", "retry", "replay_in_progress", 0})
	step(8*time.Minute, func(b *contract.Heartbeat) { b.WorkloadImpact = "unknown"; b.RTTMs = 400 }, row{"DELAYED", "investigate", "link_degraded", 0})
	step(9*time.Minute, nil, row{"LIVE", "pass", "", 0})
}

func TestOlderHeartbeatAndRedelivery(t *testing.T) {
	h := newHarness(t, nil)
	h.tr.ApplyRecord(nodeRecord(1), at(0))
	b := beat()
	h.tr.ApplyHeartbeat(b, at(2*time.Minute), "c-2")
	h.tr.ApplyHeartbeat(b, at(2*time.Minute), "c-2") // redelivery
	h.expect(row{"LIVE", "pass", "", 2 * time.Minute})
	h.tr.ApplyHeartbeat(beat(func(b *contract.Heartbeat) { b.AgentVersion, b.Health = "0.9.0", "FAILED" }), at(time.Minute), "c-1")
	h.expect()
	var s nodeagent.Status
	if !h.tr.Lookup("n1", &s) || s.ObservedAgentVersion != "1.14.2" || s.Health != "OK" || s.CorrelationID != "c-2" {
		t.Fatalf("older heartbeat changed the evidence: %+v", s)
	}
	if h.tr.Lookup("n2", &s) {
		t.Fatal("Lookup of an unknown node")
	}
}

func TestRecords(t *testing.T) {
	h := newHarness(t, nil)
	// A heartbeat before any record: nothing owns the node.
	h.tr.ApplyHeartbeat(beat(), at(0), "")
	h.expect(row{"LIVE", "investigate", "no_owning_record", 0})
	r2 := nodeRecord(2)
	r2.ExpectedAgentVersion = "1.15.0"
	h.tr.ApplyRecord(r2, at(time.Second))
	h.expect(row{"LIVE", "investigate", "agent_outdated", time.Second})
	// A late version 1 changes nothing; nor does a record of another provider.
	h.tr.ApplyRecord(nodeRecord(1), at(2*time.Second))
	other := nodeRecord(9)
	other.Provider = contract.ProviderStorage
	h.tr.ApplyRecord(other, at(2*time.Second))
	h.expect()
	// The agent self-updates: retry, then pass once it reports 1.15.0.
	h.tr.ApplyHeartbeat(beat(func(b *contract.Heartbeat) { b.UpdatePath = "self_update" }), at(time.Minute), "")
	h.expect(row{"LIVE", "retry", "agent_outdated", time.Minute})
	h.tr.ApplyHeartbeat(beat(func(b *contract.Heartbeat) { b.AgentVersion = "1.15.0" }), at(2*time.Minute), "")
	h.expect(row{"LIVE", "pass", "", 2 * time.Minute})
	// Released, then re-owned, then a tombstone.
	r3 := nodeRecord(3)
	r3.ExpectedAgentVersion, r3.ExpectedState = "1.15.0", "released"
	h.tr.ApplyRecord(r3, at(3*time.Minute))
	h.expect(row{"LIVE", "investigate", "no_owning_record", 3 * time.Minute})
	r4 := nodeRecord(4)
	r4.ExpectedAgentVersion = "1.15.0"
	h.tr.ApplyRecord(r4, at(4*time.Minute))
	h.expect(row{"LIVE", "pass", "", 4 * time.Minute})
	h.tr.ApplyTombstone(contract.ProviderMAAS, "n1", at(5*time.Minute))
	h.expect(row{"LIVE", "investigate", "no_owning_record", 5 * time.Minute})
	// A record alone is not evidence: no row for a node that never beat.
	r := nodeRecord(1)
	r.ProviderID = "n2"
	h.tr.ApplyRecord(r, at(6*time.Minute))
	h.expect()
	if h.tr.Len() != 2 {
		t.Fatalf("Len %d", h.tr.Len())
	}
}

func TestFingerprintMismatch(t *testing.T) {
	for _, tc := range []struct {
		name   string
		edit   func(*contract.Heartbeat)
		reason string
	}{
		{"cert issuer", func(b *contract.Heartbeat) { b.CertIssuerFingerprint = "sha256:c2" }, "cert_issuer_mismatch"},
		{"ingress trust", func(b *contract.Heartbeat) { b.IngressTrustFingerprint = "sha256:i2" }, "cert_untrusted_by_ingress"},
		{"missing cert", func(b *contract.Heartbeat) { b.CertIssuerFingerprint = "" }, "cert_issuer_mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.tr.ApplyRecord(nodeRecord(1), at(0))
			h.tr.ApplyHeartbeat(beat(tc.edit), at(time.Minute), "corr-9")
			rows := h.take()
			if len(rows) != 1 || !rows[0].IdentityMismatch || rows[0].IdentityReason != tc.reason ||
				rows[0].Gate != "block_production" || rows[0].State != "security_action_required" ||
				rows[0].AttentionScore < 1500 || rows[0].CorrelationID != "corr-9" {
				t.Fatalf("rows %+v", rows)
			}
			if mm, reason := h.tr.IdentityMismatch("n1"); !mm || reason != tc.reason {
				t.Fatalf("IdentityMismatch = %v %q", mm, reason)
			}
			// The record moves to what the node presents: resolved.
			r := nodeRecord(2)
			b := beat(tc.edit)
			r.CertIssuerFingerprint, r.IngressTrustFingerprint = b.CertIssuerFingerprint, b.IngressTrustFingerprint
			h.tr.ApplyRecord(r, at(2*time.Minute))
			h.expect(row{"LIVE", "pass", "", 2 * time.Minute})
			if mm, _ := h.tr.IdentityMismatch("n1"); mm {
				t.Fatal("identity mismatch still set")
			}
		})
	}
}

// TestClonedIdentity: two host fingerprints for one node_id within the
// host window, whatever order their heartbeats arrive in; the finding
// resolves when the clone's last heartbeat leaves the window.
func TestClonedIdentity(t *testing.T) {
	h := newHarness(t, nil)
	h.tr.ApplyRecord(nodeRecord(1), at(0))
	h.tr.ApplyHeartbeat(beat(), at(time.Minute), "")
	h.expect(row{"LIVE", "pass", "", time.Minute})
	// The clone's heartbeat is older than the newest: no evidence
	// changes, but its host counts.
	h.tr.ApplyHeartbeat(beat(func(b *contract.Heartbeat) { b.HostFingerprint = "sha256:h2"; b.AgentVersion = "6.6.6" }), at(30*time.Second), "")
	rows := h.take()
	if len(rows) != 1 || rows[0].Reason != "cloned_identity_detected" || rows[0].HostFingerprints != 2 ||
		rows[0].HostFingerprint != "sha256:h1" || rows[0].ObservedAgentVersion != "1.14.2" || rows[0].AttentionScore < 1600 {
		t.Fatalf("rows %+v", rows)
	}
	// The same host again, or the newest host, adds nothing.
	h.tr.ApplyHeartbeat(beat(func(b *contract.Heartbeat) { b.HostFingerprint = "sha256:h2" }), at(40*time.Second), "")
	h.tr.ApplyHeartbeat(beat(), at(50*time.Second), "")
	h.expect()
	// Hosts alternate as the newest: still two hosts.
	h.tr.ApplyHeartbeat(beat(func(b *contract.Heartbeat) { b.HostFingerprint = "sha256:h2" }), at(2*time.Minute), "")
	rows = h.take()
	if len(rows) != 1 || rows[0].HostFingerprint != "sha256:h2" || rows[0].HostFingerprints != 2 {
		t.Fatalf("rows %+v", rows)
	}
	for m := 3; m <= 13; m++ {
		h.tr.ApplyHeartbeat(beat(), at(time.Duration(m)*time.Minute), "")
		h.tr.Advance(at(time.Duration(m)*time.Minute - 30*time.Second))
	}
	// h1 became the newest at 3m; h2 was last seen at 2m and leaves the
	// window at 12m.
	rows = h.take()
	if len(rows) != 2 || rows[0].HostFingerprints != 2 || rows[1].IdentityMismatch || rows[1].Gate != "pass" ||
		!rows[1].At.Equal(at(12*time.Minute)) || rows[1].HostFingerprints != 1 {
		t.Fatalf("rows %+v", rows)
	}
	// A heartbeat older than the window is no sighting.
	h.tr.ApplyHeartbeat(beat(func(b *contract.Heartbeat) { b.HostFingerprint = "sha256:h3" }), at(time.Minute), "")
	h.expect()
	// Fingerprints are compared exactly: a near-identical one is another host.
	h.tr.ApplyHeartbeat(beat(func(b *contract.Heartbeat) { b.HostFingerprint = "sha256:h1 " }), at(14*time.Minute), "")
	if mm, reason := h.tr.IdentityMismatch("n1"); !mm || reason != "cloned_identity_detected" {
		t.Fatalf("IdentityMismatch = %v %q", mm, reason)
	}
}

// TestCloneOutsideHostWindow: a node that comes back on another host (a
// full reimage, say) the host window or more after its old host's last
// heartbeat is not a cloned identity, in either arrival order, although
// the watermark has not passed the old host's window when the newer
// heartbeat is applied; one nanosecond less apart, it is.
func TestCloneOutsideHostWindow(t *testing.T) {
	h2 := func(b *contract.Heartbeat) { b.HostFingerprint = "sha256:h2" }
	for _, tc := range []struct {
		name     string
		gap      time.Duration // from h1's heartbeat to h2's
		newFirst bool          // h2's heartbeat arrives first
		cloned   bool
	}{
		{"an hour later", time.Hour, false, false},
		{"an hour later, arriving first", time.Hour, true, false},
		{"the window later", 10 * time.Minute, false, false},
		{"the window later, arriving first", 10 * time.Minute, true, false},
		{"within the window", 10*time.Minute - 1, false, true},
		{"within the window, arriving first", 10*time.Minute - 1, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.tr.ApplyRecord(nodeRecord(1), at(0))
			h.tr.Advance(at(-30 * time.Second))
			first, second := func() { h.tr.ApplyHeartbeat(beat(), at(time.Minute), "") },
				func() { h.tr.ApplyHeartbeat(beat(h2), at(time.Minute+tc.gap), "") }
			if tc.newFirst {
				first, second = second, first
			}
			first()
			h.tr.Advance(at(30 * time.Second)) // as the joiner does after each event
			h.take()
			second()
			if mm, reason := h.tr.IdentityMismatch("n1"); mm != tc.cloned {
				t.Errorf("IdentityMismatch = %v (%s), want %v", mm, reason, tc.cloned)
			}
			for _, r := range h.take() {
				if r.IdentityMismatch != tc.cloned || (r.HostFingerprints == 2) != tc.cloned || (r.Gate == "block_production") != tc.cloned {
					t.Errorf("row at %v: hosts %d identity %v gate %s reason %s; want cloned %v",
						r.At.Sub(t0), r.HostFingerprints, r.IdentityMismatch, r.Gate, r.Reason, tc.cloned)
				}
			}
			var s nodeagent.Status
			if h.tr.Lookup("n1", &s); s.HostFingerprint != "sha256:h2" || s.LastSeenAt != at(time.Minute+tc.gap) {
				t.Errorf("evidence host %s last seen %v, want the newer heartbeat's", s.HostFingerprint, s.LastSeenAt.Sub(t0))
			}
		})
	}
}

// TestCloneOutsideHostWindowFinding wires a tracker and a classify engine
// as the joiner's partition does (a heartbeat, then its identity verdict
// to the engine, then both watermarks advance): a node back on another
// host an hour after its old host's last heartbeat opens no
// identity_mismatch finding.
func TestCloneOutsideHostWindowFinding(t *testing.T) {
	var findings []string
	eng := classify.New(classify.DefaultOptions(), ownerstate.New(), func(f *drift.Finding, _ *uint32) {
		findings = append(findings, string(f.Transition)+" "+f.EvidenceID)
	})
	inHeartbeat := false
	tr := nodeagent.New(nodeagent.DefaultOptions(), func(s *nodeagent.Status, _ *uint32) {
		if !inHeartbeat {
			eng.SetNodeIdentity(s.NodeID, s.IdentityMismatch, s.At, s.CorrelationID, false)
		}
	})
	heartbeat := func(b *contract.Heartbeat, when time.Time) {
		inHeartbeat = true
		tr.ApplyHeartbeat(b, when, "")
		inHeartbeat = false
		mm, _ := tr.IdentityMismatch(b.NodeID)
		eng.SetNodeIdentity(b.NodeID, mm, when, "", true)
		eng.Advance(when)
		tr.Advance(eng.Watermark())
	}
	r := nodeRecord(1)
	eng.ApplyRecord(r, at(0), "")
	tr.ApplyRecord(r, at(0))
	tr.Advance(eng.Watermark())
	heartbeat(beat(), at(time.Minute))
	heartbeat(beat(func(b *contract.Heartbeat) { b.HostFingerprint = "sha256:h2" }), at(61*time.Minute))
	for _, f := range findings {
		if strings.Contains(f, "identity_mismatch") {
			t.Fatalf("findings %v: identity_mismatch for hosts seen an hour apart", findings)
		}
	}
	// A clone within the window still opens it.
	heartbeat(beat(), at(62*time.Minute))
	if mm, _ := tr.IdentityMismatch("n1"); !mm || len(findings) == 0 || !strings.HasPrefix(findings[len(findings)-1], "opened identity_mismatch") {
		t.Fatalf("hosts a minute apart: identity %v, findings %v", mm, findings)
	}
}

// TestHugeSyncDebt: seconds_behind and backlog_messages are any
// non-negative int64; a node 10^10 s (or the most an int64 holds) behind
// is AUTONOMOUS by sync debt (mode rule 6), with the capped debt in its
// score, not LIVE by a Duration that overflowed.
func TestHugeSyncDebt(t *testing.T) {
	for _, behind := range []int64{1e10, math.MaxInt64 / int64(time.Second), math.MaxInt64/int64(time.Second) + 1, math.MaxInt64} {
		h := newHarness(t, nil)
		h.tr.ApplyRecord(nodeRecord(1), at(0))
		h.tr.ApplyHeartbeat(beat(func(b *contract.Heartbeat) { b.SecondsBehind, b.BacklogMessages = behind, math.MaxInt64 }), at(time.Minute), "")
		var s nodeagent.Status
		h.tr.Lookup("n1", &s)
		if s.ConnectivityMode != "AUTONOMOUS" || s.Reason != "sync_debt" || s.AttentionScore != 100+30+50+50 {
			t.Errorf("seconds_behind %d: mode %s reason %s score %v, want AUTONOMOUS sync_debt 230", behind, s.ConnectivityMode, s.Reason, s.AttentionScore)
		}
	}
}

// TestRefresh: figures that change no derived field are written at most
// every Refresh; 0 writes every heartbeat.
func TestRefresh(t *testing.T) {
	for _, tc := range []struct {
		refresh time.Duration
		rows    int
	}{{0, 10}, {time.Minute, 5}, {time.Hour, 1}} {
		h := newHarness(t, func(o *nodeagent.Options) { o.Refresh = tc.refresh })
		h.tr.ApplyRecord(nodeRecord(1), at(0))
		for i := range 10 {
			h.tr.ApplyHeartbeat(beat(func(b *contract.Heartbeat) { b.RTTMs = float64(10 + i) }), at(time.Duration(i)*30*time.Second), "")
		}
		if rows := h.take(); len(rows) != tc.rows {
			t.Errorf("refresh %v: %d rows, want %d", tc.refresh, len(rows), tc.rows)
		}
	}
}

func TestNewPanicsOnInvalidOptions(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	o := nodeagent.DefaultOptions()
	o.DelayedAfter = 0
	nodeagent.New(o, func(*nodeagent.Status, *uint32) {})
}
