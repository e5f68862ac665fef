package nodeagent

import (
	"math"
	"strings"
	"time"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/joiner/intern"
	"github.com/driftline/driftline/pipeline/joiner/ownerstate"
)

// Node flags.
const (
	flagRecord    uint8 = 1 << iota // a node record was applied
	flagOwned                       // ... and owns the node (not deleted, not absent-expecting)
	flagHeartbeat                   // a heartbeat was applied
	flagReturning                   // the newest heartbeat came after a gap of AutonomousAfter or more
	flagReplay                      // the newest heartbeat has replay_required
	flagDirty                       // a Status field other than the figures changed since the last row
	flagIdentity                    // the last row had IdentityMismatch
	flagEmitted                     // a row was emitted
)

// noDeadline marks a node without an armed deadline.
const noDeadline = math.MaxInt64

// hostSeen is a host fingerprint other than the newest heartbeat's, with
// the event time (Unix ns) of its newest heartbeat.
type hostSeen struct {
	fp   string
	last int64
}

// node is what the tracker keeps per node_id; see docs/node-agent-model.md
// (memory) for its size.
type node struct {
	id     string
	host   string     // host fingerprint of the newest heartbeat
	corr   string     // correlation_id of the newest heartbeat
	others []hostSeen // other host fingerprints within the host window

	// Figures of the newest heartbeat.
	rtt, loss, bandwidth float64
	backlog, behind      int64

	recVersion  int64 // record_version of the applied node record
	lastSeen    int64 // occurred_at of the newest heartbeat, Unix ns
	emittedSeen int64 // lastSeen of the last row
	deadline    int64 // armed deadline (Unix ns), noDeadline when none
	version     uint64

	// From the node record.
	domainID, owningDomain, expected, recCert, recIngress sym
	// From the newest heartbeat.
	agent, cert, ingress, reported, path, probe, impact, health sym
	// The last emitted reason.
	reason sym

	heapIdx int32 // index in Tracker.timers, -1 when not armed
	flags   uint8
	// The last emitted derived values.
	mode  Mode
	gate  Gate
	state State
	hosts uint8
	score uint16
	// aux is the emit callback's word for the node (see Emit), in what was
	// padding.
	aux uint32
	// The fleet core (fleet.go): the node's lifecycle and recent events,
	// and the rest of its fleet state, nil until its first fleet
	// evidence.
	life  lifecycle
	ring  ring
	fleet *fleetNode
}

func (n *node) has(f uint8) bool { return n.flags&f != 0 }

func (n *node) set(f uint8, on bool) {
	if on {
		n.flags |= f
	} else {
		n.flags &^= f
	}
}

// setSym stores v in *dst and marks the node dirty when it changes.
func (n *node) setSym(dst *sym, v sym) {
	if *dst != v {
		*dst = v
		n.flags |= flagDirty
	}
}

// Tracker tracks the node-agent evidence of one partition's nodes.
// It is not safe for concurrent use, its queries included (they note
// the node they found for the next lookup).
type Tracker struct {
	opts  Options
	emit  Emit
	index nodeIndex
	// last is the node of the latest lookup (lookup): an event's path
	// finds its node several times (applying the event, its recent
	// events, its verdicts), and each index lookup among a partition's
	// tens of thousands of nodes or more hashes the id and waits for
	// memory.
	last *node
	syms *intern.Table
	// compactAt is the symbol-table size that triggers a rebuild.
	compactAt int
	timers    []*node // min-heap on node.deadline
	w         int64   // watermark, Unix ns; math.MinInt64 before the first Advance
	scratch   Status

	// thresholds in ascending order, for deadlines.
	silence [3]int64
	// fleet is the fleet core (fleet.go).
	fleet fleetState
}

