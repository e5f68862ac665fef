// Package classify is the drift classifier of one joiner partition: it
// applies records, observations and scan markers to the partition's owner
// state in event time and emits a finding transition whenever a drift
// finding opens, is confirmed, or resolves. The rules are those of
// docs/drift-model.md; the engine never reads the wall clock, so replaying
// the same events yields the same transitions.
package classify

import (
	"time"

	"github.com/driftline/driftline/pipeline/drift"
	"github.com/driftline/driftline/pipeline/event"
	"github.com/driftline/driftline/pipeline/ownerstate"
)

// Options are the event-time windows of the classifier.
type Options struct {
	// Staleness is how long a live-expecting record may go unobserved
	// before it is missing. Default 10m.
	Staleness time.Duration
	// OrphanGrace is how long a resource may be observed live without an
	// owner before it is an orphan. Default 5m.
	OrphanGrace time.Duration
	// AllowedLateness is how far the watermark trails the newest event
	// time. Default 30s.
	AllowedLateness time.Duration
	// RetryInterval spaces next_attempt_at of retry postures. Default 1m.
	RetryInterval time.Duration
}

// DefaultOptions returns the contract's default windows.
func DefaultOptions() Options {
	return Options{Staleness: 10 * time.Minute, OrphanGrace: 5 * time.Minute, AllowedLateness: 30 * time.Second, RetryInterval: time.Minute}
}

// cause says what triggered an evaluation.
type cause uint8

const (
	causeRecord cause = iota
	causeObservation
	causeScan
	causeTimer
	causeHeartbeat // a node-agent heartbeat of the identity
	causeNode      // node-agent evidence changed without a heartbeat
)

// Engine classifies one partition.
type Engine struct {
	opts  Options
	store *ownerstate.Store
	emit  func(*drift.Finding)

	maxEventTime time.Time
	watermark    time.Time
	scratch      drift.Finding
}

// New returns an Engine over store that calls emit for every transition.
// The Finding passed to emit is reused after emit returns.
func New(opts Options, store *ownerstate.Store, emit func(*drift.Finding)) *Engine {
	return &Engine{opts: opts, store: store, emit: emit}
}

// Watermark returns the partition's event-time watermark.
func (e *Engine) Watermark() time.Time { return e.watermark }

// MaxEventTime returns the newest event time applied.
func (e *Engine) MaxEventTime() time.Time { return e.maxEventTime }

// Store returns the engine's owner state.
func (e *Engine) Store() *ownerstate.Store { return e.store }

// ApplyRecord applies a platform record that occurred at at.
func (e *Engine) ApplyRecord(r *event.PlatformRecord, at time.Time, correlationID string) {
	id := e.store.Get(r.Provider, r.ProviderID, true)
	if id.Record != nil && r.RecordVersion <= id.Record.RecordVersion {
		e.Advance(at) // a late or replayed version changes no state
		return
	}
	id.Record, id.RecordAt, id.Deleted, id.RecordCorrelation = r, at, r.Deleted, correlationID
	e.touch(id, at)
	e.evaluate(id, at, causeRecord, correlationID)
	e.Advance(at)
}

// ApplyTombstone applies a Kafka tombstone for identity key provider/id:
// the platform no longer owns the resource.
func (e *Engine) ApplyTombstone(provider, providerID string, at time.Time) {
	id := e.store.Get(provider, providerID, false)
	if id == nil || id.Deleted {
		e.Advance(at)
		return
	}
	id.Deleted, id.RecordAt = true, at
	e.touch(id, at)
	e.evaluate(id, at, causeRecord, id.RecordCorrelation)
	e.Advance(at)
}

// ApplyObservation applies a provider observation that occurred at at.
func (e *Engine) ApplyObservation(o *event.Observation, at time.Time, correlationID string) {
	id := e.store.Get(o.Provider, o.ProviderID, true)
	if id.Obs != nil && !at.After(id.ObsAt) {
		e.Advance(at) // older than what is applied: no state change
		return
	}
	id.Obs, id.ObsAt, id.ObsCorrelation = o, at, correlationID
	if id.Owned() && disagrees(id.Record, o) {
		id.Disagreements++
	} else {
		id.Disagreements = 0
	}
	e.touch(id, at)
	e.evaluate(id, at, causeObservation, correlationID)
	e.Advance(at)
}

