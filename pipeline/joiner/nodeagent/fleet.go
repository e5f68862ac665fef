package nodeagent

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/driftline/driftline/pipeline/contract"
)

// The fleet core (CONTRACT section 8, docs/fleet-core.md): the registry
// of artifacts and policy bundles, and per node its authority and supply
// chain verdicts, lifecycle phase and state with their transitions, its
// rollout category, its relay and sync debt, the record's tags and the
// ring of its recent events. Everything is derived in event time from the
// events the tracker applies, so a replay yields the same transitions,
// rollout counts and sync-debt rows.

// RecentEvents is the length of a node's ring of recent events.
const RecentEvents = 8

// artifactEntry is the registry's newest fleet.artifact of an id.
type artifactEntry struct {
	a  contract.Artifact
	at int64 // occurred_at, Unix ns
}

// bundleEntry is the registry's newest fleet.policy_bundle of an id.
type bundleEntry struct {
	b        contract.PolicyBundle
	at       int64 // occurred_at, Unix ns
	deadline int64 // b.Deadline, Unix ns
	due      bool  // the watermark has reached the deadline
}

// ctlSeen is a controller a node obeyed, with its last heartbeat.
type ctlSeen struct {
	id   string
	last int64
}

// enum is a value of a contract list as 1 + its index (0: none), so a
// node keeps each derived value in a byte.
type enum uint8

func enumOf[T comparable](list []T, v T) enum {
	for i, x := range list {
		if x == v {
			return enum(i + 1)
		}
	}
	return 0
}

func valueOf[T any](list []T, e enum) T {
	var zero T
	if e == 0 || int(e) > len(list) {
		return zero
	}
	return list[e-1]
}

// lifecycle is a node's lifecycle as last evaluated; every node has one.
type lifecycle struct {
	phase enum // contract.Phases
	state enum // contract.LifecycleStates
	seq   uint32
	since int64 // at of the last transition, Unix ns
}

// ring is a node's recent events: stream<<56 | offset each, newest at
// h.
type ring struct {
	ev   [RecentEvents]uint64
	n, h uint8
}

// add makes offset of stream the newest event.
func (r *ring) add(stream uint8, offset int64) {
	r.h = (r.h + 1) % RecentEvents
	r.ev[r.h] = uint64(stream)<<56 | uint64(offset)&(1<<56-1)
	if r.n < RecentEvents {
		r.n++
	}
}

// fleetNode is the fleet core's state of one node beyond its lifecycle
// and ring, allocated with its first fleet evidence (a record or
// heartbeat naming fleet fields or tags, an operator quarantine): see
// docs/fleet-core.md (memory).
type fleetNode struct {
	// From the node record.
	controllers []string
	tags        []string
	bundle      string // desired.policy_bundle_id
	target      string // desired.target_version
	intent      enum   // contract.LifecycleIntents; RETIRED for a deleted record or a tombstone
	kind        enum   // contract.NodeKinds
	master      enum   // contract.MastersOfRecord

	// Derived, as last evaluated.
	authority enum // contract.AuthorityStates
	supply    enum // contract.SupplyChainStates
	rollout   enum // contract.RolloutCategories

	// operatorQuarantine is set by quarantine_node until release_node.
	operatorQuarantine bool

	// From the newest heartbeat.
	reported, artifactID, artifactDigest, controller, relay string
	uptime                                                  int64

	// The two distinct controllers obeyed most recently by occurred_at,
	// each with its newest heartbeat, newest first (sightController).
	ctl [2]ctlSeen

	// counted is the bundle the node counts for in the rollout ('' for
	// none), in domain countedIn.
	counted   string
	countedIn string
}

// rolloutKey is a (policy bundle, domain) of a partition's rollout counts.
type rolloutKey struct{ bundle, domain string }

// rolloutCounts are the counts of one rolloutKey.
type rolloutCounts struct {
	n       [5]uint32 // by category, in contract.RolloutCategories order
	version uint64
	dirty   bool // changed since the last row
	written bool // a row was emitted
}

// Transition is one lifecycle transition of a node
// (node_lifecycle_history).
type Transition struct {
	NodeID        string
	Seq           uint64
	DomainID      string
	FromPhase     contract.Phase
	FromState     contract.LifecycleState
	ToPhase       contract.Phase
	ToState       contract.LifecycleState
	Reason        contract.LifecycleRule
	At            time.Time
	CorrelationID string
}

// RolloutRow is the current rollout counts of a policy bundle in a
// domain, over the partition's nodes (rollout_status).
type RolloutRow struct {
	PolicyBundleID string
	DomainID       string
	TargetVersion  string
	ArtifactID     string
	Deadline       time.Time
	Nodes          uint32
	AtTarget       uint32
	Updating       uint32
	Behind         uint32
	Failed         uint32
	Pending        uint32
	AsOf           time.Time // the watermark when the counts were taken
	Version        uint64
}