// Emit receives a node's Status whenever it changes. s is reused after it
// returns. aux is a word the callback may keep for the node (a handle into
// its own tables, say): 0 at first, it holds what the callback stored for
// as long as the Tracker lives, and is 0 again after a restore from a
// snapshot.
type Emit func(s *Status, aux *uint32)

// New returns a Tracker that calls emit with a node's Status whenever its
// derived status changes (and at most every Options.Refresh for changing
// figures). New panics on options that fail Validate: they are a
// programming error of the caller, which validates its configuration
// first.
func New(opts Options, emit Emit) *Tracker {
	if err := opts.Validate(); err != nil {
		panic("BUG: " + err.Error())
	}
	t := &Tracker{
		opts:      opts,
		emit:      emit,
		syms:      newSymtab(),
		compactAt: minCompactAt,
		w:         math.MinInt64,
		silence:   [3]int64{int64(opts.DelayedAfter), int64(opts.AutonomousAfter), int64(opts.DisconnectedAfter)},
		fleet:     newFleetState(),
	}
	t.index.reset(0)
	return t
}

// Len returns the number of nodes tracked (with a record, a heartbeat or
// both).
func (t *Tracker) Len() int { return len(t.index.all) }

// Watermark returns the watermark of the last Advance.
func (t *Tracker) Watermark() time.Time {
	if t.w == math.MinInt64 {
		return time.Time{}
	}
	return time.Unix(0, t.w).UTC()
}

// lookup returns the node nodeID, nil if the tracker has none.
func (t *Tracker) lookup(nodeID string) *node {
	if n := t.last; n != nil && n.id == nodeID {
		return n
	}
	n := t.index.find(nodeID, t.index.hashID(nodeID))
	if n != nil {
		t.last = n
	}
	return n
}

// get returns the node nodeID, added if the tracker has none.
func (t *Tracker) get(nodeID string) *node {
	if n := t.last; n != nil && n.id == nodeID {
		return n
	}
	h := t.index.hashID(nodeID)
	n := t.index.find(nodeID, h)
	if n == nil {
		n = &node{id: strings.Clone(nodeID), deadline: noDeadline, heapIdx: -1}
		t.index.add(n, h)
	}
	t.last = n
	return n
}

// ApplyRecord applies a platform record that occurred at at. Only node
// records (provider maas) matter; a record_version at or below the applied
// one changes nothing.
func (t *Tracker) ApplyRecord(r *contract.PlatformRecord, at time.Time) { t.ApplyNodeRecord(r, at, "") }

// ApplyNodeRecord is ApplyRecord with the event's correlation id, which a
// lifecycle transition it causes carries.
func (t *Tracker) ApplyNodeRecord(r *contract.PlatformRecord, at time.Time, correlationID string) {
	if r.Provider != contract.ProviderMAAS {
		return
	}
	t.maybeCompact()
	n := t.get(r.ProviderID)
	if n.has(flagRecord) && r.RecordVersion <= n.recVersion {
		return
	}
	n.recVersion = r.RecordVersion
	owned := !r.Deleted && !ownerstate.AbsentExpecting(r.ExpectedState)
	if owned != n.has(flagOwned) {
		n.flags |= flagDirty
	}
	n.set(flagRecord, true)
	n.set(flagOwned, owned)
	n.setSym(&n.domainID, t.syms.Intern(r.DomainID))
	n.setSym(&n.owningDomain, t.syms.Intern(r.OwningDomain))
	n.setSym(&n.expected, t.syms.Intern(r.ExpectedAgentVersion))
	n.setSym(&n.recCert, t.syms.Intern(r.CertIssuerFingerprint))
	n.setSym(&n.recIngress, t.syms.Intern(r.IngressTrustFingerprint))
	t.applyRecordFleet(n, r)
	t.fleet.corr = correlationID
	t.settle(n, at.UnixNano(), false)
	t.fleet.corr = ""
}

