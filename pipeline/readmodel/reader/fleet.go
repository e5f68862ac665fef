package reader

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/contract"
)

// The fleet core's reads (CONTRACT section 8, docs/fleet-core.md): a
// node's lifecycle transitions, rollouts per policy bundle and domain,
// the relay topology, the sync-debt timeline and the artifact registry.
// rollout_status and sync_debt_minute hold one row per joiner partition;
// these reads sum the partitions' current rows.

// nonNil returns s, or an empty slice for nil, so that JSON says [].
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Timeline reads up to limit lifecycle transitions of a node, newest
// first.
func (rd *Reader) Timeline(ctx context.Context, nodeID string, limit int) ([]apitypes.Transition, error) {
	return list(ctx, rd, "node_timeline", fmt.Sprintf(`SELECT seq, from_phase, from_state, to_phase, to_state, reason, at,
	correlation_id FROM node_lifecycle_history FINAL WHERE node_id = ? ORDER BY seq DESC LIMIT %d`, limit),
		[]any{nodeID}, []apitypes.Transition{}, func(r driver.Rows) (apitypes.Transition, error) {
			var t apitypes.Transition
			err := r.Scan(&t.Seq, &t.FromPhase, &t.FromState, &t.ToPhase, &t.ToState, &t.Reason, &t.At, &t.CorrelationID)
			t.At = t.At.UTC()
			return t, err
		})
}

// RolloutFilter selects rollouts.
type RolloutFilter struct {
	DomainIDs       []string
	PolicyBundleIDs []string
}

// Rollouts reads the rollout counts per policy bundle and domain, summed
// over the joiner partitions, by bundle and domain. rollout_status keeps
// counts, not nodes, so rollouts take no tag filter.
func (rd *Reader) Rollouts(ctx context.Context, f RolloutFilter) ([]apitypes.RolloutRow, error) {
	conds, args := listWhere([]listColumn{{"domain_id", f.DomainIDs}, {"policy_bundle_id", f.PolicyBundleIDs}})
	scan := func(r driver.Rows) (apitypes.RolloutRow, error) {
		var (
			x        apitypes.RolloutRow
			deadline time.Time
		)
		err := r.Scan(&x.PolicyBundleID, &x.DomainID, &x.TargetVersion, &x.ArtifactID, &deadline,
			&x.Nodes, &x.AtTarget, &x.Updating, &x.Behind, &x.Failed, &x.Pending)
		x.Deadline = nullTime(deadline)
		return x, err
	}
	return list(ctx, rd, "rollouts", `SELECT policy_bundle_id, domain_id, any(target_version), any(artifact_id), max(deadline),
	toUInt64(sum(nodes)), toUInt64(sum(at_target)), toUInt64(sum(updating)), toUInt64(sum(behind)), toUInt64(sum(failed)), toUInt64(sum(pending))
	FROM rollout_status FINAL`+whereClause(conds)+` GROUP BY policy_bundle_id, domain_id ORDER BY policy_bundle_id, domain_id`,
		args, []apitypes.RolloutRow{}, scan)
}

// RelayFilter selects the nodes of the relay topology.
type RelayFilter struct {
	OwningDomains []string
	DomainIDs     []string
	RelayIDs      []string
	Tags          []string
}

// Relays reads, per domain and relay (” = direct), the current nodes
// that have sent a heartbeat and are not retired, their worst
// seconds_behind and their summed backlog.
func (rd *Reader) Relays(ctx context.Context, f RelayFilter) ([]apitypes.RelayRow, error) {
	conds, args := listWhere([]listColumn{{"owning_domain", f.OwningDomains}, {"domain_id", f.DomainIDs}, {"relay_id", f.RelayIDs}})
	conds, args = tagsWhere(conds, args, f.Tags)
	conds = append(conds, "last_seen_at > toDateTime(0)", "phase != ?")
	args = append(args, string(contract.PhaseRetired))
	return list(ctx, rd, "relays", `SELECT domain_id, relay_id, count(), max(seconds_behind), sum(backlog_messages)
	FROM node_agent_status FINAL`+whereClause(conds)+` GROUP BY domain_id, relay_id ORDER BY domain_id, relay_id`,
		args, []apitypes.RelayRow{}, func(r driver.Rows) (apitypes.RelayRow, error) {
			var x apitypes.RelayRow
			err := r.Scan(&x.DomainID, &x.RelayID, &x.Nodes, &x.MaxSecondsBehind, &x.BacklogMessages)
			return x, err
		})
}

