package api

import (
	"context"
	"time"

	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/readmodel/reader"
)

// The reads the handlers make, one interface per surface. A
// *reader.Reader over ClickHouse is all of them; a handler test may pass
// a fake as Options.ReadModel.

// DriftReader reads drift findings, their history and their counts.
type DriftReader interface {
	Findings(ctx context.Context, f reader.Filter, order reader.Sort, after *reader.Keyset, limit int) ([]apitypes.Finding, error)
	EachFinding(ctx context.Context, f reader.Filter, order reader.Sort, after *reader.Keyset, limit int, fn func(apitypes.Finding) error) error
	Finding(ctx context.Context, evidenceID string) (apitypes.Finding, bool, error)
	History(ctx context.Context, evidenceID string) ([]apitypes.HistoryEntry, error)
	Histories(ctx context.Context, evidenceIDs []string) (map[string][]apitypes.HistoryEntry, error)
	FindingsOf(ctx context.Context, provider, providerID string) ([]apitypes.Finding, error)
	BundleFindings(ctx context.Context, s reader.BundleSelection, limit int) ([]apitypes.Finding, error)
	Heatmap(ctx context.Context, f reader.Filter) ([]reader.FindingGroup, error)
	TopFindings(ctx context.Context, f reader.Filter, n int, perDomain bool) ([]apitypes.Finding, error)
}

// NodeReader reads node-agent evidence and gates.
type NodeReader interface {
	Nodes(ctx context.Context, f reader.NodeFilter, order reader.Sort, after *reader.Keyset, limit int) ([]apitypes.Node, error)
	Node(ctx context.Context, nodeID string) (apitypes.Node, bool, error)
	TopNodes(ctx context.Context, f reader.NodeFilter, n int, perDomain bool) ([]apitypes.Node, error)
	Connectivity(ctx context.Context, f reader.NodeFilter) ([]reader.ConnectivityCell, error)
}

// FleetReader reads the fleet core's projections (CONTRACT section 8).
type FleetReader interface {
	Timeline(ctx context.Context, nodeID string, limit int) ([]apitypes.Transition, error)
	Rollouts(ctx context.Context, f reader.RolloutFilter) ([]apitypes.RolloutRow, error)
	Relays(ctx context.Context, f reader.RelayFilter) ([]apitypes.RelayRow, error)
	SyncDebt(ctx context.Context, f reader.SyncDebtFilter, limit int) ([]apitypes.SyncDebtPoint, error)
	Artifact(ctx context.Context, artifactID string) (apitypes.Artifact, bool, error)
}

// BillingReader reads billing mismatches, rated totals and conservation.
type BillingReader interface {
	EachMismatch(ctx context.Context, f reader.MismatchFilter, order reader.Sort, after *reader.Keyset, limit int, fn func(apitypes.BillingMismatch) error) error
	BillingTotals(ctx context.Context, f reader.MismatchFilter) (apitypes.BillingTotals, error)
	Rated(ctx context.Context, q reader.RatedQuery) (apitypes.RatedTotals, error)
	ConservationWindows(ctx context.Context, f reader.WindowFilter) ([]apitypes.ConservationWindow, bool, error)
	Automation(ctx context.Context, tenantID, productID string) (apitypes.Automation, error)
}

// StatusReader reads what the status and read-your-writes waits report.
type StatusReader interface {
	Progress(ctx context.Context) ([]reader.Progress, error)
	StatusCounts(ctx context.Context) ([]reader.FindingGroup, error)
	Conservation(ctx context.Context) (apitypes.BillingConservation, error)
	LowWatermark(ctx context.Context, consumer string) (time.Time, int, error)
	ProducerRejections(ctx context.Context) ([]apitypes.ProducerRejections, error)
}

// AuditReader reads the audit log.
type AuditReader interface {
	Audit(ctx context.Context, f reader.AuditFilter) ([]apitypes.AuditEntry, bool, error)
}

// ReadModel is every read of the server, and the health check.
type ReadModel interface {
	DriftReader
	NodeReader
	FleetReader
	BillingReader
	StatusReader
	AuditReader
	Ping(ctx context.Context) error
}

var _ ReadModel = (*reader.Reader)(nil)
