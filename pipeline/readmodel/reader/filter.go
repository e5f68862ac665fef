package reader

import (
	"math"
	"strings"
	"time"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/readmodel"
)

// A filter's list fields each select rows whose column holds one of the
// values (OR); an empty list does not filter. The fields of one filter
// all apply (AND).

// Filter selects drift findings; the zero Filter selects every finding.
type Filter struct {
	Products         []string
	ResourceFamilies []string
	Classifications  []string
	Severities       []string
	OwningDomains    []string
	DomainIDs        []string
	Providers        []string
	// Status is string(contract.StatusOpen), StatusResolved, or StatusAll / "" for
	// both.
	Status string
	// FirstSeenBy, when set, keeps the findings first seen at or before it.
	FirstSeenBy time.Time
	// Tags keeps the findings whose record carries every one of these
	// tags (AND, unlike the lists above).
	Tags []string
}

// where renders f as SQL conditions over drift_evidence with positional
// arguments.
func (f *Filter) where() (conds []string, args []any) {
	conds, args = listWhere([]listColumn{
		{"product_id", f.Products},
		{"resource_family", f.ResourceFamilies},
		{"classification", f.Classifications},
		{"severity", f.Severities},
		{"owning_domain", f.OwningDomains},
		{"domain_id", f.DomainIDs},
		{"provider", f.Providers},
	})
	conds, args = tagsWhere(conds, args, f.Tags)
	return lifecycleWhere(conds, args, f.Status, f.FirstSeenBy)
}

// tagsWhere adds to conds and args one condition per tag: the row's tags
// hold it. has() per tag rather than hasAll of an array argument works
// alike on every ClickHouse version.
func tagsWhere(conds []string, args []any, tags []string) ([]string, []any) {
	for _, t := range tags {
		conds = append(conds, "has(tags, ?)")
		args = append(args, t)
	}
	return conds, args
}

// rangeWhere keeps the rows whose column is at or after from and before
// to, each bound when set.
func rangeWhere(conds []string, args []any, column string, from, to time.Time) ([]string, []any) {
	if !from.IsZero() {
		conds = append(conds, column+" >= toDateTime(?)")
		args = append(args, dateTimeSec(from))
	}
	if !to.IsZero() {
		conds = append(conds, column+" < toDateTime(?)")
		args = append(args, dateTimeSec(to))
	}
	return conds, args
}

// dateTimeSec returns t (set) as the Unix second a DateTime is compared
// with: ClickHouse reads a second a DateTime cannot hold as 1970-01-01 (a
// `to` in 2150 selected nothing), so a time outside takes the nearer end,
// as readmodel.Epoch stores it.
func dateTimeSec(t time.Time) int64 { return readmodel.Epoch(t).Unix() }

// dateOnly returns t's date (in t's own zone, as the caller gave it) as a
// Date is compared with: 1970-01-01 to 2149-06-06 (a uint16 of days), a
// time outside taking the nearer end.
func dateOnly(t time.Time) string {
	switch {
	case t.Before(epoch):
		t = epoch
	case t.After(maxDate):
		t = maxDate
	}
	return t.Format(time.DateOnly)
}

// epoch is where a DateTime and a Date begin.
var epoch = time.Unix(0, 0).UTC()

// maxDate is the last day a Date holds.
var maxDate = epoch.AddDate(0, 0, math.MaxUint16)

// lifecycleWhere adds to conds and args the status and first-seen
// conditions that findings and mismatches share.
func lifecycleWhere(conds []string, args []any, status string, firstSeenBy time.Time) ([]string, []any) {
	if status == string(contract.StatusOpen) || status == string(contract.StatusResolved) {
		conds = append(conds, "status = ?")
		args = append(args, status)
	}
	if !firstSeenBy.IsZero() {
		// toDateTime of a Unix second works on every ClickHouse version,
		// unlike string literals whose parsing depends on the server zone.
		conds = append(conds, "first_seen_at <= toDateTime(?)")
		args = append(args, dateTimeSec(firstSeenBy))
	}
	return conds, args
}

// NodeFilter selects nodes (node_agent_status).
type NodeFilter struct {
	NodeIDs              []string
	OwningDomains        []string
	DomainIDs            []string
	Gates                []string
	ConnectivityModes    []string
	NodeAgentStates      []string
	NodeAgentReasons     []string
	Healths              []string
	WorkloadImpacts      []string
	UpdatePaths          []string
	TerminalStreamProbes []string
	// Tags keeps the nodes whose record carries every one of these tags.
	Tags []string
}

func (f *NodeFilter) where() ([]string, []any) {
	conds, args := listWhere([]listColumn{
		{"node_id", f.NodeIDs},
		{"owning_domain", f.OwningDomains},
		{"domain_id", f.DomainIDs},
		{"gate", f.Gates},
		{"connectivity_mode", f.ConnectivityModes},
		{"node_agent_state", f.NodeAgentStates},
		{"node_agent_reason", f.NodeAgentReasons},
		{"health", f.Healths},
		{"workload_impact", f.WorkloadImpacts},
		{"update_path", f.UpdatePaths},
		{"terminal_stream_probe", f.TerminalStreamProbes},
	})
	return tagsWhere(conds, args, f.Tags)
}

// MismatchFilter selects billing mismatches (billing_mismatch).
type MismatchFilter struct {
	Kinds           []string
	Tenants         []string
	Products        []string
	Units           []string
	Currencies      []string
	MeteringSources []string
	UsageIDs        []string
	// Status is string(contract.StatusOpen), StatusResolved, or StatusAll / "" for
	// both.
	Status string
	// FirstSeenBy, when set, keeps the mismatches first seen at or before
	// it.
	FirstSeenBy time.Time
	// Days keeps the mismatches first seen on one of these UTC days.
	Days []time.Time
}

func (f *MismatchFilter) where() ([]string, []any) {
	conds, args := listWhere([]listColumn{
		{"kind", f.Kinds},
		{"tenant_id", f.Tenants},
		{"product_id", f.Products},
		{"unit_id", f.Units},
		{"currency", f.Currencies},
		{"metering_source", f.MeteringSources},
		{"usage_id", f.UsageIDs},
	})
	conds, args = lifecycleWhere(conds, args, f.Status, f.FirstSeenBy)
	if len(f.Days) > 0 {
		// Ranges of Unix seconds, not toDate, so the server's time zone
		// does not matter.
		var ors []string
		for _, d := range f.Days {
			ors = append(ors, "(first_seen_at >= toDateTime(?) AND first_seen_at < toDateTime(?))")
			args = append(args, dateTimeSec(d), dateTimeSec(d.Add(24*time.Hour)))
		}
		conds = append(conds, "("+strings.Join(ors, " OR ")+")")
	}
	return conds, args
}

// listColumn is a list filter over one column.
type listColumn struct {
	column string
	values []string
}

// listWhere renders the non-empty list filters as SQL conditions.
func listWhere(cols []listColumn) (conds []string, args []any) {
	for _, c := range cols {
		if len(c.values) == 0 {
			continue
		}
		conds = append(conds, inList(c.column, len(c.values)))
		for _, v := range c.values {
			args = append(args, v)
		}
	}
	return conds, args
}