// SyncDebtRow is the sync debt of a domain's nodes behind one relay (”
// for direct) in one minute of event time (sync_debt_minute).
type SyncDebtRow struct {
	DomainID         string
	RelayID          string
	Minute           time.Time
	Nodes            uint32
	MaxSecondsBehind int64
	BacklogMessages  int64
}

// FleetOutput receives what the fleet core derives besides the status
// rows. Any callback may be nil. Rows passed are reused after the
// callback returns.
type FleetOutput struct {
	Transition func(*Transition)
	SyncDebt   func(*SyncDebtRow)
	// Artifact and Bundle receive each registry entry applied.
	Artifact func(a *contract.Artifact, at time.Time)
	Bundle   func(b *contract.PolicyBundle, at time.Time)
}

// registry is the partition's registry of artifacts and policy bundles.
type registry struct {
	artifacts map[string]*artifactEntry
	bundles   map[string]*bundleEntry
}

// fleetState is the tracker's fleet core beside its nodes.
type fleetState struct {
	reg      registry
	out      FleetOutput
	pool     map[string]string   // interned fleet strings (versions, ids)
	lists    map[string][]string // interned lists (tags, controller ids), by their joined values
	rollouts map[rolloutKey]*rolloutCounts
	// minute is the start (Unix ns) of the event-time minute the
	// watermark is in; math.MinInt64 before the first Advance.
	minute int64
	// nextDue is the earliest deadline of a bundle the watermark has not
	// reached (math.MaxInt64: none).
	nextDue int64
	// compactAt is the size of pool and lists that triggers a rebuild
	// from what the nodes and the registry hold.
	compactAt int
	// topics name the ring's streams; partition is the tracker's.
	topics    []string
	partition int32
	// cause of the evaluation under way: the correlation id of the event
	// applied, and whether the watermark alone changed the node.
	corr   string
	byTime bool
}

func newFleetState() fleetState {
	return fleetState{
		reg:       registry{artifacts: map[string]*artifactEntry{}, bundles: map[string]*bundleEntry{}},
		pool:      map[string]string{},
		lists:     map[string][]string{},
		rollouts:  map[rolloutKey]*rolloutCounts{},
		minute:    math.MinInt64,
		nextDue:   math.MaxInt64,
		compactAt: minFleetCompactAt,
	}
}

// minFleetCompactAt is the smallest pool size that triggers a rebuild.
const minFleetCompactAt = 4096

// maybeCompactFleet rebuilds the pool of fleet strings and lists from
// what the nodes and the registry hold once it has doubled since the last
// rebuild, so a producer sending a new version or digest with each
// heartbeat cannot grow it without bound. The strings kept are the same
// (nodes keep theirs): only the pool's entries go.
func (t *Tracker) maybeCompactFleet() {
	fs := &t.fleet
	if len(fs.pool)+len(fs.lists) < fs.compactAt {
		return
	}
	pool, lists := map[string]string{}, map[string][]string{}
	keep := func(ss ...string) {
		for _, s := range ss {
			if s != "" {
				pool[s] = s
			}
		}
	}
	keepList := func(l []string) {
		if len(l) > 0 {
			keep(l...)
			lists[strings.Join(l, "\x00")] = l
		}
	}
	for _, n := range t.index.all {
		if f := n.fleet; f != nil {
			keepList(f.controllers)
			keepList(f.tags)
			keep(f.bundle, f.target, f.reported, f.artifactID, f.artifactDigest, f.controller, f.relay, f.ctl[0].id, f.ctl[1].id, f.counted, f.countedIn)
		}
	}
	for id, e := range fs.reg.artifacts {
		keep(id, e.a.ArtifactID, e.a.Version, e.a.Digest, e.a.SignedBy)
	}
	for id, e := range fs.reg.bundles {
		keep(id, e.b.PolicyBundleID, e.b.TargetVersion, e.b.ArtifactID)
		keepList(e.b.Domains)
	}
	for k := range fs.rollouts {
		keep(k.bundle, k.domain)
	}
	fs.pool, fs.lists = pool, lists
	fs.compactAt = max(minFleetCompactAt, 2*(len(pool)+len(lists)))
}

// SetFleetOutput sets where the fleet core's rows go.
func (t *Tracker) SetFleetOutput(out FleetOutput) { t.fleet.out = out }

// SetCoordinates names the streams of the ring's events (RecordEvent's
// stream indexes) and the tracker's partition.
func (t *Tracker) SetCoordinates(topics []string, partition int32) {
	t.fleet.topics, t.fleet.partition = slices.Clone(topics), partition
}

// str interns s in the fleet pool (” stays ”).
func (t *Tracker) str(s string) string {
	if s == "" {
		return ""
	}
	if v, ok := t.fleet.pool[s]; ok {
		return v
	}
	v := strings.Clone(s)
	t.fleet.pool[v] = v
	return v
}

