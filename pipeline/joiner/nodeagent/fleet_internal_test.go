package nodeagent

import (
	"fmt"
	"testing"
	"time"

	"github.com/driftline/driftline/pipeline/contract"
)

// A node reporting a new version and digest with every heartbeat does not
// grow the pool of fleet strings without bound: it is rebuilt from what
// the nodes hold once it has doubled.
func TestFleetPoolBounded(t *testing.T) {
	tr := quietTracker()
	most := 0
	for i := range 50000 {
		tr.ApplyHeartbeat(&contract.Heartbeat{NodeID: "n1", AgentVersion: "1", HostFingerprint: "h", Health: "OK",
			ReportedVersion: fmt.Sprintf("v%d", i), ArtifactDigest: fmt.Sprintf("d%d", i)}, base.Add(time.Duration(i)*time.Second), "")
		most = max(most, len(tr.fleet.pool))
	}
	if most > 2*minFleetCompactAt {
		t.Fatalf("pool grew to %d strings", most)
	}
	if f := tr.lookup("n1").fleet; f.reported != "v49999" || tr.fleet.pool[f.reported] != f.reported {
		t.Fatalf("the node's strings left the pool: %q", f.reported)
	}
}
