package api

import (
	"context"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/driftline/driftline/pipeline/contract"
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
		lag LagStatus
	)
	wg.Go(func() { lag = s.lag(ctx) })
	var bill BillingConservation
	wg.Go(func() { bill = s.billingConservation(ctx) })
	defer wg.Wait()

	progress, err := s.progress(ctx)
	if err != nil {
		return err
	}
	groups, err := s.countGroups(ctx, "status_counts", Filter{Status: StatusAll})
	if err != nil {
		return err
	}
	st := Status{
		GeneratedAt: now,
		Consumers:   foldProgress(progress, now),
		Findings:    foldCounts(groups),
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
func foldProgress(rows []progressRow, now time.Time) []ConsumerStatus {
	by := map[string]*ConsumerStatus{}
	var names []string
	for _, p := range rows {
		c := by[p.consumer]
		if c == nil {
			c = &ConsumerStatus{Consumer: p.consumer}
			by[p.consumer] = c
			names = append(names, p.consumer)
		}
		c.Partitions++
		c.Events += p.events
		c.FindingsOpen += p.findingsOpen
		if wm := nullTime(p.watermark); wm != nil {
			if c.Watermark == nil || wm.Before(*c.Watermark) {
				c.Watermark = wm
			}
			if c.MaxWatermark == nil || wm.After(*c.MaxWatermark) {
				c.MaxWatermark = wm
			}
		}
		if u := nullTime(p.updatedAt); u != nil && (c.UpdatedAt == nil || u.After(*c.UpdatedAt)) {
			c.UpdatedAt = u
		}
	}
	sort.Strings(names)
	out := make([]ConsumerStatus, 0, len(names))
	for _, n := range names {
		c := by[n]
		c.WatermarkAgeSeconds = ageSeconds(now, c.Watermark)
		out = append(out, *c)
	}
	return out
}

func foldCounts(groups []findingGroup) FindingCounts {
	fc := FindingCounts{
		OpenByClassification: map[string]uint64{},
		OpenBySeverity:       map[string]uint64{},
		OpenByPosture:        map[string]uint64{},
	}
	for _, c := range classifications {
		fc.OpenByClassification[c] = 0
	}
	for _, sev := range severities {
		fc.OpenBySeverity[sev] = 0
	}
	for _, g := range groups {
		switch g.status {
		case string(contract.StatusOpen):
			fc.Open += g.count
			fc.OpenByClassification[g.classification] += g.count
			fc.OpenBySeverity[g.severity] += g.count
			fc.OpenByPosture[g.posture] += g.count
			if g.severity == string(contract.SeverityCritical) {
				fc.CriticalOpen += g.count
			}
			if g.posture == string(contract.PostureBlockAdmission) {
				fc.BlockedAdmissions += g.count
			}
		case string(contract.StatusResolved):
			fc.Resolved += g.count
		}
	}
	return fc
}

// lag asks the broker for the lag of every configured group.
func (s *Server) lag(ctx context.Context) LagStatus {
	out := LagStatus{State: LagNotConfigured, Groups: []GroupLag{}}
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
		out.State = LagUnknown
		out.Error = "broker: " + err.Error()
		return out
	}
	out.State = LagOK
	for _, g := range lags.Sorted() {
		gl := GroupLag{Group: g.Group, State: g.State, Topics: []TopicLag{}}
		if err := g.Error(); err != nil {
			gl.Error = err.Error()
			out.State = LagUnknown
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
			out.State = LagUnknown
			if out.Error == "" {
				out.Error = "group " + g.Group + ": " + gl.Error
			}
			out.Groups = append(out.Groups, gl)
			continue
		}
		var total int64
		for _, m := range g.Lag.Sorted() {
			if n := len(gl.Topics); n == 0 || gl.Topics[n-1].Topic != m.Topic {
				gl.Topics = append(gl.Topics, TopicLag{Topic: m.Topic})
			}
			t := &gl.Topics[len(gl.Topics)-1]
			pl := PartitionLag{Partition: m.Partition, Committed: m.Commit.At, End: m.End.Offset, Lag: m.Lag}
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