// ApplyTombstone applies a Kafka tombstone on platform.records for the
// identity provider/providerID: the platform no longer has the node's
// record, so it no longer owns the node and the node is RETIRED, whatever
// the record said (an absent-expecting record did not own it either). A
// tombstone of a node whose record the tracker never applied changes
// nothing, as it would before the node's first heartbeat; nor does one
// of a record already deleted.
func (t *Tracker) ApplyTombstone(provider, providerID string, at time.Time) {
	if provider != contract.ProviderMAAS {
		return
	}
	retired := enumOf(contract.LifecycleIntents, contract.IntentRetired)
	n := t.lookup(providerID)
	if n == nil || !n.has(flagRecord) || !n.has(flagOwned) && n.fleetOf().intent == retired {
		return
	}
	n.set(flagOwned, false)
	n.flags |= flagDirty
	n.fl().intent = retired // the platform no longer has the node
	t.settle(n, at.UnixNano(), false)
}

// ApplyHeartbeat applies a node-agent heartbeat that occurred at at. The
// newest heartbeat by occurred_at is the node's evidence; an older (or
// equally old) one changes no evidence, but still counts as a sighting of
// its host fingerprint for cloned-identity detection, and of its
// controller for split-brain detection, while it is within the host
// window of the reference time (ref), so a clone or a split brain is
// found whatever order the heartbeats arrive in. A redelivered heartbeat
// changes nothing.
func (t *Tracker) ApplyHeartbeat(h *contract.Heartbeat, at time.Time, correlationID string) {
	t.maybeCompact()
	n := t.get(h.NodeID)
	atn := at.UnixNano()
	if n.has(flagHeartbeat) && atn <= n.lastSeen {
		changed := t.sight(n, h.HostFingerprint, atn)
		if h.ControllerID != "" && atn+int64(t.opts.HostWindow) > t.ref(n) && t.sightController(n.fl(), h.ControllerID, atn) {
			changed = true
		}
		if changed {
			t.settle(n, atn, false)
		}
		return
	}
	if !n.has(flagHeartbeat) {
		n.host = strings.Clone(h.HostFingerprint)
		n.flags |= flagDirty
	} else {
		n.set(flagReturning, atn-n.lastSeen >= int64(t.opts.AutonomousAfter))
		if h.HostFingerprint != n.host {
			t.promote(n, h.HostFingerprint)
		}
	}
	n.set(flagHeartbeat, true)
	if h.ReplayRequired != n.has(flagReplay) {
		n.set(flagReplay, h.ReplayRequired)
		n.flags |= flagDirty
	}
	n.setSym(&n.agent, t.syms.Intern(h.AgentVersion))
	n.setSym(&n.cert, t.syms.Intern(h.CertIssuerFingerprint))
	n.setSym(&n.ingress, t.syms.Intern(h.IngressTrustFingerprint))
	n.setSym(&n.reported, t.syms.Intern(h.NodeAgentReason))
	path := t.syms.Intern(h.UpdatePath)
	if path == symEmpty {
		path = symPathNone // update_path is optional; absent means none
	}
	n.setSym(&n.path, path)
	n.setSym(&n.probe, t.syms.Intern(h.TerminalStreamProbe))
	n.setSym(&n.impact, t.syms.Intern(h.WorkloadImpact))
	n.setSym(&n.health, t.syms.Intern(h.Health))
	n.rtt, n.loss, n.bandwidth = h.RTTMs, h.LossPct, h.BandwidthKbps
	n.backlog, n.behind = h.BacklogMessages, h.SecondsBehind
	n.lastSeen = atn
	if n.corr != correlationID {
		n.corr = strings.Clone(correlationID)
	}
	t.applyHeartbeatFleet(n, h, atn)
	t.fleet.corr = correlationID
	t.settle(n, atn, true)
	t.fleet.corr = ""
}

