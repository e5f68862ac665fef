package export

import (
	"strconv"

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
var TransitionColumns = columnsOf[apitypes.Transition](
	"seq", "from_phase", "from_state", "to_phase", "to_state", "reason", "at", "correlation_id",
)

// RolloutColumns are the exported columns of a rollout per bundle and
// domain.
var RolloutColumns = columnsOf[apitypes.RolloutRow](
	"policy_bundle_id", "domain_id", "target_version", "artifact_id", "deadline", "nodes", "at_target",
	"updating", "behind", "failed", "pending",
)

// RelayColumns are the exported columns of a relay of a domain.
var RelayColumns = columnsOf[apitypes.RelayRow](
	"domain_id", "relay_id", "nodes", "max_seconds_behind", "backlog_messages",
)

// SyncDebtColumns are the exported columns of a point of the sync-debt
// timeline.
var SyncDebtColumns = columnsOf[apitypes.SyncDebtPoint](
	"domain_id", "relay_id", "minute", "nodes", "max_seconds_behind", "backlog_messages",
)
