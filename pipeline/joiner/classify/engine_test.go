package classify

import (
	"testing"
	"time"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/joiner/drift"
	"github.com/driftline/driftline/pipeline/joiner/ownerstate"
	"github.com/driftline/driftline/pipeline/stream/snap"
)

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// harness records the latest row per evidence id and every transition,
// and keeps a handle per finding in its aux word, checking that the word
// holds the finding's own handle, once set, at every later transition.
type harness struct {
	*Engine
	rows        map[string]drift.Finding
	transitions []string
	handles     []string // evidence id of aux handle i+1
}

func newHarness() *harness {
	h := &harness{rows: map[string]drift.Finding{}}
	h.Engine = New(DefaultOptions(), ownerstate.New(), func(f *drift.Finding, aux *uint32) {
		if prev, ok := h.rows[f.EvidenceID]; ok && f.Version <= prev.Version {
			panic("BUG: version did not grow")
		}
		switch {
		case *aux == 0:
			if _, ok := h.rows[f.EvidenceID]; ok {
				panic("BUG: the aux word of " + f.EvidenceID + " was lost")
			}
			h.handles = append(h.handles, f.EvidenceID)
			*aux = uint32(len(h.handles))
		case h.handles[*aux-1] != f.EvidenceID:
			panic("BUG: the aux word of " + f.EvidenceID + " holds the handle of " + h.handles[*aux-1])
		}
		h.rows[f.EvidenceID] = *f
		h.transitions = append(h.transitions, string(f.Transition)+" "+f.EvidenceID)
	})
	return h
}

func rec(id, state string, version int64) *contract.PlatformRecord {
	return &contract.PlatformRecord{RecordType: "app_instance", RecordID: "rec-" + id, RecordVersion: version,
		ResourceFamily: contract.FamilyAppRuntime, Provider: contract.ProviderAppRuntime, ProviderID: id,
		ExpectedState: state, ExpectedVersion: "sha256:aa", OwningDomain: "eu-west"}
}

func obs(id, state string) *contract.Observation {
	return &contract.Observation{Provider: contract.ProviderAppRuntime, ProviderID: id,
		ResourceFamily: contract.FamilyAppRuntime, ObservedState: state, ObservedVersion: "sha256:aa"}
}

func scan(started time.Time) *contract.ScanCompleted {
	return &contract.ScanCompleted{Provider: contract.ProviderAppRuntime, ScanID: "s", ScanStartedAt: started}
}

func (h *harness) want(t *testing.T, class drift.Class, id string, status contract.FindingStatus) drift.Finding {
	t.Helper()
	f, ok := h.rows[drift.EvidenceID(class, "app_runtime/"+id)]
	if !ok {
		if status == "" {
			return f
		}
		t.Fatalf("no %v finding for %s; transitions %v", class, id, h.transitions)
	}
	if f.Status != status {
		t.Fatalf("%v finding for %s is %s, want %s; transitions %v", class, id, f.Status, status, h.transitions)
	}
	return f
}

func TestMissingByScan(t *testing.T) {
	h := newHarness()
	h.ApplyRecord(rec("a", "running", 1), t0.Add(-2*time.Minute), "")
	h.ApplyRecord(rec("b", "running", 1), t0.Add(-2*time.Minute), "")
	h.ApplyObservation(obs("b", "running"), t0.Add(time.Second), "scan-1")
	h.ApplyScan(scan(t0), t0.Add(20*time.Second), "scan-1")
	f := h.want(t, drift.Missing, "a", contract.StatusOpen)
	if f.Severity != contract.SeverityCritical || f.Posture != contract.PostureBlockAdmission || !f.FirstSeenAt.Equal(t0.Add(20*time.Second)) {
		t.Fatalf("missing finding = %+v", f)
	}
	h.want(t, drift.Missing, "b", "")
	// Observed again: resolved, and kept.
	h.ApplyObservation(obs("a", "running"), t0.Add(time.Minute), "scan-2")
	h.want(t, drift.Missing, "a", contract.StatusResolved)
}