// strs interns a list (equal lists share one array); an empty list is
// nil.
func (t *Tracker) strs(l []string) []string {
	if len(l) == 0 {
		return nil
	}
	key := strings.Join(l, "\x00")
	if v, ok := t.fleet.lists[key]; ok {
		return v
	}
	out := make([]string, len(l))
	for i, s := range l {
		out[i] = t.str(s)
	}
	t.fleet.lists[strings.Clone(key)] = out
	return out
}

// noFleet stands for the fleet state of a node that has none.
var noFleet fleetNode

// fleetOf returns n's fleet state, or noFleet (read only).
func (n *node) fleetOf() *fleetNode {
	if n.fleet == nil {
		return &noFleet
	}
	return n.fleet
}

func (n *node) fl() *fleetNode {
	if n.fleet == nil {
		n.fleet = &fleetNode{}
	}
	return n.fleet
}

// CheckHeartbeat returns the registry reason a heartbeat is not applied
// for: it names a policy bundle the registry does not have.
func (t *Tracker) CheckHeartbeat(h *contract.Heartbeat) *contract.ValidationError {
	if h.PolicyBundleID != "" && t.fleet.reg.bundles[h.PolicyBundleID] == nil {
		return &contract.ValidationError{Reason: contract.ReasonUnknownPolicyBundle, Field: "payload.policy_bundle_id",
			Detail: "policy bundle " + strconv.Quote(h.PolicyBundleID) + " is not in the registry"}
	}
	return nil
}

// ApplyArtifact applies a fleet.artifact that occurred at at: the newest
// per artifact_id by occurred_at is kept (an older or equally old one
// changes nothing). A change of the revoked flag or the digest
// re-evaluates the nodes whose last heartbeat runs the artifact.
func (t *Tracker) ApplyArtifact(a *contract.Artifact, at time.Time, correlationID string) {
	atn := at.UnixNano()
	e := t.fleet.reg.artifacts[a.ArtifactID]
	if e != nil && atn <= e.at {
		return
	}
	changed := e == nil || e.a.Revoked != a.Revoked || e.a.Digest != a.Digest
	if e == nil {
		e = &artifactEntry{}
		t.fleet.reg.artifacts[t.str(a.ArtifactID)] = e
	}
	e.at = atn
	e.a = contract.Artifact{ArtifactID: t.str(a.ArtifactID), Version: t.str(a.Version), Digest: t.str(a.Digest),
		SignedBy: t.str(a.SignedBy), SBOMRef: strings.Clone(a.SBOMRef), ProvenanceRef: strings.Clone(a.ProvenanceRef), Revoked: a.Revoked}
	if t.fleet.out.Artifact != nil {
		t.fleet.out.Artifact(&e.a, at)
	}
	if changed {
		t.fleet.corr = correlationID
		for _, n := range t.sortedNodes(func(n *node) bool { return n.fleet != nil && n.fleet.artifactID == a.ArtifactID }) {
			t.settle(n, atn, false)
		}
		t.fleet.corr = ""
	}
}

// ApplyBundle applies a fleet.policy_bundle that occurred at at, or
// returns reason unknown_artifact when it names an artifact the registry
// does not have (it is then not applied). The newest per id by
// occurred_at is kept; the nodes that desire the bundle are re-evaluated.
func (t *Tracker) ApplyBundle(b *contract.PolicyBundle, at time.Time, correlationID string) *contract.ValidationError {
	if t.fleet.reg.artifacts[b.ArtifactID] == nil {
		return &contract.ValidationError{Reason: contract.ReasonUnknownArtifact, Field: "payload.artifact_id",
			Detail: "artifact " + strconv.Quote(b.ArtifactID) + " is not in the registry"}
	}
	atn := at.UnixNano()
	e := t.fleet.reg.bundles[b.PolicyBundleID]
	if e != nil && atn <= e.at {
		return nil
	}
	if e == nil {
		e = &bundleEntry{}
		t.fleet.reg.bundles[t.str(b.PolicyBundleID)] = e
	}
	e.at = atn
	e.b = contract.PolicyBundle{PolicyBundleID: t.str(b.PolicyBundleID), TargetVersion: t.str(b.TargetVersion),
		ArtifactID: t.str(b.ArtifactID), Domains: t.strs(b.Domains), Deadline: b.Deadline.UTC()}
	e.deadline = b.Deadline.UnixNano()
	e.due = t.w >= e.deadline
	if !e.due {
		t.fleet.nextDue = min(t.fleet.nextDue, e.deadline)
	}
	// The bundle's rollout rows carry its target and deadline: rewrite
	// them.
	for k, c := range t.fleet.rollouts {
		if k.bundle == b.PolicyBundleID {
			c.dirty = true
		}
	}
	if t.fleet.out.Bundle != nil {
		t.fleet.out.Bundle(&e.b, at)
	}
	t.fleet.corr = correlationID
	for _, n := range t.sortedNodes(func(n *node) bool { return n.fleet != nil && n.fleet.bundle == b.PolicyBundleID }) {
		t.settle(n, atn, false)
	}
	t.fleet.corr = ""
	return nil
}