// ApplyScan applies a provider.scan_completed marker that occurred at at:
// every live-expecting record of the provider not observed since the scan
// started is missing at once.
func (e *Engine) ApplyScan(s *event.ScanCompleted, at time.Time, correlationID string) {
	if e.store.CompleteScan(s.Provider, s.ScanStartedAt) {
		e.store.Each(s.Provider, func(id *ownerstate.Identity) {
			e.evaluate(id, at, causeScan, correlationID)
		})
	}
	e.Advance(at)
}

// SetNodeIdentity applies the node-agent identity verdict of node nodeID
// (identity maas/<node_id>) at event time at. heartbeat says the verdict
// comes with a newly applied heartbeat, which confirms an open
// identity_mismatch; otherwise only a change of the verdict is evaluated.
func (e *Engine) SetNodeIdentity(nodeID string, mismatch bool, at time.Time, correlationID string, heartbeat bool) {
	id := e.store.Get(event.ProviderMAAS, nodeID, mismatch)
	if id == nil {
		return
	}
	changed := id.NodeMismatch != mismatch
	id.NodeMismatch = mismatch
	switch {
	case heartbeat:
		e.evaluate(id, at, causeHeartbeat, correlationID)
	case changed:
		e.evaluate(id, at, causeNode, correlationID)
	}
}

// Advance moves the event clock to at (if newer) and fires the deadlines
// the watermark has passed.
func (e *Engine) Advance(at time.Time) {
	if !at.After(e.maxEventTime) {
		return
	}
	e.maxEventTime = at
	w := at.Add(-e.opts.AllowedLateness)
	if !w.After(e.watermark) {
		return
	}
	e.watermark = w
	e.store.Fire(w, func(id *ownerstate.Identity, _ uint8, deadline time.Time) {
		corr := id.ObsCorrelation
		if corr == "" {
			corr = id.RecordCorrelation
		}
		e.evaluate(id, deadline, causeTimer, corr)
	})
}

// touch keeps OrphanSince in step with the identity's state.
func (e *Engine) touch(id *ownerstate.Identity, at time.Time) {
	unownedLive := !id.Owned() && id.Obs != nil && ownerstate.LiveExpecting(id.Obs.ObservedState)
	switch {
	case !unownedLive:
		id.OrphanSince = time.Time{}
	case id.OrphanSince.IsZero():
		id.OrphanSince = at
	}
}

// disagrees reports whether an observation contradicts the record's
// expected state or version.
func disagrees(r *event.PlatformRecord, o *event.Observation) bool {
	return o.ObservedState != r.ExpectedState || (r.ExpectedVersion != "" && o.ObservedVersion != r.ExpectedVersion)
}

// lastSeenAlive returns when the identity was last observed, or, never
// observed, when its record appeared.
func lastSeenAlive(id *ownerstate.Identity) time.Time {
	if id.Obs != nil {
		return id.ObsAt
	}
	return id.RecordAt
}

// conditions computes which classifications hold for id at watermark w.
func (e *Engine) conditions(id *ownerstate.Identity, w time.Time) (open [drift.NumClasses]bool, missingDeadline, orphanDeadline time.Time) {
	owned := id.Owned()
	if owned && ownerstate.LiveExpecting(id.Record.ExpectedState) {
		missingDeadline = lastSeenAlive(id).Add(e.opts.Staleness)
		if !w.Before(missingDeadline) {
			open[drift.Missing] = true
		}
		if s, ok := e.store.LastScan(id.Provider); ok && id.RecordAt.Before(s) && (id.Obs == nil || id.ObsAt.Before(s)) {
			open[drift.Missing] = true
		}
	}
	if !id.OrphanSince.IsZero() {
		orphanDeadline = id.OrphanSince.Add(e.opts.OrphanGrace)
		open[drift.Orphan] = !w.Before(orphanDeadline)
	}
	if owned && id.Obs != nil {
		r, o := id.Record, id.Obs
		open[drift.Stale] = disagrees(r, o)
		open[drift.Quota] = r.Quota != "" && o.Usage != "" && compareDecimal(o.Usage, r.Quota) > 0
		open[drift.Route] = r.RouteTarget != "" && o.RouteTarget != "" && r.RouteTarget != o.RouteTarget
		open[drift.IdentityMismatch] = o.OwnerRef != "" && o.OwnerRef != r.RecordID
	}
	if id.NodeMismatch {
		open[drift.IdentityMismatch] = true
	}
	return open, missingDeadline, orphanDeadline
}

