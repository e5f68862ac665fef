// Package classify is the drift classifier of one joiner partition: it
// applies records, observations and scan markers to the partition's owner
// state in event time and emits a finding transition whenever a drift
// finding opens, is confirmed, or resolves. The rules are those of
// docs/drift-model.md; the engine never reads the wall clock, so replaying
// the same events yields the same transitions.
package classify

import (
	"math"
	"strings"
	"time"
	"unsafe"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/joiner/drift"
	"github.com/driftline/driftline/pipeline/joiner/ownerstate"
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
	emit  Emit

	// Event time, Unix ns (ownerstate.NoTime before the first event).
	maxEventTime int64
	watermark    int64
	staleness    int64
	orphanGrace  int64
	lateness     int64
	// bound caps the event time the events being applied may move the
	// watermark to (SetBound); math.MaxInt64 when none.
	bound   int64
	scratch drift.Finding
	rec     ownerstate.Record
	obs     ownerstate.Observation
	// tagBuf joins a record's tags (ownerstate.Record.Tags); tags holds
	// the split lists of the joined tags findings carry, by their joined
	// form, and recentTags the lists found last, by the joined string's
	// address (splitTags).
	tagBuf     []byte
	tags       map[string][]string
	recentTags [recentTagsSize]tagEntry
}

// recentTagsSize is the number of entries of Engine.recentTags.
const (
	recentTagsBits = 12
	recentTagsSize = 1 << recentTagsBits
)

// tagEntry is a split tag list and the address of the joined string it
// was last found for.
type tagEntry struct {
	addr uintptr
	list []string
}

// Emit receives every transition of a finding. f is reused after it
// returns. aux is a word the consumer may keep for the finding (a handle
// into its own tables, say): 0 at first, it holds what the consumer stored
// for as long as the engine's store lives, and is 0 again after a restore
// from a snapshot.
type Emit func(f *drift.Finding, aux *uint32)

// New returns an Engine over store that calls emit for every transition.
func New(opts Options, store *ownerstate.Store, emit Emit) *Engine {
	e := &Engine{opts: opts, store: store, emit: emit, maxEventTime: ownerstate.NoTime, watermark: ownerstate.NoTime,
		staleness: int64(opts.Staleness), orphanGrace: int64(opts.OrphanGrace), lateness: int64(opts.AllowedLateness), bound: math.MaxInt64}
	store.SetDeadline(e.deadline)
	return e
}