// SyncDebtFilter selects the sync-debt timeline.
type SyncDebtFilter struct {
	DomainIDs []string
	RelayIDs  []string
	// From and To bound the minutes (From inclusive, To exclusive); zero
	// is unbounded.
	From, To time.Time
	// Last, when set, keeps the minutes within Last before the newest
	// minute the other conditions select: the recent timeline, whatever
	// the event time of the fleet is.
	Last time.Duration
}

// SyncDebt reads up to limit points of the sync-debt timeline per
// (domain, relay, minute), summed over the joiner partitions (max of
// max_seconds_behind), by domain, relay and minute.
func (rd *Reader) SyncDebt(ctx context.Context, f SyncDebtFilter, limit int) ([]apitypes.SyncDebtPoint, error) {
	conds, args := listWhere([]listColumn{{"domain_id", f.DomainIDs}, {"relay_id", f.RelayIDs}})
	conds, args = rangeWhere(conds, args, "minute", f.From, f.To)
	if f.Last > 0 {
		// A scalar subquery over the same conditions; in the text its
		// arguments follow the outer conditions'.
		inner := whereClause(conds)
		conds = append(slices.Clone(conds), "minute > (SELECT max(minute) FROM sync_debt_minute"+inner+") - ?")
		args = append(append(slices.Clone(args), args...), int64(f.Last/time.Second))
	}
	return list(ctx, rd, "sync_debt", fmt.Sprintf(`SELECT domain_id, relay_id, minute, toUInt64(sum(nodes)), max(max_seconds_behind),
	sum(backlog_messages) FROM sync_debt_minute FINAL%s GROUP BY domain_id, relay_id, minute
	ORDER BY domain_id, relay_id, minute LIMIT %d`, whereClause(conds), limit),
		args, []apitypes.SyncDebtPoint{}, func(r driver.Rows) (apitypes.SyncDebtPoint, error) {
			var x apitypes.SyncDebtPoint
			err := r.Scan(&x.DomainID, &x.RelayID, &x.Minute, &x.Nodes, &x.MaxSecondsBehind, &x.BacklogMessages)
			x.Minute = x.Minute.UTC()
			return x, err
		})
}

// Artifact reads the registry's entry of an artifact; ok is false when
// the registry does not hold it.
func (rd *Reader) Artifact(ctx context.Context, id string) (a apitypes.Artifact, ok bool, err error) {
	err = rd.each(ctx, "artifact", `SELECT artifact_id, artifact_version, digest, signed_by, sbom_ref, provenance_ref,
	revoked, occurred_at FROM fleet_artifacts FINAL WHERE artifact_id = ? LIMIT 1`, []any{id}, func(r driver.Rows) error {
		var (
			revoked  uint8
			occurred time.Time
		)
		ok = true
		err := r.Scan(&a.ArtifactID, &a.Version, &a.Digest, &a.SignedBy, &a.SBOMRef, &a.ProvenanceRef, &revoked, &occurred)
		a.Revoked, a.OccurredAt = revoked != 0, nullTime(occurred)
		return err
	})
	return a, ok, err
}

// NodeAuthority reads the master_of_record of each node of ids that has a
// status row.
func (rd *Reader) NodeAuthority(ctx context.Context, ids []string) (map[string]string, error) {
	out := map[string]string{}
	for start := 0; start < len(ids); start += maxKeysPerQuery {
		keys := distinctSorted(ids[start:min(len(ids), start+maxKeysPerQuery)])
		err := rd.each(ctx, "node_authority", `SELECT node_id, argMax(master_of_record, (version, updated_at))
	FROM node_agent_status WHERE `+inList("node_id", len(keys))+` GROUP BY node_id`, keyArgs(nil, keys), func(r driver.Rows) error {
			var id, level string
			err := r.Scan(&id, &level)
			out[id] = level
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