// TestScanMissingSurvivesRecordUpdate: a missing finding opened by a
// completed scan resolves when a newer observation is applied, or the
// record stops being owned or expecting a live state. A new record
// version that goes on expecting the resource running (a tag changed) is
// none of these: the scan still did not see the resource.
func TestScanMissingSurvivesRecordUpdate(t *testing.T) {
	h := newHarness()
	h.ApplyRecord(rec("a", "running", 1), t0.Add(-2*time.Minute), "")
	h.ApplyObservation(obs("a", "running"), t0.Add(-time.Minute), "")
	h.ApplyScan(scan(t0), t0.Add(20*time.Second), "scan-1")
	h.want(t, drift.Missing, "a", contract.StatusOpen)
	r := rec("a", "running", 2)
	r.Tags = []string{"team:x"}
	h.ApplyRecord(r, t0.Add(time.Minute), "")
	h.want(t, drift.Missing, "a", contract.StatusOpen)
	// Expecting a transitional state resolves it; expecting the resource
	// running again, after the scan started, is for the next scan to judge.
	h.ApplyRecord(rec("a", "stopped", 3), t0.Add(90*time.Second), "")
	h.want(t, drift.Missing, "a", contract.StatusResolved)
	h.ApplyRecord(rec("a", "running", 4), t0.Add(2*time.Minute), "")
	h.want(t, drift.Missing, "a", contract.StatusResolved)
	h.ApplyScan(scan(t0.Add(3*time.Minute)), t0.Add(4*time.Minute), "scan-2")
	h.want(t, drift.Missing, "a", contract.StatusOpen)
}

// TestUnobservedRecordDeadline: a record never observed is missing a
// staleness window after it began expecting the resource live: a version
// that goes on expecting it does not move the deadline, while one that
// re-creates it after a deletion starts a new window.
func TestUnobservedRecordDeadline(t *testing.T) {
	h := newHarness()
	h.ApplyRecord(rec("a", "running", 1), t0, "")
	r := rec("a", "running", 2)
	r.Tags = []string{"team:x"}
	h.ApplyRecord(r, t0.Add(9*time.Minute), "")
	h.Advance(t0.Add(10*time.Minute + 29*time.Second))
	h.want(t, drift.Missing, "a", "")
	h.Advance(t0.Add(10*time.Minute + 30*time.Second))
	if f := h.want(t, drift.Missing, "a", contract.StatusOpen); !f.FirstSeenAt.Equal(t0.Add(10 * time.Minute)) {
		t.Fatalf("first_seen_at t0+%v, want the deadline t0+10m", f.FirstSeenAt.Sub(t0))
	}
	del := rec("a", "running", 3)
	del.Deleted = true
	h.ApplyRecord(del, t0.Add(11*time.Minute), "")
	h.want(t, drift.Missing, "a", contract.StatusResolved)
	h.ApplyRecord(rec("a", "running", 4), t0.Add(12*time.Minute), "")
	h.Advance(t0.Add(22*time.Minute + 29*time.Second))
	h.want(t, drift.Missing, "a", contract.StatusResolved)
	h.Advance(t0.Add(22*time.Minute + 30*time.Second))
	if f := h.want(t, drift.Missing, "a", contract.StatusOpen); !f.LastSeenAt.Equal(t0.Add(22 * time.Minute)) {
		t.Fatalf("reopened at t0+%v, want the re-created record's deadline t0+22m", f.LastSeenAt.Sub(t0))
	}
}

// TestScanEvaluatesWhatItCanChange: a completed scan opens missing for
// what it did not see, confirms an open missing finding even of a
// resource it saw (one seen too long ago for the watermark), and leaves
// what it saw alone.
func TestScanEvaluatesWhatItCanChange(t *testing.T) {
	h := newHarness()
	for _, id := range []string{"seen", "unseen", "late"} {
		h.ApplyRecord(rec(id, "running", 1), t0.Add(-2*time.Minute), "")
	}
	h.ApplyObservation(obs("seen", "running"), t0.Add(11*time.Minute+50*time.Second), "scan-1")
	// late's observation arrives after the clock passed its staleness
	// deadline: applied, but missing stays open (observed at t0+1s,
	// deadline t0+10m1s, watermark t0+11m20s).
	h.ApplyObservation(obs("late", "running"), t0.Add(time.Second), "scan-1")
	h.want(t, drift.Missing, "late", contract.StatusOpen)
	h.want(t, drift.Missing, "unseen", contract.StatusOpen) // by staleness too
	before := len(h.transitions)
	h.ApplyScan(scan(t0), t0.Add(12*time.Minute), "scan-1")
	got := h.transitions[before:]
	want := []string{"updated missing_provider_resource:app_runtime/unseen", "updated missing_provider_resource:app_runtime/late"}
	if len(got) != len(want) {
		t.Fatalf("scan transitions %v, want %v (in any order)", got, want)
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || g == w
		}
		if !found {
			t.Fatalf("scan transitions %v, want %v (in any order)", got, want)
		}
	}
	if f := h.want(t, drift.Missing, "late", contract.StatusOpen); f.RetryCount != 1 {
		t.Fatalf("late: retry_count %d after the scan confirmed it", f.RetryCount)
	}
	h.want(t, drift.Missing, "seen", "")
}

