package nodeagent_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/joiner/nodeagent"
	"github.com/driftline/driftline/pipeline/stream/snap"
)

// testdata/v1.snap is a version 1 section (before the fleet core), written
// by the tracker of that version after part 0 of v1Script; v1.want holds
// the rows that tracker emitted for part 1. This build restores it and
// emits the same rows for part 1 (the fleet fields aside), with a
// lifecycle for every node it re-derives.
func TestLoadSnapshotVersion1(t *testing.T) {
	blob, err := os.ReadFile("testdata/v1.snap")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("testdata/v1.want")
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	var trans []nodeagent.Transition
	tr := nodeagent.New(nodeagent.DefaultOptions(), func(s *nodeagent.Status, _ *uint32) { rows = append(rows, rowLine(s)) })
	tr.SetFleetOutput(nodeagent.FleetOutput{Transition: func(t *nodeagent.Transition) { trans = append(trans, *t) }})
	if err := tr.LoadSnapshot(snap.NewReader(blob)); err != nil {
		t.Fatal(err)
	}
	v1Script(tr, 1)
	if got := strings.Join(rows, "\n") + "\n"; got != string(want) {
		t.Fatalf("rows after a version 1 restore:\n%s\nwant\n%s", got, want)
	}
	for _, id := range []string{"n0", "n1", "n2"} {
		if p, _, seq := tr.Lifecycle(id); p == "" || seq == 0 {
			t.Errorf("%s has no lifecycle after its re-derivation", id)
		}
	}
	if len(trans) == 0 || trans[0].FromPhase != "" || trans[0].Seq != 1 {
		t.Fatalf("first transitions after a version 1 restore %+v", trans)
	}
}

func v1Script(tr *nodeagent.Tracker, part int) {
	base := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	for i := range 3 {
		id := fmt.Sprintf("n%d", i)
		if part == 0 {
			tr.ApplyRecord(&contract.PlatformRecord{RecordType: "inventory_node", RecordID: "rec-" + id, RecordVersion: 1,
				ResourceFamily: contract.FamilyGPUaaS, DomainID: "dom-1", Provider: contract.ProviderMAAS, ProviderID: id,
				ExpectedState: "allocated", ExpectedAgentVersion: "1.0", CertIssuerFingerprint: "c"}, base)
		}
		for m := range 4 {
			at := base.Add(time.Duration(part*4+m)*time.Minute + time.Duration(i)*time.Second)
			if i == 2 && part == 1 {
				at = at.Add(9 * time.Minute) // a silence
			}
			host := "h" + id
			if i == 1 && m == 2 {
				host = "clone"
			}
			tr.ApplyHeartbeat(&contract.Heartbeat{NodeID: id, AgentVersion: "1.0", CertIssuerFingerprint: "c", HostFingerprint: host,
				Health: "OK", UpdatePath: "none", ReplayRequired: i == 2 && m == 0 && part == 1, BacklogMessages: int64(m * 10)}, at, "corr")
			tr.Advance(at.Add(-30 * time.Second))
		}
	}
	if part == 1 {
		tr.Advance(base.Add(40 * time.Minute))
	}
}
func rowLine(s *nodeagent.Status) string {
	return fmt.Sprintf("%s %s %s %s %s %d %s %d", s.NodeID, s.State, s.Gate, s.Reason, s.ConnectivityMode, s.HostFingerprints, s.At.Format(time.RFC3339), s.Version)
}