// SetOperatorQuarantine applies an operator's quarantine_node (on) or
// release_node (off) of nodeID at event time at (lifecycle rule 3).
func (t *Tracker) SetOperatorQuarantine(nodeID string, on bool, at time.Time, correlationID string) {
	n := t.lookup(nodeID)
	if n == nil {
		if !on {
			return
		}
		n = t.get(nodeID)
	}
	f := n.fl()
	if f.operatorQuarantine == on {
		return
	}
	f.operatorQuarantine = on
	n.flags |= flagDirty
	t.fleet.corr = correlationID
	t.settle(n, at.UnixNano(), false)
	t.fleet.corr = ""
}

// OperatorQuarantined reports whether an operator quarantined nodeID and
// has not released it.
func (t *Tracker) OperatorQuarantined(nodeID string) bool {
	n := t.lookup(nodeID)
	return n != nil && n.fleet != nil && n.fleet.operatorQuarantine
}

// RecordEvent adds an event that touched nodeID (its record, an
// observation of it, a heartbeat) to the node's ring: stream indexes the
// topics of SetCoordinates. The ring is written with the node's next row.
func (t *Tracker) RecordEvent(nodeID string, stream uint8, offset int64) {
	n := t.lookup(nodeID)
	if n == nil {
		return // a node the tracker does not know has no row to show it
	}
	n.ring.add(stream, offset)
}

// Recent is a node's ring of recent events as a status row carries it:
// the coordinates are formatted only when the row is written (Strings),
// not for each row a round overwrites.
type Recent struct {
	ring      ring
	topics    []string // shared with the tracker
	partition int32
}

// Strings returns the events as <topic>/<partition>/<offset>, newest
// first (nil for none).
func (r *Recent) Strings() []string {
	if r.ring.n == 0 {
		return nil
	}
	out := make([]string, 0, r.ring.n)
	p := strconv.Itoa(int(r.partition))
	for i := range int(r.ring.n) {
		c := r.ring.ev[(int(r.ring.h)-i+RecentEvents)%RecentEvents]
		stream := int(c >> 56)
		topic := strconv.Itoa(stream)
		if stream < len(r.topics) {
			topic = r.topics[stream]
		}
		out = append(out, topic+"/"+p+"/"+strconv.FormatInt(int64(c&(1<<56-1)), 10))
	}
	return out
}

// applyRecordFleet keeps the fleet fields of a node record.
func (t *Tracker) applyRecordFleet(n *node, r *contract.PlatformRecord) {
	intent := contract.LifecycleIntent(r.LifecycleIntent)
	if r.Deleted {
		intent = contract.IntentRetired
	}
	if n.fleet == nil && intent == "" && r.NodeKind == "" && r.Authority.MasterOfRecord == "" && len(r.Authority.ControllerIDs) == 0 &&
		r.Desired.PolicyBundleID == "" && len(r.Tags) == 0 {
		return // nothing of the fleet core: the node's state stays small
	}
	f := n.fl()
	before := *f
	f.intent = enumOf(contract.LifecycleIntents, intent)
	f.kind = enumOf(contract.NodeKinds, contract.NodeKind(r.NodeKind))
	f.master = enumOf(contract.MastersOfRecord, contract.MasterOfRecord(r.Authority.MasterOfRecord))
	f.controllers = t.strs(r.Authority.ControllerIDs)
	f.bundle, f.target = t.str(r.Desired.PolicyBundleID), t.str(r.Desired.TargetVersion)
	f.tags = t.strs(r.Tags)
	if before.intent != f.intent || before.kind != f.kind || before.master != f.master || before.bundle != f.bundle || before.target != f.target ||
		!slices.Equal(before.controllers, f.controllers) || !slices.Equal(before.tags, f.tags) {
		n.flags |= flagDirty
	}
}

// applyHeartbeatFleet keeps the fleet fields of the newest heartbeat and
// its controller evidence (an older heartbeat's is ApplyHeartbeat's).
func (t *Tracker) applyHeartbeatFleet(n *node, h *contract.Heartbeat, atn int64) {
	if n.fleet == nil && h.ReportedVersion == "" && h.ArtifactID == "" && h.ArtifactDigest == "" && h.ControllerID == "" &&
		h.RelayID == "" && h.UptimeS == 0 {
		return
	}
	f := n.fl()
	if f.reported != h.ReportedVersion || f.artifactID != h.ArtifactID || f.artifactDigest != h.ArtifactDigest ||
		f.controller != h.ControllerID || f.relay != h.RelayID {
		n.flags |= flagDirty
	}
	f.reported, f.artifactID, f.artifactDigest = t.str(h.ReportedVersion), t.str(h.ArtifactID), t.str(h.ArtifactDigest)
	f.controller, f.relay, f.uptime = t.str(h.ControllerID), t.str(h.RelayID), h.UptimeS
	if h.ControllerID != "" {
		t.sightController(f, h.ControllerID, atn)
	}
}