func TestMissingByStaleness(t *testing.T) {
	h := newHarness()
	h.ApplyRecord(rec("a", "running", 1), t0, "")
	h.ApplyObservation(obs("a", "running"), t0.Add(time.Minute), "")
	// Another identity's events move the clock; a is last seen at t0+1m.
	h.ApplyObservation(obs("z", "stopped"), t0.Add(11*time.Minute), "")
	h.want(t, drift.Missing, "a", "") // watermark t0+10m30s < deadline t0+11m
	h.ApplyObservation(obs("z", "stopped"), t0.Add(11*time.Minute+31*time.Second), "")
	f := h.want(t, drift.Missing, "a", contract.StatusOpen)
	if !f.FirstSeenAt.Equal(t0.Add(11 * time.Minute)) {
		t.Fatalf("first_seen_at = %v, want the deadline", f.FirstSeenAt)
	}
}

func TestOrphanAfterGrace(t *testing.T) {
	h := newHarness()
	h.ApplyObservation(obs("o", "running"), t0, "")
	h.ApplyObservation(obs("o", "running"), t0.Add(5*time.Minute), "")
	h.want(t, drift.Orphan, "o", "") // watermark t0+4m30s
	h.ApplyObservation(obs("o", "running"), t0.Add(6*time.Minute), "")
	f := h.want(t, drift.Orphan, "o", contract.StatusOpen)
	if !f.FirstSeenAt.Equal(t0.Add(5*time.Minute)) || f.Posture != contract.PostureQuarantine {
		t.Fatalf("orphan = %+v", f)
	}
	// A record takes ownership: resolved.
	h.ApplyRecord(rec("o", "running", 1), t0.Add(7*time.Minute), "")
	h.want(t, drift.Orphan, "o", contract.StatusResolved)
}

func TestOrphanOfReleasedRecordIsNotStale(t *testing.T) {
	h := newHarness()
	h.ApplyRecord(rec("r", "released", 1), t0.Add(-time.Minute), "")
	for i := 0; i < 3; i++ {
		h.ApplyObservation(obs("r", "running"), t0.Add(time.Duration(i)*6*time.Minute), "")
	}
	h.want(t, drift.Orphan, "r", contract.StatusOpen)
	h.want(t, drift.Stale, "r", "")
}

func TestStaleRetryThenOperatorReview(t *testing.T) {
	h := newHarness()
	h.ApplyRecord(rec("s", "running", 1), t0.Add(-time.Minute), "")
	h.ApplyObservation(obs("s", "stopped"), t0, "c1")
	f := h.want(t, drift.Stale, "s", contract.StatusOpen)
	if f.Posture != contract.PostureRetry || f.RetryCount != 0 || !f.NextAttemptAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("stale after 1 = %+v", f)
	}
	h.ApplyObservation(obs("s", "stopped"), t0.Add(6*time.Minute), "c2")
	h.ApplyObservation(obs("s", "stopped"), t0.Add(12*time.Minute), "c3")
	f = h.want(t, drift.Stale, "s", contract.StatusOpen)
	if f.Posture != contract.PostureOperatorReview || f.RetryCount != 2 || f.CorrelationID != "c3" || !f.NextAttemptAt.IsZero() {
		t.Fatalf("stale after 3 = %+v", f)
	}
	// Older observation arriving late changes nothing.
	before := len(h.transitions)
	h.ApplyObservation(obs("s", "running"), t0.Add(time.Minute), "late")
	if len(h.transitions) != before {
		t.Fatalf("late observation caused transitions %v", h.transitions[before:])
	}
	h.ApplyObservation(obs("s", "running"), t0.Add(13*time.Minute), "c4")
	h.want(t, drift.Stale, "s", contract.StatusResolved)
}

