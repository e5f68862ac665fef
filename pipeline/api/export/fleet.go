package export

import (
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/driftline/driftline/pipeline/api/apitypes"
)

func i64Col[T any](name string, get func(*T) int64) Column[T] {
	return Column[T]{
		field:  arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Int64},
		append: func(b array.Builder, r *T) { b.(*array.Int64Builder).Append(get(r)) },
		text:   func(r *T) string { return strconv.FormatInt(get(r), 10) },
	}
}

// TransitionColumns are the exported columns of a lifecycle transition.
var TransitionColumns = []Column[apitypes.Transition]{
	u64Col("seq", func(t *apitypes.Transition) uint64 { return t.Seq }),
	strCol("from_phase", func(t *apitypes.Transition) string { return t.FromPhase }),
	strCol("from_state", func(t *apitypes.Transition) string { return t.FromState }),
	strCol("to_phase", func(t *apitypes.Transition) string { return t.ToPhase }),
	strCol("to_state", func(t *apitypes.Transition) string { return t.ToState }),
	strCol("reason", func(t *apitypes.Transition) string { return t.Reason }),
	timeCol("at", func(t *apitypes.Transition) *time.Time { return ptr(t.At) }),
	strCol("correlation_id", func(t *apitypes.Transition) string { return t.CorrelationID }),
}

// RolloutColumns are the exported columns of a rollout per bundle and
// domain.
var RolloutColumns = []Column[apitypes.RolloutRow]{
	strCol("policy_bundle_id", func(r *apitypes.RolloutRow) string { return r.PolicyBundleID }),
	strCol("domain_id", func(r *apitypes.RolloutRow) string { return r.DomainID }),
	strCol("target_version", func(r *apitypes.RolloutRow) string { return r.TargetVersion }),
	strCol("artifact_id", func(r *apitypes.RolloutRow) string { return r.ArtifactID }),
	timeCol("deadline", func(r *apitypes.RolloutRow) *time.Time { return r.Deadline }),
	u64Col("nodes", func(r *apitypes.RolloutRow) uint64 { return r.Nodes }),
	u64Col("at_target", func(r *apitypes.RolloutRow) uint64 { return r.AtTarget }),
	u64Col("updating", func(r *apitypes.RolloutRow) uint64 { return r.Updating }),
	u64Col("behind", func(r *apitypes.RolloutRow) uint64 { return r.Behind }),
	u64Col("failed", func(r *apitypes.RolloutRow) uint64 { return r.Failed }),
	u64Col("pending", func(r *apitypes.RolloutRow) uint64 { return r.Pending }),
}

// RelayColumns are the exported columns of a relay of a domain.
var RelayColumns = []Column[apitypes.RelayRow]{
	strCol("domain_id", func(r *apitypes.RelayRow) string { return r.DomainID }),
	strCol("relay_id", func(r *apitypes.RelayRow) string { return r.RelayID }),
	u64Col("nodes", func(r *apitypes.RelayRow) uint64 { return r.Nodes }),
	i64Col("max_seconds_behind", func(r *apitypes.RelayRow) int64 { return r.MaxSecondsBehind }),
	i64Col("backlog_messages", func(r *apitypes.RelayRow) int64 { return r.BacklogMessages }),
}

// SyncDebtColumns are the exported columns of a point of the sync-debt
// timeline.
var SyncDebtColumns = []Column[apitypes.SyncDebtPoint]{
	strCol("domain_id", func(p *apitypes.SyncDebtPoint) string { return p.DomainID }),
	strCol("relay_id", func(p *apitypes.SyncDebtPoint) string { return p.RelayID }),
	timeCol("minute", func(p *apitypes.SyncDebtPoint) *time.Time { return ptr(p.Minute) }),
	u64Col("nodes", func(p *apitypes.SyncDebtPoint) uint64 { return p.Nodes }),
	i64Col("max_seconds_behind", func(p *apitypes.SyncDebtPoint) int64 { return p.MaxSecondsBehind }),
	i64Col("backlog_messages", func(p *apitypes.SyncDebtPoint) int64 { return p.BacklogMessages }),
}