// promote makes fp the newest heartbeat's host; the previous one becomes
// another host seen at the previous last_seen_at.
func (t *Tracker) promote(n *node, fp string) {
	prev := hostSeen{n.host, n.lastSeen}
	for i := range n.others {
		if n.others[i].fp == fp {
			n.host = n.others[i].fp // reuse the stored copy
			n.others[i] = prev
			n.flags |= flagDirty
			return
		}
	}
	n.host = strings.Clone(fp)
	n.others = append(n.others, prev)
	n.flags |= flagDirty
}

// sight records an older heartbeat's host fingerprint and reports whether
// the set of hosts within the window changed. A sighting the host window
// ends before the reference time (ref) never counts again: it is not
// recorded.
func (t *Tracker) sight(n *node, fp string, atn int64) bool {
	if fp == n.host || atn+int64(t.opts.HostWindow) <= t.ref(n) {
		return false
	}
	for i := range n.others {
		if n.others[i].fp == fp {
			n.others[i].last = max(n.others[i].last, atn)
			return false
		}
	}
	n.others = append(n.others, hostSeen{strings.Clone(fp), atn})
	n.flags |= flagDirty
	return true
}

// ref returns the event time n's derived state is judged at (Unix ns):
// the watermark, or the newest heartbeat's occurred_at when that is later.
// A heartbeat is applied before the watermark moves past it (the joiner
// advances after each event), so judging it at the watermark alone would
// count evidence that its own event time has already left behind: a host
// last seen the host window or more before it as a clone, a split brain
// that ended before it as open, a bundle deadline it is past as not yet
// reached. The reference only grows, so what it drops never counts
// again, whatever order the heartbeats arrive in.
func (t *Tracker) ref(n *node) int64 {
	if n.has(flagHeartbeat) {
		return max(t.w, n.lastSeen)
	}
	return t.w
}

// Advance moves the watermark to w (if later) and re-derives every node
// whose silence or host-window deadline it passed. The joiner calls it
// after applying each event, with the partition's watermark.
func (t *Tracker) Advance(w time.Time) {
	wn := w.UnixNano()
	if wn <= t.w {
		return
	}
	prev := t.w
	t.w = wn
	t.fleet.byTime = true
	for len(t.timers) > 0 && t.timers[0].deadline <= wn {
		n := t.timers[0]
		t.settle(n, t.crossed(n, wn), false)
	}
	t.fleet.byTime = false
	t.advanceFleet(prev)
}

// crossed returns the latest of n's deadlines at or before w: the event
// time its current derived state began.
func (t *Tracker) crossed(n *node, w int64) int64 {
	at := int64(math.MinInt64)
	for _, d := range t.silence {
		if c := n.lastSeen + d; c <= w && c > at {
			at = c
		}
	}
	for _, o := range n.others {
		if c := o.last + int64(t.opts.HostWindow); c <= w && c > at {
			at = c
		}
	}
	if f := n.fleet; f != nil && f.ctl[1].id != "" {
		if c := f.ctl[1].last + int64(t.opts.HostWindow); c <= w && c > at {
			at = c
		}
	}
	return at
}