func TestStaleVersionAndLateRecordVersion(t *testing.T) {
	h := newHarness()
	h.ApplyRecord(rec("v", "running", 2), t0.Add(-time.Minute), "")
	o := obs("v", "running")
	o.ObservedVersion = "sha256:bb"
	h.ApplyObservation(o, t0, "")
	h.want(t, drift.Stale, "v", contract.StatusOpen)
	// A lower record version that would agree arrives late: ignored.
	old := rec("v", "running", 1)
	old.ExpectedVersion = "sha256:bb"
	h.ApplyRecord(old, t0.Add(time.Second), "")
	h.want(t, drift.Stale, "v", contract.StatusOpen)
	// A higher version that agrees resolves it.
	nw := rec("v", "running", 3)
	nw.ExpectedVersion = "sha256:bb"
	h.ApplyRecord(nw, t0.Add(2*time.Second), "")
	h.want(t, drift.Stale, "v", contract.StatusResolved)
}

func TestQuotaRouteOwnerRef(t *testing.T) {
	h := newHarness()
	r := rec("x", "running", 1)
	r.Quota, r.RouteTarget = "100.5", "app-x.internal"
	h.ApplyRecord(r, t0, "")
	o := obs("x", "running")
	o.Usage, o.RouteTarget, o.OwnerRef = "100.50", "app-x.internal", "rec-x"
	h.ApplyObservation(o, t0.Add(time.Second), "")
	for _, k := range []drift.Class{drift.Quota, drift.Route, drift.IdentityMismatch, drift.Stale} {
		h.want(t, k, "x", "")
	}
	o2 := *o
	o2.Usage, o2.RouteTarget, o2.OwnerRef = "100.6", "app-y.internal", "rec-y"
	h.ApplyObservation(&o2, t0.Add(2*time.Second), "")
	for _, k := range []drift.Class{drift.Quota, drift.Route, drift.IdentityMismatch} {
		if f := h.want(t, k, "x", contract.StatusOpen); f.Severity != contract.SeverityCritical {
			t.Fatalf("%v severity %s", k, f.Severity)
		}
	}
}

func TestTombstoneMakesObservedResourceOrphan(t *testing.T) {
	h := newHarness()
	h.ApplyRecord(rec("t", "running", 1), t0, "")
	h.ApplyObservation(obs("t", "running"), t0.Add(time.Second), "")
	h.ApplyTombstone(contract.ProviderAppRuntime, "t", t0.Add(time.Minute))
	h.ApplyObservation(obs("t", "running"), t0.Add(7*time.Minute), "")
	h.want(t, drift.Orphan, "t", contract.StatusOpen)
	h.want(t, drift.Missing, "t", "")
}

// TestOrphanSinceIndependentOfArrivalOrder: orphan_since is the
// occurred_at of the first observation of the unowned-and-live stretch,
// whether the deletion (a deleted version or a tombstone, at t0+30s) is
// applied before the first observation (t0+1m) or after it: the orphan
// opens at t0+6m either way, never at the deletion's time plus the grace.
func TestOrphanSinceIndependentOfArrivalOrder(t *testing.T) {
	for _, tombstone := range []bool{false, true} {
		run := func(deletionFirst bool) drift.Finding {
			h := newHarness()
			h.ApplyRecord(rec("a", "running", 1), t0, "")
			del := func() {
				if tombstone {
					h.ApplyTombstone(contract.ProviderAppRuntime, "a", t0.Add(30*time.Second))
					return
				}
				r := rec("a", "running", 2)
				r.Deleted = true
				h.ApplyRecord(r, t0.Add(30*time.Second), "")
			}
			if deletionFirst {
				del()
				h.ApplyObservation(obs("a", "running"), t0.Add(time.Minute), "")
			} else {
				h.ApplyObservation(obs("a", "running"), t0.Add(time.Minute), "")
				del()
			}
			h.Advance(t0.Add(time.Hour))
			return h.want(t, drift.Orphan, "a", contract.StatusOpen)
		}
		a, b := run(true), run(false)
		if !a.FirstSeenAt.Equal(t0.Add(6*time.Minute)) || !b.FirstSeenAt.Equal(t0.Add(6*time.Minute)) {
			t.Fatalf("tombstone %v: orphan first_seen_at t0+%v with the deletion applied first, t0+%v with the observation first; want t0+6m both",
				tombstone, a.FirstSeenAt.Sub(t0), b.FirstSeenAt.Sub(t0))
		}
	}
}