// confirms reports whether an evaluation caused by c confirms an open
// finding of class k on id (bumping last_seen_at and retry_count).
func confirms(id *ownerstate.Identity, k drift.Class, c cause) bool {
	switch {
	case k == drift.Missing:
		return c == causeScan
	case k == drift.IdentityMismatch && id.NodeMismatch:
		return c == causeHeartbeat
	}
	return c == causeObservation
}

// evaluate re-classifies id at event time at and emits the transitions.
func (e *Engine) evaluate(id *ownerstate.Identity, at time.Time, c cause, correlationID string) {
	open, missingDeadline, orphanDeadline := e.conditions(id, e.watermark)
	for k := drift.Class(0); k < drift.NumClasses; k++ {
		f := &id.Findings[k]
		var transition string
		switch {
		case open[k] && f.Status != ownerstate.Open:
			transition = drift.TransitionOpened
			if f.Status == ownerstate.Resolved {
				transition = drift.TransitionReopened
			} else {
				f.FirstSeen = at
			}
			f.Status, f.LastSeen, f.ResolvedAt, f.RetryCount = ownerstate.Open, at, time.Time{}, 0
		case open[k] && confirms(id, k, c):
			transition = drift.TransitionUpdated
			f.LastSeen = at
			f.RetryCount++
		case open[k] && c == causeRecord:
			transition = drift.TransitionUpdated // expected side changed
		case !open[k] && f.Status == ownerstate.Open:
			transition = drift.TransitionResolved
			f.Status, f.ResolvedAt = ownerstate.Resolved, at
		default:
			continue
		}
		// Versions follow event time (and grow by at least one), so a
		// transition written after a restore outranks every row written
		// for an earlier event time, whatever path led to it.
		f.Version = max(f.Version+1, uint64(at.UnixMicro()))
		f.CorrelationID = correlationID
		e.emitFinding(id, k, transition)
	}
	// Arm the deadlines still ahead; a condition already open needs none.
	if open[drift.Missing] || missingDeadline.IsZero() {
		missingDeadline = time.Time{}
	}
	if open[drift.Orphan] || orphanDeadline.IsZero() {
		orphanDeadline = time.Time{}
	}
	e.store.Arm(id, ownerstate.TimerMissing, missingDeadline)
	e.store.Arm(id, ownerstate.TimerOrphan, orphanDeadline)
}

func (e *Engine) emitFinding(id *ownerstate.Identity, k drift.Class, transition string) {
	f := &id.Findings[k]
	p := drift.PolicyOf(k)
	out := &e.scratch
	*out = drift.Finding{
		EvidenceID:    drift.EvidenceID(k, id.Key),
		CorrelationID: f.CorrelationID,
		Provider:      id.Provider,
		ProviderID:    id.ProviderID,
		Class:         k,
		Severity:      p.Severity,
		Status:        drift.StatusOpen,
		FirstSeenAt:   f.FirstSeen,
		LastSeenAt:    f.LastSeen,
		ResolvedAt:    f.ResolvedAt,
		RetryCount:    f.RetryCount,
		Posture:       p.Posture,
		Runbook:       p.Runbook,
		Version:       f.Version,
		Transition:    transition,
	}
	if f.Status == ownerstate.Resolved {
		out.Status = drift.StatusResolved
	}
	if r := id.Record; r != nil {
		out.ResourceFamily, out.ProductID = r.ResourceFamily, r.ProductID
		out.OwningDomain, out.OwningPackage, out.DomainID = r.OwningDomain, r.OwningPackage, r.DomainID
		out.RecordType, out.RecordID = r.RecordType, r.RecordID
		out.ExpectedState, out.ExpectedVersion = r.ExpectedState, r.ExpectedVersion
	}
	if o := id.Obs; o != nil {
		if out.ResourceFamily == "" {
			out.ResourceFamily = o.ResourceFamily
		}
		out.ObservedState, out.ObservedVersion, out.ObservedAt = o.ObservedState, o.ObservedVersion, id.ObsAt
	}
	if k == drift.Stale && out.Status == drift.StatusOpen {
		if id.Disagreements >= drift.StaleReviewAfter {
			out.Posture = drift.PostureOperatorReview
		} else {
			out.NextAttemptAt = f.LastSeen.Add(e.opts.RetryInterval)
		}
	}
	out.AttentionScore = drift.AttentionScore(k, out.Status, out.RetryCount)
	e.emit(out)
}