// settle re-derives n at the current watermark, emits a row when the
// derived status changed (or, after a heartbeat, when the figures are due
// a refresh), and re-arms n's next deadline. at is the event time of the
// cause (Unix ns).
func (t *Tracker) settle(n *node, at int64, heartbeat bool) {
	if !n.has(flagHeartbeat) {
		// A record alone is desired state, not evidence: no row, but a
		// lifecycle (at the mode the tracker holds for the node).
		fv := t.deriveFleet(n, GatePass, n.mode)
		t.settleFleet(n, &fv, at)
		return
	}
	// Forget hosts outside the window at the reference time.
	win, ref := int64(t.opts.HostWindow), t.ref(n)
	kept := n.others[:0]
	for _, o := range n.others {
		if o.last+win > ref {
			kept = append(kept, o)
		}
	}
	if len(kept) != len(n.others) {
		clear(n.others[len(kept):])
		n.flags |= flagDirty
	}
	n.others = kept
	if len(n.others) == 0 && cap(n.others) > 4 {
		n.others = nil
	}

	var silence time.Duration
	if t.w > n.lastSeen {
		silence = time.Duration(t.w - n.lastSeen)
	}
	l := link{rttMs: n.rtt, lossPct: n.loss, backlog: n.backlog, secondsBehind: n.behind, replay: n.has(flagReplay)}
	owned := n.has(flagOwned)
	e := evidence{
		cloned:          len(n.others) > 0,
		certMismatch:    owned && n.recCert != symEmpty && n.cert != n.recCert,
		ingressMismatch: owned && n.recIngress != symEmpty && n.ingress != n.recIngress,
		owned:           owned,
		versionMismatch: n.has(flagRecord) && n.expected != symEmpty && n.agent != n.expected,
		reported:        n.reported,
		health:          n.health,
		impact:          n.impact,
		probe:           n.probe,
		path:            n.path,
	}
	e.mode, e.cause = t.opts.mode(silence, n.has(flagReturning), &l)
	v := judge(&e)
	sc := uint16(score(&v, &e, &l))
	hosts := uint8(min(1+len(n.others), math.MaxUint8))
	fv := t.deriveFleet(n, v.gate, e.mode)
	t.settleFleet(n, &fv, at)

	changed := !n.has(flagEmitted) || n.has(flagDirty) || e.mode != n.mode || v.gate != n.gate ||
		v.state != n.state || v.reason != n.reason || sc != n.score || hosts != n.hosts ||
		v.identity != n.has(flagIdentity) ||
		(heartbeat && n.lastSeen-n.emittedSeen >= int64(t.opts.Refresh))
	if changed {
		n.mode, n.gate, n.state, n.reason, n.score, n.hosts = e.mode, v.gate, v.state, v.reason, sc, hosts
		n.set(flagIdentity, v.identity)
		n.flags = n.flags&^flagDirty | flagEmitted
		n.emittedSeen = n.lastSeen
		n.version = max(n.version+1, uint64(max(at/1000, 0)))
		t.fill(n, &t.scratch)
		t.scratch.At = time.Unix(0, at).UTC()
		t.emit(&t.scratch, &n.aux)
	}
	t.arm(n)
}

// fill writes n's last derived status into s (At is left to the caller).
func (t *Tracker) fill(n *node, s *Status) {
	str := t.syms.Str
	*s = Status{
		NodeID:                          n.id,
		DomainID:                        str(n.domainID),
		OwningDomain:                    str(n.owningDomain),
		State:                           n.state.String(),
		Reason:                          str(n.reason),
		Gate:                            n.gate.String(),
		UpdatePath:                      str(n.path),
		ExpectedAgentVersion:            str(n.expected),
		ObservedAgentVersion:            str(n.agent),
		CertIssuerFingerprint:           str(n.cert),
		IngressTrustFingerprint:         str(n.ingress),
		ExpectedCertIssuerFingerprint:   str(n.recCert),
		ExpectedIngressTrustFingerprint: str(n.recIngress),
		HostFingerprint:                 n.host,
		HostFingerprints:                int(n.hosts),
		TerminalStreamProbe:             str(n.probe),
		WorkloadImpact:                  str(n.impact),
		Health:                          str(n.health),
		ConnectivityMode:                n.mode.String(),
		RTTMs:                           n.rtt,
		LossPct:                         n.loss,
		BandwidthKbps:                   n.bandwidth,
		BacklogMessages:                 n.backlog,
		SecondsBehind:                   n.behind,
		ReplayRequired:                  n.has(flagReplay),
		LastSeenAt:                      time.Unix(0, n.lastSeen).UTC(),
		AttentionScore:                  float64(n.score),
		IdentityMismatch:                n.has(flagIdentity),
		CorrelationID:                   n.corr,
		Version:                         n.version,
	}
	if s.IdentityMismatch {
		s.IdentityReason = s.Reason
	}
	t.fillFleet(n, s)
}