// sightController records that the node obeyed controller id at atn,
// from the newest heartbeat or an older one, and reports whether the
// controllers kept changed. ctl keeps the two distinct controllers with
// the newest sightings, each at its newest, newest first: a controller
// older than both is forgotten, and since sightings only grow it could
// never be one of the two again. So the split brain found is the same
// whatever order the heartbeats arrive in.
func (t *Tracker) sightController(f *fleetNode, id string, atn int64) bool {
	switch {
	case f.ctl[0].id == "":
		f.ctl[0] = ctlSeen{t.str(id), atn}
		return true
	case f.ctl[0].id == id:
		if atn <= f.ctl[0].last {
			return false
		}
		f.ctl[0].last = atn
		return true
	case f.ctl[1].id == id:
		if atn <= f.ctl[1].last {
			return false
		}
		f.ctl[1].last = atn
	case f.ctl[1].id != "" && atn <= f.ctl[1].last:
		return false
	default:
		f.ctl[1] = ctlSeen{t.str(id), atn}
	}
	if f.ctl[1].last > f.ctl[0].last {
		f.ctl[0], f.ctl[1] = f.ctl[1], f.ctl[0]
	}
	return true
}

// authority derives the authority state at the reference time w (ref),
// and the event time a split brain resolves (0 when none is open).
func (t *Tracker) authority(f *fleetNode, w int64) (contract.AuthorityState, int64) {
	if f.ctl[0].id == "" {
		return contract.AuthorityNone, 0
	}
	// ctl is kept newest first (sightController), so ctl[1], the other
	// controller, is the older one.
	win := int64(t.opts.HostWindow)
	a, b := f.ctl[0], f.ctl[1]
	if b.id != "" && a.last-b.last < win && b.last+win > w {
		return contract.AuthoritySplitBrain, b.last + win
	}
	if f.controller != "" && len(f.controllers) > 0 && !slices.Contains(f.controllers, f.controller) {
		return contract.AuthorityNotListed, 0
	}
	return contract.AuthorityOK, 0
}

// supplyChain derives the supply-chain state of the newest heartbeat's
// artifact against the registry.
func (t *Tracker) supplyChain(f *fleetNode) contract.SupplyChainState {
	if f.artifactID == "" {
		return contract.SupplyChainNone
	}
	e := t.fleet.reg.artifacts[f.artifactID]
	switch {
	case e == nil:
		return contract.SupplyChainUnknown
	case e.a.Revoked:
		return contract.SupplyChainRevoked
	case f.artifactDigest != "" && f.artifactDigest != e.a.Digest:
		return contract.SupplyChainDigestMismatch
	}
	return contract.SupplyChainOK
}

// fleetVerdicts are the fleet core's derivations for one node.
type fleetVerdicts struct {
	authority contract.AuthorityState
	supply    contract.SupplyChainState
	phase     contract.Phase
	state     contract.LifecycleState
	rule      contract.LifecycleRule
	rollout   contract.RolloutCategory
	counted   rolloutKey
}

// updating is lifecycle rule 7's test: the node's record names a known
// bundle, the node reports a version other than the bundle's target, and
// an update is under way by self update or recovery enrollment.
func (t *Tracker) updating(n *node, f *fleetNode) (*bundleEntry, bool) {
	if f.bundle == "" {
		return nil, false
	}
	e := t.fleet.reg.bundles[f.bundle]
	if e == nil {
		return nil, false
	}
	return e, f.reported != "" && f.reported != e.b.TargetVersion && (n.path == symPathSelfUpdate || n.path == symPathRecoveryEnrollment)
}

func authorityOpen(a contract.AuthorityState) bool {
	return a == contract.AuthorityNotListed || a == contract.AuthoritySplitBrain
}

func supplyOpen(s contract.SupplyChainState) bool {
	return s == contract.SupplyChainUnknown || s == contract.SupplyChainRevoked || s == contract.SupplyChainDigestMismatch
}

