package cli

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/api/client"
)

// The fleet core's subcommands (CONTRACT section 8).

func cmdTimeline(ctx context.Context, c *client.Client, q url.Values, pos []string) (table, any, error) {
	takeAll(q)
	if len(pos) != 1 {
		return table{}, nil, errors.New("timeline: give one node_id")
	}
	tl, err := c.Timeline(ctx, pos[0], q)
	if err != nil {
		return table{}, nil, err
	}
	t := table{head: []string{"seq", "at", "from", "to", "reason", "correlation_id"}}
	for _, x := range tl.Transitions {
		t.rows = append(t.rows, []string{strconv.FormatUint(x.Seq, 10), x.At.UTC().Format(time.RFC3339),
			phaseState(x.FromPhase, x.FromState), phaseState(x.ToPhase, x.ToState), x.Reason, x.CorrelationID})
	}
	return t, tl, nil
}

// phaseState prints a lifecycle position: the phase, and the state when
// it says more.
func phaseState(phase, state string) string {
	switch {
	case phase == "":
		return "-"
	case state == "" || state == phase:
		return phase
	}
	return phase + "/" + state
}

func rolloutsTable(ro *apitypes.Rollouts) table {
	t := table{head: []string{"policy_bundle_id", "domain_id", "target_version", "deadline", "nodes", "at_target", "updating", "behind", "failed", "pending"}}
	counts := func(x apitypes.RolloutCounts) []string {
		return []string{strconv.FormatUint(x.Nodes, 10), strconv.FormatUint(x.AtTarget, 10), strconv.FormatUint(x.Updating, 10),
			strconv.FormatUint(x.Behind, 10), strconv.FormatUint(x.Failed, 10), strconv.FormatUint(x.Pending, 10)}
	}
	for _, r := range ro.Rollouts {
		t.rows = append(t.rows, append([]string{r.PolicyBundleID, "(all)", r.TargetVersion, ts(r.Deadline)}, counts(r.RolloutCounts)...))
		for _, d := range r.Domains {
			t.rows = append(t.rows, append([]string{r.PolicyBundleID, d.DomainID, r.TargetVersion, ts(r.Deadline)}, counts(d.RolloutCounts)...))
		}
	}
	return t
}

// relayName prints the relay of direct connections.
func relayName(id string) string {
	if id == "" {
		return "(direct)"
	}
	return id
}

func relaysTable(rl *apitypes.Relays) table {
	t := table{head: []string{"domain_id", "relay_id", "nodes", "max_seconds_behind", "backlog_messages"}}
	for _, d := range rl.Domains {
		for _, r := range d.Relays {
			t.rows = append(t.rows, []string{d.DomainID, relayName(r.RelayID), strconv.FormatUint(r.Nodes, 10),
				strconv.FormatInt(r.MaxSecondsBehind, 10), strconv.FormatInt(r.BacklogMessages, 10)})
		}
		t.foot = append(t.foot, fmt.Sprintf("domain %s: %d nodes over %d relays, worst %ds behind, backlog %d",
			d.DomainID, d.Nodes, len(d.Relays), d.MaxSecondsBehind, d.BacklogMessages))
	}
	return t
}

func syncDebtTable(sd *apitypes.SyncDebt) table {
	t := table{head: []string{"domain_id", "relay_id", "minute", "nodes", "max_seconds_behind", "backlog_messages"}}
	for _, s := range sd.Series {
		for _, p := range s.Points {
			t.rows = append(t.rows, []string{p.DomainID, relayName(p.RelayID), p.Minute.UTC().Format(time.RFC3339),
				strconv.FormatUint(p.Nodes, 10), strconv.FormatInt(p.MaxSecondsBehind, 10), strconv.FormatInt(p.BacklogMessages, 10)})
		}
	}
	if sd.Truncated {
		t.foot = append(t.foot, "truncated at limit: narrow from=/to= or raise limit=")
	}
	return t
}

// nodeFleetRows are the fleet core's rows of a node's page.
func nodeFleetRows(d *apitypes.NodeDetail) [][]string {
	var rows [][]string
	if l := d.Lifecycle; l != nil {
		rows = append(rows, []string{"lifecycle", "phase", l.Intent, phaseState(l.Phase, l.State),
			fmt.Sprintf("since %s, %d transitions", ts(l.Since), l.Transitions)})
		for _, x := range l.Recent {
			rows = append(rows, []string{"transition", strconv.FormatUint(x.Seq, 10), phaseState(x.FromPhase, x.FromState),
				phaseState(x.ToPhase, x.ToState), x.Reason + " at " + x.At.UTC().Format(time.RFC3339)})
		}
	}
	if a := d.Authority; a != nil {
		rows = append(rows, []string{"authority", "controller", strings.Join(a.ControllerIDs, ","), a.ControllerID,
			"master_of_record " + a.MasterOfRecord + ", " + orDash(a.State)})
	}
	if s := d.SupplyChain; s != nil && s.ArtifactID != "" {
		note := orDash(s.State)
		want := "(not in registry)"
		if r := s.Registry; r != nil {
			want = r.Digest
			note += fmt.Sprintf(", signed_by %s, revoked %t, sbom %s, provenance %s", orDash(r.SignedBy), r.Revoked, orDash(r.SBOMRef), orDash(r.ProvenanceRef))
		}
		rows = append(rows, []string{"supply_chain", s.ArtifactID, want, s.ReportedDigest, note})
	}
	if r := d.Replay; r != nil {
		rows = append(rows, []string{"replay", r.ConnectivityMode, "", fmt.Sprintf("replay_required=%t", r.ReplayRequired),
			fmt.Sprintf("%ds behind, backlog %d", r.SecondsBehind, r.BacklogMessages)})
	}
	for _, f := range d.Diff {
		note := "equal"
		switch {
		case !f.Known:
			note = "unknown"
		case !f.Equal:
			note = "DIFFERS"
		}
		if f.Note != "" {
			note += " (" + f.Note + ")"
		}
		rows = append(rows, []string{"diff", f.Field, f.Desired, f.Actual, note})
	}
	for _, o := range d.Observations {
		what := o.Status
		if o.Status == apitypes.ObservationFetched {
			what = o.EventType + " by " + o.Producer + " at " + ts(o.OccurredAt) + ": " + o.Summary
		} else if o.Error != "" {
			what += ": " + o.Error
		}
		rows = append(rows, []string{"observation", o.Coordinate, "", "", what})
	}
	return rows
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
