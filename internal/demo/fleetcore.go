package demo

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"time"

	"github.com/driftline/driftline/internal/fleet"
	"github.com/driftline/driftline/pipeline/api/client"
	"github.com/driftline/driftline/pipeline/contract"
)

// fleetCore reads what the summary shows of the fleet core (CONTRACT
// section 8): nodes per lifecycle phase and rollout counts per policy
// bundle.
type fleetCore interface {
	Phases(ctx context.Context) (map[string]uint64, error)
	Rollouts(ctx context.Context) (map[string]rolloutSum, error)
}

// rolloutSum is one policy bundle's rollout over its domains.
type rolloutSum struct {
	TargetVersion                               string
	AtTarget, Updating, Behind, Failed, Pending uint64
}

// apiFleetCore reads the fleet core through the query client: phases
// from every page of /v1/nodes, rollouts from /v1/rollouts.
type apiFleetCore struct{ qc *client.Client }

// Phases counts the nodes of /v1/nodes by phase ("" when the API does
// not report one).
func (a apiFleetCore) Phases(ctx context.Context) (map[string]uint64, error) {
	nodes, err := a.qc.NodesAll(ctx, url.Values{"limit": {"5000"}})
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	for _, n := range nodes {
		out[n.Phase]++
	}
	return out, nil
}

// Rollouts reads /v1/rollouts, summed per bundle over its domains.
func (a apiFleetCore) Rollouts(ctx context.Context) (map[string]rolloutSum, error) {
	r, err := a.qc.Rollouts(ctx, nil)
	if err != nil {
		return nil, err
	}
	out := map[string]rolloutSum{}
	for _, b := range r.Rollouts {
		out[b.PolicyBundleID] = rolloutSum{TargetVersion: b.TargetVersion, AtTarget: b.AtTarget, Updating: b.Updating,
			Behind: b.Behind, Failed: b.Failed, Pending: b.Pending}
	}
	return out, nil
}

// truthPhases counts the truth's nodes by final phase.
func truthPhases(t *fleet.Truth) map[string]uint64 {
	out := map[string]uint64{}
	for p, n := range t.Fleet.Phases {
		out[p] = uint64(n)
	}
	return out
}

// truthRollouts sums the truth's rollout counts per bundle.
func truthRollouts(t *fleet.Truth) map[string]rolloutSum {
	out := map[string]rolloutSum{}
	for _, rc := range t.Fleet.Rollouts {
		s := out[rc.PolicyBundleID]
		s.TargetVersion = rc.TargetVersion
		s.AtTarget += uint64(rc.AtTarget)
		s.Updating += uint64(rc.Updating)
		s.Behind += uint64(rc.Behind)
		s.Failed += uint64(rc.Failed)
		s.Pending += uint64(rc.Pending)
		out[rc.PolicyBundleID] = s
	}
	return out
}

// printFleetCore prints the fleet core beside the generator's truth:
// nodes per lifecycle phase, rollouts per policy bundle, and the bad
// input the pipeline must have rejected.
func printFleetCore(ctx context.Context, out io.Writer, fc fleetCore, truth *fleet.Truth) {
	if len(truth.Fleet.Nodes) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	wantPhases := truthPhases(truth)
	fmt.Fprintln(out, "\nfleet core (docs/fleet-core.md):")
	phases, err := fc.Phases(ctx)
	if err == nil && len(phases) > 0 && phases[""] == sum(phases) {
		err = fmt.Errorf("the query API reports no phase for its %d nodes", phases[""])
	}
	if err != nil {
		fmt.Fprintf(out, "  lifecycle phases: unknown (%v)\n", err)
	} else {
		fmt.Fprintf(out, "  %-28s %6s %10s\n", "lifecycle phase", "nodes", "fleet truth")
		for _, p := range contract.Phases {
			if phases[string(p)]+wantPhases[string(p)] > 0 {
				fmt.Fprintf(out, "  %-28s %6d %10d\n", p, phases[string(p)], wantPhases[string(p)])
			}
		}
		if n := phases[""]; n > 0 {
			fmt.Fprintf(out, "  %-28s %6d %10s\n", "(no phase)", n, "-")
		}
		fmt.Fprintf(out, "  (the truth predicts %d of the nodes: those whose heartbeats or record decide the phase)\n", len(truth.Fleet.Nodes))
		if n := silentNodes(truth); n > 0 {
			fmt.Fprintf(out, "  (%d of them never sent a heartbeat: a node status row comes with the first heartbeat, so /v1/nodes does\n"+
				"   not list them; each one's phase is the last row of /v1/nodes/{id}/timeline)\n", n)
		}
	}
	want := truthRollouts(truth)
	got, err := fc.Rollouts(ctx)
	if err != nil {
		fmt.Fprintf(out, "  rollouts: unknown (%v)\n", err)
	} else {
		fmt.Fprintf(out, "  %-12s %-10s %21s %21s %21s %21s %21s\n", "bundle", "target", "at_target", "updating", "behind", "failed", "pending")
		for _, b := range sortedUnion(want, got) {
			g, w := got[b], want[b]
			tv := w.TargetVersion
			if tv == "" {
				tv = g.TargetVersion
			}
			cell := func(a, b uint64) string { return fmt.Sprintf("%d (truth %d)", a, b) }
			fmt.Fprintf(out, "  %-12s %-10s %21s %21s %21s %21s %21s\n", b, tv, cell(g.AtTarget, w.AtTarget),
				cell(g.Updating, w.Updating), cell(g.Behind, w.Behind), cell(g.Failed, w.Failed), cell(g.Pending, w.Pending))
		}
	}
	for _, r := range truth.Fleet.Rejections {
		fmt.Fprintf(out, "  bad input on purpose: %s from %s seq %d: %s at the %s\n", r.Type, r.Producer, r.Seq, r.Reason, r.Stage)
	}
}

// silentNodes counts the truth's nodes that never sent a heartbeat (their
// record alone decides the phase): the truth gives them no artifact.
func silentNodes(t *fleet.Truth) int {
	n := 0
	for _, node := range t.Fleet.Nodes {
		if node.ArtifactID == "" {
			n++
		}
	}
	return n
}

func sum(m map[string]uint64) uint64 {
	var n uint64
	for _, v := range m {
		n += v
	}
	return n
}
