package api

import (
	"context"
	"strings"

	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/contract"
)

// nodeTimelineRecent is the transitions the node page shows beside the
// lifecycle; the timeline endpoint pages through the rest.
const nodeTimelineRecent = 20

// fleetPanels fills the fleet core's panels of a node page from its
// status row: lifecycle with recent transitions, authority, supply chain
// against the registry, replay progress, the desired-vs-actual diff and
// the observations timeline. Kafka never fails the page: an unread
// record shows its coordinate and why.
func (s *Server) fleetPanels(ctx context.Context, d *apitypes.NodeDetail) error {
	n := d.Node
	recent, err := s.read.Timeline(ctx, n.NodeID, nodeTimelineRecent)
	if err != nil {
		return err
	}
	d.Lifecycle = &apitypes.Lifecycle{Intent: n.LifecycleIntent, NodeKind: n.NodeKind, Phase: n.Phase, State: n.State,
		Since: n.PhaseSince, Transitions: n.Transitions, Recent: recent}
	d.Authority = &apitypes.Authority{MasterOfRecord: n.MasterOfRecord, ControllerIDs: n.ControllerIDs,
		ControllerID: n.ControllerID, State: n.Authority}
	sc := &apitypes.SupplyChain{ArtifactID: n.ArtifactID, ReportedDigest: n.ArtifactDigest, State: n.SupplyChain}
	if n.ArtifactID != "" {
		a, ok, err := s.read.Artifact(ctx, n.ArtifactID)
		if err != nil {
			return err
		}
		if ok {
			sc.Registry = &a
		}
	}
	d.SupplyChain = sc
	d.Replay = &apitypes.Replay{ConnectivityMode: n.ConnectivityMode, ReplayRequired: n.ReplayRequired,
		BacklogMessages: n.BacklogMessages, SecondsBehind: n.SecondsBehind}
	d.Diff = nodeDiff(n, sc.Registry)
	coords := n.RecentEvents[:min(len(n.RecentEvents), MaxObservations)]
	if s.opts.Events != nil {
		d.Observations = s.opts.Events.Events(ctx, coords)
	} else {
		d.Observations = unreadObservations(coords, apitypes.ObservationUnavailable, "the query service reads no Kafka (start it with -brokers)")
	}
	return nil
}

// diff compares one field; a side not reported leaves it unknown.
func diff(field, desired, actual string) apitypes.DiffField {
	known := desired != "" && actual != ""
	return apitypes.DiffField{Field: field, Desired: desired, Actual: actual, Known: known, Equal: known && desired == actual}
}

// nodeDiff is the node's desired state against its actual one, field by
// field (CONTRACT 8.3).
func nodeDiff(n *apitypes.Node, registry *apitypes.Artifact) []apitypes.DiffField {
	out := []apitypes.DiffField{diff("agent_version", n.ExpectedAgentVersion, n.ObservedAgentVersion)}
	// The record's fingerprints are not kept in the read model: the
	// node-agent evaluation's reason says whether they agree.
	for _, fp := range []struct {
		field, actual string
		reason        contract.NodeAgentReason
	}{
		{"cert_issuer_fingerprint", n.CertIssuerFingerprint, contract.NodeReasonCertIssuerMismatch},
		{"ingress_trust_fingerprint", n.IngressTrustFingerprint, contract.NodeReasonCertUntrustedByIngress},
	} {
		f := apitypes.DiffField{Field: fp.field, Actual: fp.actual, Known: fp.actual != "" && n.NodeAgentState != ""}
		f.Equal = f.Known && n.NodeAgentReason != string(fp.reason)
		f.Note = "desired: the record's fingerprint; equal unless the node-agent reason is " + string(fp.reason)
		out = append(out, f)
	}
	out = append(out, diff("version", n.TargetVersion, n.ReportedVersion))
	ctl := apitypes.DiffField{Field: "controller", Desired: strings.Join(n.ControllerIDs, ","), Actual: n.ControllerID,
		Known: len(n.ControllerIDs) > 0 && n.ControllerID != "", Note: "the heartbeat's controller must be one of the record's"}
	for _, id := range n.ControllerIDs {
		ctl.Equal = ctl.Equal || (ctl.Known && id == n.ControllerID)
	}
	out = append(out, ctl)
	want := ""
	if registry != nil {
		want = registry.Digest
	}
	out = append(out, diff("artifact_digest", want, n.ArtifactDigest))
	// The read model keeps the bundle the record names, not the one the
	// agent reports applying (the joiner checks that one against the
	// registry: unknown_policy_bundle).
	return append(out, apitypes.DiffField{Field: "policy_bundle", Desired: n.PolicyBundleID,
		Note: "the bundle the agent applies is checked by the joiner, not kept"})
}
