package api

import (
	"context"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/driftline/driftline/pipeline/api/access"
	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/readmodel/reader"
)

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) error {
	if err := allowOnly(r.URL.Query()); err != nil {
		return err
	}
	ctx := r.Context()
	now := s.opts.Now().UTC().Truncate(time.Second)

	// The broker is asked while ClickHouse answers; a slow or dead broker
	// costs at most LagTimeout and never fails the status.
	var (
		wg  sync.WaitGroup
		lag apitypes.LagStatus
	)
	wg.Go(func() { lag = s.lag(ctx) })
	var bill apitypes.BillingConservation
	if p, _ := access.FromContext(ctx); p.Has(contract.RoleFinance) {
		wg.Go(func() {
			var err error
			if bill, err = s.read.Conservation(ctx); err != nil {
				bill.Error = s.hideError(r, "status_billing", err)
			}
		})
	} else {
		bill = apitypes.BillingConservation{Tenants: []apitypes.TenantConservation{}, Unbalanced: []apitypes.ConservationWindow{},
			Error: "not shown: billing needs the finance role"}
	}
	defer wg.Wait()

	progress, err := s.read.Progress(ctx)
	if err != nil {
		return err
	}
	groups, err := s.read.StatusCounts(ctx)
	if err != nil {
		return err
	}
	producers, err := s.read.ProducerRejections(ctx)
	if err != nil {
		return err
	}
	st := apitypes.Status{
		GeneratedAt: now,
		Consumers:   foldProgress(progress, now),
		Findings:    foldCounts(groups),
		Producers:   producers,
	}
	if st.Producers == nil {
		st.Producers = []apitypes.ProducerRejections{}
	}
	for _, c := range st.Consumers {
		if c.UpdatedAt != nil && (st.LastRun == nil || c.UpdatedAt.After(*st.LastRun)) {
			st.LastRun = c.UpdatedAt
		}
		if c.Watermark != nil && (st.Watermark == nil || c.Watermark.Before(*st.Watermark)) {
			st.Watermark = c.Watermark
		}
	}
	st.WatermarkAgeSeconds = ageSeconds(now, st.Watermark)
	wg.Wait()
	st.Lag, st.Billing = lag, bill
	writeJSON(w, http.StatusOK, st)
	return nil
}

func ageSeconds(now time.Time, t *time.Time) *float64 {
	if t == nil {
		return nil
	}
	a := now.Sub(*t).Seconds()
	return &a
}

// foldProgress sums consumer_progress rows per consumer. A partition that
// never advanced its watermark (zero DateTime) does not hold the consumer's
// watermark at 1970.
func foldProgress(rows []reader.Progress, now time.Time) []apitypes.ConsumerStatus {
	by := map[string]*apitypes.ConsumerStatus{}
	var names []string
	for _, p := range rows {
		c := by[p.Consumer]
		if c == nil {
			c = &apitypes.ConsumerStatus{Consumer: p.Consumer}
			by[p.Consumer] = c
			names = append(names, p.Consumer)
		}
		c.Partitions++
		c.Events += p.Events
		c.FindingsOpen += p.FindingsOpen
		if wm := p.Watermark; wm != nil {
			if c.Watermark == nil || wm.Before(*c.Watermark) {
				c.Watermark = wm
			}
			if c.MaxWatermark == nil || wm.After(*c.MaxWatermark) {
				c.MaxWatermark = wm
			}
		}
		if u := p.UpdatedAt; u != nil && (c.UpdatedAt == nil || u.After(*c.UpdatedAt)) {
			c.UpdatedAt = u
		}
	}
	sort.Strings(names)
	out := make([]apitypes.ConsumerStatus, 0, len(names))
	for _, n := range names {
		c := by[n]
		c.WatermarkAgeSeconds = ageSeconds(now, c.Watermark)
		out = append(out, *c)
	}
	return out
}

func foldCounts(groups []reader.FindingGroup) apitypes.FindingCounts {
	fc := apitypes.FindingCounts{
		OpenByClassification: map[string]uint64{},
		OpenBySeverity:       map[string]uint64{},
		OpenByPosture:        map[string]uint64{},
	}
	for _, c := range apitypes.Classifications {
		fc.OpenByClassification[c] = 0
	}
	for _, sev := range apitypes.Severities {
		fc.OpenBySeverity[sev] = 0
	}
	for _, g := range groups {
		switch g.Status {
		case string(contract.StatusOpen):
			fc.Open += g.Count
			fc.OpenByClassification[g.Classification] += g.Count
			fc.OpenBySeverity[g.Severity] += g.Count
			fc.OpenByPosture[g.Posture] += g.Count
			if g.Severity == string(contract.SeverityCritical) {
				fc.CriticalOpen += g.Count
			}
			if g.Posture == string(contract.PostureBlockAdmission) {
				fc.BlockedAdmissions += g.Count
			}
		case string(contract.StatusResolved):
			fc.Resolved += g.Count
		}
	}
	return fc
}

// lag asks the broker for the lag of every configured group.
func (s *Server) lag(ctx context.Context) apitypes.LagStatus {
	out := apitypes.LagStatus{State: apitypes.LagNotConfigured, Groups: []apitypes.GroupLag{}}
	if s.opts.Lag == nil {
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.LagTimeout)
	defer cancel()
	lags, err := s.opts.Lag.Lag(ctx, s.opts.LagGroups...)
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		s.metrics.lagErrs.Inc()
		out.State = apitypes.LagUnknown
		out.Error = "broker: " + err.Error()
		return out
	}
	out.State = apitypes.LagOK
	for _, g := range lags.Sorted() {
		gl := apitypes.GroupLag{Group: g.Group, State: g.State, Topics: []apitypes.TopicLag{}}
		if err := g.Error(); err != nil {
			gl.Error = err.Error()
			out.State = apitypes.LagUnknown
			if out.Error == "" {
				out.Error = "group " + g.Group + ": " + err.Error()
			}
			out.Groups = append(out.Groups, gl)
			continue
		}
		if len(g.Lag) == 0 {
			// No committed offsets: not started, or nothing consumed yet.
			// Zero would read as "caught up", so the lag is unknown.
			gl.Error = "no committed offsets yet"
			out.State = apitypes.LagUnknown
			if out.Error == "" {
				out.Error = "group " + g.Group + ": " + gl.Error
			}
			out.Groups = append(out.Groups, gl)
			continue
		}
		var total int64
		for _, m := range g.Lag.Sorted() {
			if n := len(gl.Topics); n == 0 || gl.Topics[n-1].Topic != m.Topic {
				gl.Topics = append(gl.Topics, apitypes.TopicLag{Topic: m.Topic})
			}
			t := &gl.Topics[len(gl.Topics)-1]
			pl := apitypes.PartitionLag{Partition: m.Partition, Committed: m.Commit.At, End: m.End.Offset, Lag: m.Lag}
			if m.Err != nil {
				pl.Error = m.Err.Error()
			}
			if m.Lag > 0 {
				t.Lag += m.Lag
				total += m.Lag
			}
			t.Partitions = append(t.Partitions, pl)
		}
		gl.Total = &total
		out.Groups = append(out.Groups, gl)
	}
	return out
}
