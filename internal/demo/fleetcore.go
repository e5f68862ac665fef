package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/driftline/driftline/internal/fleet"
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

// apiFleetCore reads the fleet core through the query API: phases from
// every page of /v1/nodes, rollouts from /v1/rollouts. It decodes only
// the fields it shows.
type apiFleetCore struct {
	base, key string
	hc        *http.Client
}

func newAPIFleetCore(base, key string) *apiFleetCore {
	return &apiFleetCore{base: base, key: key, hc: &http.Client{Timeout: 30 * time.Second}}
}

func (a *apiFleetCore) get(ctx context.Context, path string, q url.Values, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+path+"?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+a.key)
	resp, err := a.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d", path, resp.StatusCode)
	}
	return json.Unmarshal(body, into)
}

// Phases counts the nodes of /v1/nodes by phase ("" when the API does
// not report one).
func (a *apiFleetCore) Phases(ctx context.Context) (map[string]uint64, error) {
	out := map[string]uint64{}
	q := url.Values{"limit": {"5000"}}
	for {
		var page struct {
			Nodes []struct {
				Phase string `json:"phase"`
			} `json:"nodes"`
			NextCursor string `json:"next_cursor"`
		}
		if err := a.get(ctx, "/v1/nodes", q, &page); err != nil {
			return nil, err
		}
		for _, n := range page.Nodes {
			out[n.Phase]++
		}
		if page.NextCursor == "" {
			return out, nil
		}
		q.Set("cursor", page.NextCursor)
	}
}

// Rollouts reads /v1/rollouts.
func (a *apiFleetCore) Rollouts(ctx context.Context) (map[string]rolloutSum, error) {
	var r struct {
		Rollouts []struct {
			PolicyBundleID string `json:"policy_bundle_id"`
			TargetVersion  string `json:"target_version"`
			AtTarget       uint64 `json:"at_target"`
			Updating       uint64 `json:"updating"`
			Behind         uint64 `json:"behind"`
			Failed         uint64 `json:"failed"`
			Pending        uint64 `json:"pending"`
		} `json:"rollouts"`
	}
	if err := a.get(ctx, "/v1/rollouts", nil, &r); err != nil {
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
	}
	want := truthRollouts(truth)
	got, err := fc.Rollouts(ctx)
	if err != nil {
		fmt.Fprintf(out, "  rollouts: unknown (%v)\n", err)
	} else {
		fmt.Fprintf(out, "  %-12s %-10s %21s %21s %21s %21s %21s\n", "bundle", "target", "at_target", "updating", "behind", "failed", "pending")
		keys := map[string]bool{}
		for k := range want {
			keys[k] = true
		}
		for k := range got {
			keys[k] = true
		}
		for _, b := range sortedKeys(keys) {
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

func sum(m map[string]uint64) uint64 {
	var n uint64
	for _, v := range m {
		n += v
	}
	return n
}