// toTime converts event time in Unix ns to a time.Time (zero for NoTime).
func toTime(ns int64) time.Time {
	if ns == ownerstate.NoTime {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// Watermark returns the partition's event-time watermark.
func (e *Engine) Watermark() time.Time { return toTime(e.watermark) }

// MaxEventTime returns the newest event time applied.
func (e *Engine) MaxEventTime() time.Time { return toTime(e.maxEventTime) }

// Store returns the engine's owner state.
func (e *Engine) Store() *ownerstate.Store { return e.store }

// ApplyRecord applies a platform record that occurred at at.
func (e *Engine) ApplyRecord(r *contract.PlatformRecord, at time.Time, correlationID string) {
	ns := at.UnixNano()
	id := e.store.Get(r.Provider, r.ProviderID, true)
	if id.HasRecord() && r.RecordVersion <= id.RecordVersion {
		e.advance(ns) // a late or replayed version changes no state
		return
	}
	e.rec = ownerstate.Record{RecordType: r.RecordType, RecordID: r.RecordID, ResourceFamily: r.ResourceFamily,
		ProductID: r.ProductID, OwningDomain: r.OwningDomain, OwningPackage: r.OwningPackage, DomainID: r.DomainID,
		ExpectedState: r.ExpectedState, ExpectedVersion: r.ExpectedVersion, Quota: r.Quota, RouteTarget: r.RouteTarget,
		RecordVersion: r.RecordVersion, Deleted: r.Deleted, Tags: e.joinTags(r.Tags)}
	e.store.SetRecord(id, &e.rec, ns, correlationID)
	e.touch(id)
	e.evaluate(id, ns, causeRecord, correlationID)
	e.advance(ns)
}

// ApplyTombstone applies a Kafka tombstone for identity key provider/id:
// the platform no longer owns the resource.
func (e *Engine) ApplyTombstone(provider, providerID string, at time.Time) {
	ns := at.UnixNano()
	id := e.store.Get(provider, providerID, false)
	if id == nil || id.Deleted() {
		e.advance(ns)
		return
	}
	e.store.SetTombstone(id, ns)
	e.touch(id)
	e.evaluate(id, ns, causeRecord, e.store.RecordCorrelation(id))
	e.advance(ns)
}

// ApplyObservation applies a provider observation that occurred at at.
func (e *Engine) ApplyObservation(o *contract.Observation, at time.Time, correlationID string) {
	ns := at.UnixNano()
	id := e.store.Get(o.Provider, o.ProviderID, true)
	if id.HasObs() && ns <= id.ObsAt {
		e.advance(ns) // older than what is applied: no state change
		return
	}
	e.obs = ownerstate.Observation{ResourceFamily: o.ResourceFamily, ObservedState: o.ObservedState,
		ObservedVersion: o.ObservedVersion, OwnerRef: o.OwnerRef, Usage: o.Usage, RouteTarget: o.RouteTarget}
	e.store.SetObs(id, &e.obs, ns, correlationID)
	id.SetDisagreeing(e.owned(id) && e.disagrees(id))
	e.touch(id)
	e.evaluate(id, ns, causeObservation, correlationID)
	e.advance(ns)
}

// ApplyScan applies a provider.scan_completed marker that occurred at at:
// every live-expecting record of the provider not observed since the scan
// started is missing at once.
//
// Only the identities the scan did not see are evaluated, and those with
// an open missing finding (a scan confirms it). For any other identity
// completing the scan changes nothing: its missing condition by scan
// needs it unobserved since the scan started, and every other condition
// changes only with events that evaluate the identity themselves (its
// record, observations, node verdicts) or with its armed deadlines.
func (e *Engine) ApplyScan(s *contract.ScanCompleted, at time.Time, correlationID string) {
	ns, started := at.UnixNano(), s.ScanStartedAt.UnixNano()
	if e.store.CompleteScan(s.Provider, started) {
		e.store.Each(s.Provider, func(id *ownerstate.Identity) {
			if id.HasObs() && id.ObsAt >= started && !e.missingOpen(id) {
				return
			}
			e.evaluate(id, ns, causeScan, correlationID)
		})
	}
	e.advance(ns)
}

// missingOpen reports whether id has an open missing finding.
func (e *Engine) missingOpen(id *ownerstate.Identity) bool {
	f := e.store.Findings(id).Of(drift.Missing)
	return f != nil && f.Status == ownerstate.Open
}

// SetNodeIdentity applies the node-agent identity verdict of node nodeID
// (identity maas/<node_id>) at event time at. heartbeat says the verdict
// comes with a newly applied heartbeat, which confirms an open
// identity_mismatch; otherwise only a change of the verdict is evaluated.
func (e *Engine) SetNodeIdentity(nodeID string, mismatch bool, at time.Time, correlationID string, heartbeat bool) {
	id := e.store.Get(contract.ProviderMAAS, nodeID, mismatch)
	if id == nil {
		return
	}
	changed := id.SetNodeMismatch(mismatch)
	switch {
	case heartbeat:
		e.evaluate(id, at.UnixNano(), causeHeartbeat, correlationID)
	case changed:
		e.evaluate(id, at.UnixNano(), causeNode, correlationID)
	}
	e.store.Maintain()
}

// SetNodeFleet applies the fleet core's verdicts on node nodeID
// (identity maas/<node_id>): authority_conflict and
// supply_chain_violation are open exactly while they are set. heartbeat
// says the verdicts come with a newly applied heartbeat, which confirms
// an open finding; otherwise only a change is evaluated.
func (e *Engine) SetNodeFleet(nodeID string, authority, supplyChain bool, at time.Time, correlationID string, heartbeat bool) {
	id := e.store.Get(contract.ProviderMAAS, nodeID, authority || supplyChain)
	if id == nil {
		return
	}
	changed := id.SetNodeFleet(authority, supplyChain)
	switch {
	case heartbeat && (changed || authority || supplyChain):
		e.evaluate(id, at.UnixNano(), causeHeartbeat, correlationID)
	case changed:
		e.evaluate(id, at.UnixNano(), causeNode, correlationID)
	}
	e.store.Maintain()
}

// SetBound caps the event time that the events applied from now on may
// move the watermark to: an event at at moves it as an event at
// min(at, bound) would, while its own state keeps at. The joiner sets it
// to each record's broker timestamp, so that no producer moves the
// partition's event time past the log's clock (docs/event-time.md). A
// zero bound removes the cap.
func (e *Engine) SetBound(bound time.Time) {
	if bound.IsZero() {
		e.bound = math.MaxInt64
		return
	}
	e.bound = bound.UnixNano()
}

// Advance moves the event clock to at (if newer) and fires the deadlines
// the watermark has passed.
func (e *Engine) Advance(at time.Time) { e.advance(at.UnixNano()) }

// AdvanceWatermark moves the watermark to w (if newer), as an event at
// w + AllowedLateness would: an idle partition follows the others.
func (e *Engine) AdvanceWatermark(w time.Time) { e.advance(w.UnixNano() + e.lateness) }

func (e *Engine) advance(at int64) {
	defer e.store.Maintain()
	at = min(at, e.bound)
	if at <= e.maxEventTime {
		return
	}
	e.maxEventTime = at
	w := at - e.lateness
	if w <= e.watermark {
		return
	}
	e.watermark = w
	e.store.Fire(w, func(id *ownerstate.Identity, _ uint8, deadline int64) {
		corr := e.store.ObsCorrelation(id)
		if corr == "" {
			corr = e.store.RecordCorrelation(id)
		}
		e.evaluate(id, deadline, causeTimer, corr)
	})
}

// owned reports whether a live platform record owns the identity: a
// record exists, is not deleted, and does not expect the resource to be
// gone.
func (e *Engine) owned(id *ownerstate.Identity) bool {
	r := e.store.Record(id)
	return r != nil && !id.Deleted() && !r.AbsentExpecting()
}

// touch keeps OrphanSince in step with the identity's state. A stretch
// of being unowned and observed live starts at the occurred_at of the
// observation that shows the resource live when it starts, whichever
// event starts it: that observation, or a record's deletion applied after
// it (never the deletion's own time), so that an observation and a
// deletion give the same orphan_since in either order.
func (e *Engine) touch(id *ownerstate.Identity) {
	o := e.store.Obs(id)
	unownedLive := !e.owned(id) && o != nil && o.Live()
	switch {
	case !unownedLive:
		id.OrphanSince = ownerstate.NoTime
	case id.OrphanSince == ownerstate.NoTime:
		id.OrphanSince = id.ObsAt
	}
}

// disagrees reports whether the observation contradicts the record's
// expected state or version.
func (e *Engine) disagrees(id *ownerstate.Identity) bool {
	r, o := e.store.Record(id), e.store.Obs(id)
	return o.ObservedState != r.ExpectedState || (r.ExpectedVersion != 0 && o.ObservedVersion != r.ExpectedVersion)
}

// lastSeenAlive returns when the identity was last observed, or, never
// observed, since when its record has expected it live (a new version
// that goes on expecting it, a new tag say, is no sign of life).
func lastSeenAlive(id *ownerstate.Identity) int64 {
	if id.HasObs() {
		return id.ObsAt
	}
	return id.LiveSince
}

// deadline is the deadline rule of the owner state's timers: the missing
// deadline follows the last sign of life, the orphan one the start of the
// unowned-and-live stretch.
func (e *Engine) deadline(id *ownerstate.Identity, kind uint8) int64 {
	if kind == ownerstate.TimerOrphan {
		return id.OrphanSince + e.orphanGrace
	}
	return lastSeenAlive(id) + e.staleness
}

// conditions computes which classifications hold for id at watermark w,
// and which deadlines are still ahead.
func (e *Engine) conditions(id *ownerstate.Identity, w int64) (open [drift.NumClasses]bool, missingAhead, orphanAhead bool) {
	owned := e.owned(id)
	r, o := e.store.Record(id), e.store.Obs(id)
	if owned && r.LiveExpecting() {
		if w >= e.deadline(id, ownerstate.TimerMissing) {
			open[drift.Missing] = true
		} else {
			missingAhead = true
		}
		// (b) The scan started after the record began expecting the
		// resource live, and did not see it.
		if s, ok := e.store.LastScan(id.Provider()); ok && id.LiveSince < s && (o == nil || id.ObsAt < s) {
			open[drift.Missing] = true
		}
	}
	if id.OrphanSince != ownerstate.NoTime {
		open[drift.Orphan] = w >= e.deadline(id, ownerstate.TimerOrphan)
		orphanAhead = !open[drift.Orphan]
	}
	if owned && o != nil {
		open[drift.Stale] = e.disagrees(id)
		if r.Quota != 0 && o.Usage != 0 {
			open[drift.Quota], _ = ExceedsQuota(e.store.Str(o.Usage), e.store.Str(r.Quota))
		}
		open[drift.Route] = r.RouteTarget != 0 && o.RouteTarget != 0 && r.RouteTarget != o.RouteTarget
		if ref := e.store.OwnerRef(id); ref != "" && ref != id.RecordID() {
			open[drift.IdentityMismatch] = true
		}
	}
	if id.NodeMismatch() {
		open[drift.IdentityMismatch] = true
	}
	open[drift.AuthorityConflict] = id.NodeAuthority()
	open[drift.SupplyChain] = id.NodeSupplyChain()
	return open, missingAhead && !open[drift.Missing], orphanAhead
}

// confirms reports whether an evaluation caused by c confirms an open
// finding of class k on id (bumping last_seen_at and retry_count).
func confirms(id *ownerstate.Identity, k drift.Class, c cause) bool {
	switch {
	case k == drift.Missing:
		return c == causeScan
	case k == drift.IdentityMismatch && id.NodeMismatch(), k == drift.AuthorityConflict, k == drift.SupplyChain:
		return c == causeHeartbeat
	}
	return c == causeObservation
}

// evaluate re-classifies id at event time at and emits the transitions.
func (e *Engine) evaluate(id *ownerstate.Identity, at int64, c cause, correlationID string) {
	open, missingAhead, orphanAhead := e.conditions(id, e.watermark)
	fs := e.store.Findings(id)
	for k := drift.Class(0); k < drift.NumClasses; k++ {
		f := fs.Of(k)
		if f == nil {
			if !open[k] {
				continue // nothing to open, nothing to resolve
			}
			f = fs.Make(k)
		}
		var transition contract.Transition
		switch {
		case open[k] && f.Status != ownerstate.Open:
			transition = contract.TransitionOpened
			if f.Status == ownerstate.Resolved {
				transition = contract.TransitionReopened
			} else {
				f.FirstSeen = at
			}
			f.Status, f.LastSeen, f.ResolvedAt, f.RetryCount = ownerstate.Open, at, ownerstate.NoTime, 0
		case open[k] && confirms(id, k, c):
			transition = contract.TransitionUpdated
			f.LastSeen = at
			f.RetryCount++
		case open[k] && c == causeRecord:
			transition = contract.TransitionUpdated // expected side changed
		case !open[k] && f.Status == ownerstate.Open:
			transition = contract.TransitionResolved
			f.Status, f.ResolvedAt = ownerstate.Resolved, at
		default:
			continue
		}
		// Versions follow event time (and grow by at least one), so a
		// transition written after a restore outranks every row written
		// for an earlier event time, whatever path led to it.
		f.Version = max(f.Version+1, uint64(at/1000))
		f.Correlation = e.store.Reintern(f.Correlation, correlationID)
		e.emitFinding(id, k, f, transition)
	}
	// Arm the deadlines still ahead; a condition already open needs none.
	e.store.Arm(id, ownerstate.TimerMissing, missingAhead)
	e.store.Arm(id, ownerstate.TimerOrphan, orphanAhead)
}

func (e *Engine) emitFinding(id *ownerstate.Identity, k drift.Class, f *ownerstate.FindingState, transition contract.Transition) {
	p := drift.PolicyOf(k)
	st := e.store
	out := &e.scratch
	*out = drift.Finding{
		EvidenceID:    drift.EvidenceID(k, id.Key()),
		CorrelationID: st.Str(f.Correlation),
		Provider:      id.Provider(),
		ProviderID:    id.ProviderID(),
		Class:         k,
		Severity:      p.Severity,
		Status:        contract.StatusOpen,
		FirstSeenAt:   toTime(f.FirstSeen),
		LastSeenAt:    toTime(f.LastSeen),
		ResolvedAt:    toTime(f.ResolvedAt),
		RetryCount:    f.RetryCount,
		Posture:       p.Posture,
		Runbook:       p.Runbook,
		Version:       f.Version,
		Transition:    transition,
	}
	if f.Status == ownerstate.Resolved {
		out.Status = contract.StatusResolved
	}
	if r := st.Record(id); r != nil {
		out.ResourceFamily, out.ProductID = st.Str(r.ResourceFamily), st.Str(r.ProductID)
		out.OwningDomain, out.OwningPackage, out.DomainID = st.Str(r.OwningDomain), st.Str(r.OwningPackage), st.Str(r.DomainID)
		out.RecordType, out.RecordID = st.Str(r.RecordType), id.RecordID()
		out.ExpectedState, out.ExpectedVersion = st.Str(r.ExpectedState), st.Str(r.ExpectedVersion)
		out.Tags = e.splitTags(st.Str(r.Tags))
	}
	if o := st.Obs(id); o != nil {
		if out.ResourceFamily == "" {
			out.ResourceFamily = st.Str(o.ResourceFamily)
		}
		out.ObservedState, out.ObservedVersion, out.ObservedAt = st.Str(o.ObservedState), st.Str(o.ObservedVersion), toTime(id.ObsAt)
	}
	if k == drift.Stale && out.Status == contract.StatusOpen {
		if id.Disagreements() >= contract.StaleReviewAfter {
			out.Posture = contract.PostureOperatorReview
		} else {
			out.NextAttemptAt = toTime(f.LastSeen + int64(e.opts.RetryInterval))
		}
	}
	out.AttentionScore = drift.AttentionScore(k, out.Status, out.RetryCount)
	e.emit(out, &f.Aux)
}

// joinTags returns tags joined by NUL, in the engine's buffer: valid
// until the next call (the store interns a copy).
func (e *Engine) joinTags(tags []string) string {
	if len(tags) == 0 {
		return ""
	}
	e.tagBuf = e.tagBuf[:0]
	for i, t := range tags {
		if i > 0 {
			e.tagBuf = append(e.tagBuf, 0)
		}
		e.tagBuf = append(e.tagBuf, t...)
	}
	if len(e.tagBuf) == 0 {
		return "" // only empty tags: none
	}
	return unsafe.String(&e.tagBuf[0], len(e.tagBuf))
}

// splitTags returns the tag list joined (shared: not to be modified).
// The joined strings are the store's interned ones, so a record's tags
// come at the same address every time: a cache by the address finds most
// lists, checked against the bytes (an address the store reuses for
// other tags after a compaction is a miss), before the map, whose hash
// of every joined string took 1% of a joiner's CPU at 10M events.
func (e *Engine) splitTags(joined string) []string {
	if joined == "" {
		return nil
	}
	addr := uintptr(unsafe.Pointer(unsafe.StringData(joined)))
	c := &e.recentTags[(uint64(addr)*0x9e3779b97f4a7c15)>>(64-recentTagsBits)]
	if c.addr == addr && joinedIs(c.list, joined) {
		return c.list
	}
	l, ok := e.tags[joined]
	if !ok {
		if e.tags == nil || len(e.tags) >= 1<<12 {
			e.tags = map[string][]string{}
		}
		l = strings.Split(joined, "\x00")
		e.tags[strings.Clone(joined)] = l
	}
	c.addr, c.list = addr, l
	return l
}

// joinedIs reports whether joined is l joined by NUL.
func joinedIs(l []string, joined string) bool {
	for i, t := range l {
		if i > 0 {
			if joined == "" || joined[0] != 0 {
				return false
			}
			joined = joined[1:]
		}
		if !strings.HasPrefix(joined, t) {
			return false
		}
		joined = joined[len(t):]
	}
	return joined == "" && len(l) > 0
}

// Touch emits the current finding of class k on identity provider/
// providerID again, with transition (an operator action changed what the
// consumer adds to its row), and reports whether the identity has such a
// finding. Its version grows as a classifier transition's would.
func (e *Engine) Touch(provider, providerID string, k drift.Class, transition contract.Transition) bool {
	id := e.store.Get(provider, providerID, false)
	if id == nil {
		return false
	}
	f := e.store.Findings(id).Of(k)
	if f == nil || f.Status == ownerstate.None {
		return false
	}
	f.Version = max(f.Version+1, uint64(max(e.watermark, 0)/1000))
	e.emitFinding(id, k, f, transition)
	return true
}

// Status returns the status of the finding of class k on identity
// provider/providerID, and false if there is none.
func (e *Engine) Status(provider, providerID string, k drift.Class) (contract.FindingStatus, bool) {
	id := e.store.Get(provider, providerID, false)
	if id == nil {
		return "", false
	}
	f := e.store.Findings(id).Of(k)
	switch {
	case f == nil || f.Status == ownerstate.None:
		return "", false
	case f.Status == ownerstate.Open:
		return contract.StatusOpen, true
	}
	return contract.StatusResolved, true
}

// Owned reports whether a live platform record owns identity provider/
// providerID, or its newest observation's owner_ref names a record:
// cleanup's guard (contract.FindingFacts.Owned).
func (e *Engine) Owned(provider, providerID string) bool {
	id := e.store.Get(provider, providerID, false)
	if id == nil {
		return false
	}
	return e.owned(id) || e.store.OwnerRef(id) != ""
}