// deriveFleet evaluates the fleet core's rules for n at its reference
// time (ref), given the gate and connectivity mode the node-agent rules
// derived (the first lifecycle rule that matches wins;
// docs/fleet-core.md).
func (t *Tracker) deriveFleet(n *node, gate Gate, mode Mode) fleetVerdicts {
	f := n.fleetOf()
	ref := t.ref(n)
	var v fleetVerdicts
	v.authority, _ = t.authority(f, ref)
	v.supply = t.supplyChain(f)
	bundle, updating := t.updating(n, f)
	degraded := n.health == symHealthDegraded || n.health == symHealthFailed
	intent := valueOf(contract.LifecycleIntents, f.intent)
	if intent == "" {
		intent = contract.IntentActive // no record yet, or none declared
	}
	switch {
	case intent == contract.IntentRetired:
		v.phase, v.state, v.rule = contract.PhaseRetired, contract.StateRetired, contract.RuleRetired
	case intent == contract.IntentDecommissioning:
		v.phase, v.state, v.rule = contract.PhaseDecommissioning, contract.StateDecommissioning, contract.RuleDecommissioning
	case f.operatorQuarantine:
		v.phase, v.state, v.rule = contract.PhaseQuarantined, contract.StateOperatorQuarantine, contract.RuleOperatorQuarantine
	case supplyOpen(v.supply):
		v.phase, v.state, v.rule = contract.PhaseQuarantined, contract.StateSupplyChain, contract.RuleSupplyChain
	case authorityOpen(v.authority):
		v.phase, v.state, v.rule = contract.PhaseQuarantined, contract.StateAuthorityConflict, contract.RuleAuthorityConflict
	case gate == GateBlockProduction:
		v.phase, v.state, v.rule = contract.PhaseQuarantined, contract.StateGateBlocked, contract.RuleGateBlocked
	case intent == contract.IntentProvisioning:
		v.phase, v.state, v.rule = contract.PhaseProvisioning, contract.StateProvisioning, contract.RuleProvisioning
	case intent == contract.IntentEnrolled:
		v.phase, v.state, v.rule = contract.PhaseEnrolled, contract.StateEnrolled, contract.RuleEnrolled
	case degraded && updating:
		v.phase, v.state, v.rule = contract.PhaseDegraded, contract.StateUpdateFailed, contract.RuleUpdateFailed
	case n.health == symHealthDegraded:
		v.phase, v.state, v.rule = contract.PhaseDegraded, contract.StateHealthDegraded, contract.RuleHealthDegraded
	case n.health == symHealthFailed:
		v.phase, v.state, v.rule = contract.PhaseDegraded, contract.StateHealthFailed, contract.RuleHealthFailed
	case updating:
		v.phase, v.state, v.rule = contract.PhaseUpdating, contract.StateUpdating, contract.RuleUpdating
	default:
		v.phase, v.state, v.rule = contract.PhaseActive, contract.ModeState(contract.ConnectivityModes[mode]), contract.RuleConnectivity
	}
	// Rollout: the node counts for its desired bundle when the registry
	// has it and it targets the node's domain.
	if bundle != nil && intent != contract.IntentRetired {
		domain := t.syms.Str(n.domainID)
		if len(bundle.b.Domains) == 0 || slices.Contains(bundle.b.Domains, domain) {
			v.counted = rolloutKey{bundle.b.PolicyBundleID, domain}
			switch {
			case f.reported != "" && f.reported == bundle.b.TargetVersion:
				v.rollout = contract.RolloutAtTarget
			case degraded && updating:
				v.rollout = contract.RolloutFailed
			case ref >= bundle.deadline:
				v.rollout = contract.RolloutBehind
			case updating:
				v.rollout = contract.RolloutUpdating
			default:
				v.rollout = contract.RolloutPending
			}
		}
	}
	return v
}

// settleFleet applies the fleet verdicts of n: rollout counts, and a
// lifecycle transition when (phase, state) changed. at is the event time
// of the cause (Unix ns).
func (t *Tracker) settleFleet(n *node, v *fleetVerdicts, at int64) {
	if n.fleet != nil || v.authority != "" || v.supply != "" || v.rollout != "" {
		f := n.fl()
		authority, supply := enumOf(contract.AuthorityStates, v.authority), enumOf(contract.SupplyChainStates, v.supply)
		rollout := enumOf(contract.RolloutCategories, v.rollout)
		if f.authority != authority || f.supply != supply || f.rollout != rollout {
			n.flags |= flagDirty
		}
		if f.counted != v.counted.bundle || f.countedIn != v.counted.domain || f.rollout != rollout {
			t.countRollout(rolloutKey{f.counted, f.countedIn}, f.rollout, -1)
			t.countRollout(v.counted, rollout, +1)
			f.counted, f.countedIn = v.counted.bundle, t.str(v.counted.domain)
		}
		f.authority, f.supply, f.rollout = authority, supply, rollout
	}
	phase, state := enumOf(contract.Phases, v.phase), enumOf(contract.LifecycleStates, v.state)
	l := &n.life
	if l.phase == phase && l.state == state {
		return
	}
	n.flags |= flagDirty
	tr := Transition{NodeID: n.id, Seq: uint64(l.seq) + 1, DomainID: t.syms.Str(n.domainID),
		FromPhase: valueOf(contract.Phases, l.phase), FromState: valueOf(contract.LifecycleStates, l.state),
		ToPhase: v.phase, ToState: v.state, Reason: v.rule, CorrelationID: strings.Clone(t.fleet.corr)}
	if t.fleet.byTime {
		// Time alone changed the node: at is the deadline the watermark
		// passed (as a status row's), which no partitioning or restart
		// moves, where the watermark's own value depends on them.
		tr.CorrelationID = ""
	}
	tr.At = time.Unix(0, at).UTC()
	l.phase, l.state, l.since, l.seq = phase, state, at, l.seq+1
	if t.fleet.out.Transition != nil {
		t.fleet.out.Transition(&tr)
	}
}

