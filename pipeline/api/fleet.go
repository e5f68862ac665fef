package api

import (
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/api/export"
	"github.com/driftline/driftline/pipeline/readmodel/reader"
)

// The fleet core's endpoints (CONTRACT section 8, docs/fleet-core.md):
// a node's lifecycle timeline, rollouts per policy bundle, the relay
// topology and the sync-debt timeline. Each answers JSON, or an Arrow
// stream or CSV (Accept or format=) of its flat rows, audited as every
// export is.

// DefaultSyncDebtLimit is the points of the sync-debt timeline a request
// without limit gets: a day of minutes for one relay.
const DefaultSyncDebtLimit = 1440

// exportSlice exports rows as the listing name in format.
func exportSlice[T any](s *Server, w http.ResponseWriter, r *http.Request, format, name string, cols []export.Column[T], rows []T) error {
	return exportRows(s, w, r, format, name, cols, func(fn func(T) error) error {
		for _, v := range rows {
			if err := fn(v); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *Server) handleTimeline(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if err := checkKnown(q, "limit", "format"); err != nil {
		return err
	}
	format, limit, err := s.formatAndLimit(w, r, q)
	if err != nil {
		return err
	}
	id := r.PathValue("node_id")
	ts, err := s.read.Timeline(r.Context(), id, limit)
	if err != nil {
		return err
	}
	if format != formatJSON {
		return exportSlice(s, w, r, format, "timeline", export.TransitionColumns, ts)
	}
	writeJSON(w, http.StatusOK, apitypes.Timeline{NodeID: id, Transitions: ts, Count: len(ts)})
	return nil
}

// serveFolded answers a listing read whole: once params have filled the
// filter read uses, its rows exported as name in the negotiated format,
// or as JSON folded by fold.
func serveFolded[Row, Out any](s *Server, w http.ResponseWriter, r *http.Request, params []listParam, name string,
	cols []export.Column[Row], read func() ([]Row, error), fold func([]Row) Out) error {
	q := r.URL.Query()
	if err := parseParams(q, params, "format"); err != nil {
		return err
	}
	format, err := negotiate(r, q)
	if err != nil {
		return err
	}
	rows, err := read()
	if err != nil {
		return err
	}
	if format != formatJSON {
		return exportSlice(s, w, r, format, name, cols, rows)
	}
	writeJSON(w, http.StatusOK, fold(rows))
	return nil
}

func (s *Server) handleRollouts(w http.ResponseWriter, r *http.Request) error {
	var f reader.RolloutFilter
	return serveFolded(s, w, r, []listParam{{"domain_id", &f.DomainIDs, nil}, {"policy_bundle_id", &f.PolicyBundleIDs, nil}},
		"rollouts", export.RolloutColumns, func() ([]apitypes.RolloutRow, error) { return s.read.Rollouts(r.Context(), f) }, foldRollouts)
}

// foldRollouts sums the rows of each bundle (ordered by bundle, then
// domain) into one rollout with its domains.
func foldRollouts(rows []apitypes.RolloutRow) apitypes.Rollouts {
	return apitypes.Rollouts{Rollouts: groupRuns(rows,
		func(x apitypes.RolloutRow) string { return x.PolicyBundleID },
		func(x apitypes.RolloutRow) apitypes.Rollout {
			return apitypes.Rollout{PolicyBundleID: x.PolicyBundleID, TargetVersion: x.TargetVersion,
				ArtifactID: x.ArtifactID, Deadline: x.Deadline, Domains: []apitypes.RolloutDomain{}}
		},
		func(b *apitypes.Rollout, x apitypes.RolloutRow) {
			b.Domains = append(b.Domains, apitypes.RolloutDomain{DomainID: x.DomainID, RolloutCounts: x.RolloutCounts})
			c := &b.RolloutCounts
			c.Nodes += x.Nodes
			c.AtTarget += x.AtTarget
			c.Updating += x.Updating
			c.Behind += x.Behind
			c.Failed += x.Failed
			c.Pending += x.Pending
		})}
}

// groupRuns folds rows, ordered so that the rows of a group are
// consecutive, into one group per run of equal keys: start makes the
// group from its first row, add adds each row of the run to it. The
// answer is never nil, so an empty listing is [] in JSON.
func groupRuns[Row, Group any, K comparable](rows []Row, key func(Row) K, start func(Row) Group, add func(*Group, Row)) []Group {
	out := []Group{}
	var last K
	for _, x := range rows {
		if k := key(x); len(out) == 0 || k != last {
			out = append(out, start(x))
			last = k
		}
		add(&out[len(out)-1], x)
	}
	return out
}

func (s *Server) handleRelays(w http.ResponseWriter, r *http.Request) error {
	var f reader.RelayFilter
	return serveFolded(s, w, r, []listParam{{"owning_domain", &f.OwningDomains, nil}, {"domain_id", &f.DomainIDs, nil},
		{"relay_id", &f.RelayIDs, nil}, {"tag", &f.Tags, nil}},
		"relays", export.RelayColumns, func() ([]apitypes.RelayRow, error) { return s.read.Relays(r.Context(), f) }, foldRelays)
}

// foldRelays groups the rows (ordered by domain) by domain, each domain's
// relays worst sync debt first.
func foldRelays(rows []apitypes.RelayRow) apitypes.Relays {
	out := apitypes.Relays{Domains: groupRuns(rows,
		func(x apitypes.RelayRow) string { return x.DomainID },
		func(x apitypes.RelayRow) apitypes.RelayDomain {
			return apitypes.RelayDomain{DomainID: x.DomainID, Relays: []apitypes.RelayRow{}}
		},
		func(d *apitypes.RelayDomain, x apitypes.RelayRow) {
			d.Relays = append(d.Relays, x)
			d.Nodes += x.Nodes
			d.BacklogMessages += x.BacklogMessages
			d.MaxSecondsBehind = max(d.MaxSecondsBehind, x.MaxSecondsBehind)
		})}
	for i := range out.Domains {
		slices.SortStableFunc(out.Domains[i].Relays, func(a, b apitypes.RelayRow) int {
			if a.MaxSecondsBehind != b.MaxSecondsBehind {
				if a.MaxSecondsBehind > b.MaxSecondsBehind {
					return -1
				}
				return 1
			}
			return 0
		})
	}
	return out
}

func (s *Server) handleSyncDebt(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	var f reader.SyncDebtFilter
	if err := parseParams(q, []listParam{{"domain_id", &f.DomainIDs, nil}, {"relay_id", &f.RelayIDs, nil}}, "from", "to", "last", "limit", "format"); err != nil {
		return err
	}
	var err error
	if f.Last, err = parseDuration(q, "last"); err != nil {
		return err
	}
	if err := parseTimeRange(q, &f.From, &f.To); err != nil {
		return err
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		return &ParamError{Param: "to", Value: f.To.Format(time.RFC3339), Reason: "must be after from"}
	}
	format, err := negotiate(r, q)
	if err != nil {
		return err
	}
	limit, err := parseInt(q, "limit", DefaultSyncDebtLimit, 1, MaxLimit*10)
	if err != nil {
		return err
	}
	if format != formatJSON && len(q["limit"]) == 0 {
		w.Header().Set(HeaderExportRowCap, strconv.Itoa(s.opts.MaxExportRows))
		limit = s.opts.MaxExportRows
	}
	pts, err := s.read.SyncDebt(r.Context(), f, limit+1)
	if err != nil {
		return err
	}
	truncated := len(pts) > limit
	pts = pts[:min(limit, len(pts))]
	if format != formatJSON {
		return exportSlice(s, w, r, format, "syncdebt", export.SyncDebtColumns, pts)
	}
	series := groupRuns(pts,
		func(p apitypes.SyncDebtPoint) [2]string { return [2]string{p.DomainID, p.RelayID} },
		func(p apitypes.SyncDebtPoint) apitypes.SyncDebtSeries {
			return apitypes.SyncDebtSeries{DomainID: p.DomainID, RelayID: p.RelayID}
		},
		func(s *apitypes.SyncDebtSeries, p apitypes.SyncDebtPoint) { s.Points = append(s.Points, p) })
	writeJSON(w, http.StatusOK, apitypes.SyncDebt{Series: series, Points: len(pts), Truncated: truncated})
	return nil
}