func TestReplayIsDeterministic(t *testing.T) {
	run := func() []string {
		h := newHarness()
		h.ApplyRecord(rec("a", "running", 1), t0, "")
		h.ApplyRecord(rec("b", "running", 1), t0, "")
		for i := 0; i < 4; i++ {
			at := t0.Add(time.Duration(i) * 6 * time.Minute)
			h.ApplyObservation(obs("b", "stopped"), at, "")
			h.ApplyObservation(obs("o", "running"), at.Add(time.Second), "")
			h.ApplyScan(scan(at), at.Add(20*time.Second), "")
		}
		return h.transitions
	}
	a, b := run(), run()
	if len(a) == 0 || len(a) != len(b) {
		t.Fatalf("runs differ: %v vs %v", a, b)
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("transition %d differs: %s vs %s", i, a[i], b[i])
		}
	}
}

func TestNodeIdentityMismatch(t *testing.T) {
	h := newHarness()
	key := "maas/n1"
	get := func() drift.Finding { return h.rows[drift.EvidenceID(drift.IdentityMismatch, key)] }
	h.SetNodeIdentity("n1", false, t0, "hb-0", true) // a consistent heartbeat: nothing
	if len(h.rows) != 0 {
		t.Fatalf("rows %v", h.transitions)
	}
	h.SetNodeIdentity("n1", true, t0.Add(time.Minute), "hb-1", true) // opens
	if f := get(); f.Status != contract.StatusOpen || f.RetryCount != 0 || f.Severity != contract.SeverityCritical || f.CorrelationID != "hb-1" {
		t.Fatalf("after opening: %+v", f)
	}
	h.SetNodeIdentity("n1", true, t0.Add(2*time.Minute), "hb-2", true) // confirms
	h.SetNodeIdentity("n1", true, t0.Add(3*time.Minute), "", false)    // no change, no heartbeat: nothing
	if f := get(); f.RetryCount != 1 || !f.LastSeenAt.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("after confirming: %+v", f)
	}
	h.SetNodeIdentity("n1", false, t0.Add(12*time.Minute), "", false) // the clone left the window
	if f := get(); f.Status != contract.StatusResolved || !f.ResolvedAt.Equal(t0.Add(12*time.Minute)) {
		t.Fatalf("after resolving: %+v", f)
	}
}

// A finding carries its record's tags, through a restore too; the fleet
// core's verdicts open and resolve their findings on the node's identity.
func TestTagsAndFleetFindings(t *testing.T) {
	h := newHarness()
	r := rec("a1", "running", 1)
	r.Tags = []string{"team:x", "site:ams"}
	h.ApplyRecord(r, t0, "c1")
	h.ApplyObservation(obs("a1", "stopped"), t0.Add(time.Second), "c2")
	f := h.rows["stale_lifecycle_state:app_runtime/a1"]
	if len(f.Tags) != 2 || f.Tags[0] != "team:x" || f.Tags[1] != "site:ams" {
		t.Fatalf("tags %q", f.Tags)
	}
	var w snap.Writer
	h.AppendSnapshot(&w)
	g := newHarness()
	if err := g.LoadSnapshot(snap.NewReader(w.B)); err != nil {
		t.Fatal(err)
	}
	g.ApplyObservation(obs("a1", "stopped"), t0.Add(2*time.Second), "c3")
	if f := g.rows["stale_lifecycle_state:app_runtime/a1"]; len(f.Tags) != 2 || f.Tags[1] != "site:ams" {
		t.Fatalf("tags after a restore %q", f.Tags)
	}

	h.SetNodeFleet("n1", true, false, t0.Add(3*time.Second), "hb1", true)
	h.SetNodeFleet("n1", true, true, t0.Add(4*time.Second), "hb2", true)
	h.SetNodeFleet("n1", false, true, t0.Add(5*time.Second), "hb3", true)
	a, s := h.rows["authority_conflict:maas/n1"], h.rows["supply_chain_violation:maas/n1"]
	if a.Status != contract.StatusResolved || a.RetryCount != 1 || a.Severity != contract.SeverityCritical || a.Posture != contract.PostureBlockAdmission {
		t.Fatalf("authority_conflict %+v", a)
	}
	if s.Status != contract.StatusOpen || s.RetryCount != 1 || s.Posture != contract.PostureQuarantine || s.AttentionScore < 1450 {
		t.Fatalf("supply_chain_violation %+v", s)
	}
}