// countRollout adds d to the count of category c of key k.
func (t *Tracker) countRollout(k rolloutKey, c enum, d int) {
	if k.bundle == "" || c == 0 {
		return
	}
	rc := t.fleet.rollouts[k]
	if rc == nil {
		rc = &rolloutCounts{}
		t.fleet.rollouts[k] = rc
	}
	rc.n[c-1] = uint32(int(rc.n[c-1]) + d)
	rc.dirty = true
}

// Rollouts calls fn with the rollout row of every (bundle, domain) whose
// counts changed since the last call (or whose bundle did), in key order,
// and marks them written. The version grows with the watermark.
func (t *Tracker) Rollouts(fn func(*RolloutRow)) {
	var keys []rolloutKey
	for k, c := range t.fleet.rollouts {
		if c.dirty {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b rolloutKey) int {
		if c := strings.Compare(a.bundle, b.bundle); c != 0 {
			return c
		}
		return strings.Compare(a.domain, b.domain)
	})
	var row RolloutRow
	for _, k := range keys {
		c := t.fleet.rollouts[k]
		c.dirty, c.written = false, true
		c.version = max(c.version+1, uint64(max(t.w, 0)/1000))
		row = RolloutRow{PolicyBundleID: k.bundle, DomainID: k.domain, Version: c.version,
			AtTarget: c.n[0], Failed: c.n[1], Behind: c.n[2], Updating: c.n[3], Pending: c.n[4]}
		row.Nodes = row.AtTarget + row.Failed + row.Behind + row.Updating + row.Pending
		if t.w != math.MinInt64 {
			row.AsOf = time.Unix(0, t.w).UTC()
		}
		if e := t.fleet.reg.bundles[k.bundle]; e != nil {
			row.TargetVersion, row.ArtifactID, row.Deadline = e.b.TargetVersion, e.b.ArtifactID, e.b.Deadline
		}
		fn(&row)
	}
}

// advanceFleet runs the fleet core's watermark rules after the watermark
// moved from prev to t.w: bundles whose deadline it reached re-evaluate
// their nodes (behind), and a crossed minute boundary writes the sync
// debt of the minute that just ended.
func (t *Tracker) advanceFleet(prev int64) {
	var due []string
	if t.w >= t.fleet.nextDue {
		t.fleet.nextDue = math.MaxInt64
		for id, e := range t.fleet.reg.bundles {
			switch {
			case e.due:
			case t.w >= e.deadline:
				e.due = true
				due = append(due, id)
			default:
				t.fleet.nextDue = min(t.fleet.nextDue, e.deadline)
			}
		}
	}
	if len(due) > 0 {
		slices.Sort(due)
		t.fleet.byTime = true
		for _, id := range due {
			deadline := t.fleet.reg.bundles[id].deadline
			for _, n := range t.sortedNodes(func(n *node) bool { return n.fleet != nil && n.fleet.bundle == id }) {
				t.settle(n, deadline, false)
			}
		}
		t.fleet.byTime = false
	}
	m := t.w - t.w%int64(time.Minute)
	if t.w < 0 {
		m -= int64(time.Minute)
	}
	if prev == math.MinInt64 || t.fleet.minute == math.MinInt64 {
		t.fleet.minute = m
		return
	}
	if m > t.fleet.minute {
		t.fleet.minute = m
		t.syncDebt(m - int64(time.Minute))
	}
}

// syncDebt writes the sync debt of minute (Unix ns of its start) per
// (domain, relay): the nodes with a heartbeat within the staleness window
// that are not retired, their worst seconds_behind and summed backlog
// (saturated at the largest int64), from their current values.
func (t *Tracker) syncDebt(minute int64) {
	if t.fleet.out.SyncDebt == nil {
		return
	}
	type key struct{ domain, relay string }
	agg := map[key]*SyncDebtRow{}
	win := int64(t.opts.DisconnectedAfter)
	for _, n := range t.index.all {
		if !n.has(flagHeartbeat) || n.lastSeen+win <= t.w {
			continue
		}
		if valueOf(contract.Phases, n.life.phase) == contract.PhaseRetired {
			continue
		}
		relay := n.fleetOf().relay
		k := key{t.syms.Str(n.domainID), relay}
		r := agg[k]
		if r == nil {
			r = &SyncDebtRow{DomainID: k.domain, RelayID: k.relay, Minute: time.Unix(0, minute).UTC()}
			agg[k] = r
		}
		r.Nodes++
		r.MaxSecondsBehind = max(r.MaxSecondsBehind, n.behind)
		// backlog_messages is any non-negative int64: the sum saturates
		// rather than wrap negative.
		r.BacklogMessages += min(n.backlog, math.MaxInt64-r.BacklogMessages)
	}
	keys := make([]key, 0, len(agg))
	for k := range agg {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		if c := strings.Compare(a.domain, b.domain); c != 0 {
			return c
		}
		return strings.Compare(a.relay, b.relay)
	})
	for _, k := range keys {
		t.fleet.out.SyncDebt(agg[k])
	}
}