// Lookup fills s with the current status of nodeID and reports whether
// the node has one: the derived fields of its last row, with the figures
// of its newest heartbeat (which may be up to Options.Refresh newer than
// the row's). At is zero.
func (t *Tracker) Lookup(nodeID string, s *Status) bool {
	n := t.lookup(nodeID)
	if n == nil || !n.has(flagEmitted) {
		return false
	}
	t.fill(n, s)
	return true
}

// IdentityMismatch reports whether nodeID's identity currently contradicts
// the platform registry (cloned identity, or a cert-issuer or
// ingress-trust fingerprint differing from the node record), with the
// node_agent_reason that says which.
func (t *Tracker) IdentityMismatch(nodeID string) (bool, string) {
	n := t.lookup(nodeID)
	if n == nil || !n.has(flagIdentity) {
		return false, ""
	}
	return true, t.syms.Str(n.reason)
}

// Each calls fn with the current status (as Lookup) of every node that
// has one, in no particular order. The Status is reused between calls.
func (t *Tracker) Each(fn func(*Status)) {
	var s Status
	for _, n := range t.index.all {
		if n.has(flagEmitted) {
			t.fill(n, &s)
			fn(&s)
		}
	}
}

// Rebind calls fn with the aux word (see Emit) of every node that has a
// status, and the fields of its last row that rank it for attention
// (NodeID, OwningDomain, Gate, AttentionScore and Version; the others are
// left empty: filling a whole Status cost more than placing the node), in no
// particular order, so that the emit callback can rebuild its tables after
// a restore from a snapshot, when the words are 0 again. The Status is
// reused between calls.
func (t *Tracker) Rebind(fn func(s *Status, aux *uint32)) {
	var s Status
	for _, n := range t.index.all {
		if n.has(flagEmitted) {
			s.NodeID, s.OwningDomain, s.Gate = n.id, t.syms.Str(n.owningDomain), n.gate.String()
			s.AttentionScore, s.Version = float64(n.score), n.version
			fn(&s, &n.aux)
		}
	}
}

// arm sets n's next deadline: the first silence threshold still ahead of
// the watermark, or an earlier expiry of another host.
func (t *Tracker) arm(n *node) {
	d := int64(noDeadline)
	if n.has(flagHeartbeat) {
		for _, x := range t.silence {
			if c := n.lastSeen + x; c > t.w {
				d = c
				break
			}
		}
		for _, o := range n.others {
			if c := o.last + int64(t.opts.HostWindow); c > t.w && c < d {
				d = c
			}
		}
		if n.fleet != nil {
			if _, ends := t.authority(n.fleet, t.ref(n)); ends > t.w && ends < d {
				d = ends // a split brain resolves
			}
		}
	}
	switch {
	case d == noDeadline && n.heapIdx >= 0:
		t.heapRemove(int(n.heapIdx))
	case d == noDeadline:
	case n.heapIdx >= 0:
		n.deadline = d
		t.heapFix(int(n.heapIdx))
	default:
		n.deadline = d
		n.heapIdx = int32(len(t.timers))
		t.timers = append(t.timers, n)
		t.heapUp(int(n.heapIdx))
	}
}

// maybeCompact rebuilds the symbol table from the live nodes once it has
// doubled since the last rebuild, so values no node holds any more are
// dropped.
func (t *Tracker) maybeCompact() {
	t.maybeCompactFleet()
	if t.syms.Len() < t.compactAt {
		return
	}
	old, fresh := t.syms, newSymtab()
	for _, n := range t.index.all {
		for _, p := range n.syms() {
			*p = fresh.Intern(old.Str(*p))
		}
	}
	t.syms = fresh
	t.compactAt = max(minCompactAt, 2*fresh.Len())
}