// sortedNodes returns the nodes keep accepts, by node_id, so that
// re-evaluations run (and transitions are numbered) in one order.
func (t *Tracker) sortedNodes(keep func(*node) bool) []*node {
	var ns []*node
	for _, n := range t.index.all {
		if keep(n) {
			ns = append(ns, n)
		}
	}
	slices.SortFunc(ns, func(a, b *node) int { return strings.Compare(a.id, b.id) })
	return ns
}

// fillFleet writes n's fleet fields into s.
func (t *Tracker) fillFleet(n *node, s *Status) {
	l := &n.life
	s.Phase, s.LifecycleState, s.Transitions = string(valueOf(contract.Phases, l.phase)), string(valueOf(contract.LifecycleStates, l.state)), uint64(l.seq)
	if l.seq > 0 {
		s.PhaseSince = time.Unix(0, l.since).UTC()
	}
	s.Recent = Recent{ring: n.ring, topics: t.fleet.topics, partition: t.fleet.partition}
	f := n.fleetOf()
	s.Tags, s.NodeKind, s.LifecycleIntent = f.tags, string(valueOf(contract.NodeKinds, f.kind)), string(valueOf(contract.LifecycleIntents, f.intent))
	s.MasterOfRecord, s.ControllerIDs, s.ControllerID = string(valueOf(contract.MastersOfRecord, f.master)), f.controllers, f.controller
	s.Authority, s.RelayID, s.PolicyBundleID = string(valueOf(contract.AuthorityStates, f.authority)), f.relay, f.bundle
	s.TargetVersion = f.target // the record's, unless the registry has its bundle
	if e := t.fleet.reg.bundles[f.bundle]; f.bundle != "" && e != nil {
		s.TargetVersion = e.b.TargetVersion
	}
	s.ReportedVersion, s.Rollout = f.reported, string(valueOf(contract.RolloutCategories, f.rollout))
	s.ArtifactID, s.ArtifactDigest, s.UptimeS = f.artifactID, f.artifactDigest, f.uptime
	s.SupplyChain = string(valueOf(contract.SupplyChainStates, f.supply))
	s.AuthorityConflict = authorityOpen(contract.AuthorityState(s.Authority))
	s.SupplyChainViolation = supplyOpen(contract.SupplyChainState(s.SupplyChain))
}

// Tags returns the tags of nodeID's record (nil if none).
func (t *Tracker) Tags(nodeID string) []string {
	if n := t.lookup(nodeID); n != nil {
		return n.fleetOf().tags
	}
	return nil
}

// HeartbeatVerdicts notes an applied heartbeat at offset of the
// telemetry stream in nodeID's recent events (RecordEvent) and returns
// what IdentityMismatch and FleetVerdicts report, with one lookup of the
// node on the heartbeat's path.
func (t *Tracker) HeartbeatVerdicts(nodeID string, stream uint8, offset int64) (identity, authority, supplyChain bool) {
	n := t.lookup(nodeID)
	if n == nil {
		return false, false, false
	}
	n.ring.add(stream, offset)
	f := n.fleetOf()
	return n.has(flagIdentity), authorityOpen(valueOf(contract.AuthorityStates, f.authority)),
		supplyOpen(valueOf(contract.SupplyChainStates, f.supply))
}

// FleetVerdicts reports nodeID's open fleet findings: authority_conflict
// and supply_chain_violation.
func (t *Tracker) FleetVerdicts(nodeID string) (authority, supplyChain bool) {
	n := t.lookup(nodeID)
	if n == nil {
		return false, false
	}
	f := n.fleetOf()
	return authorityOpen(valueOf(contract.AuthorityStates, f.authority)), supplyOpen(valueOf(contract.SupplyChainStates, f.supply))
}

// Lifecycle returns nodeID's lifecycle phase and state and its number of
// transitions.
func (t *Tracker) Lifecycle(nodeID string) (contract.Phase, contract.LifecycleState, uint64) {
	n := t.lookup(nodeID)
	if n == nil {
		return "", "", 0
	}
	return valueOf(contract.Phases, n.life.phase), valueOf(contract.LifecycleStates, n.life.state), uint64(n.life.seq)
}
