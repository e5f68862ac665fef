package nodeagent

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/stream/snap"
)

// snapVersion 2 adds the fleet core (fleet.go): each node's lifecycle,
// ring and fleet state, the registry, the rollout counts and the sync-debt
// minute. LoadSnapshot reads version 1 too: its nodes have no fleet state
// yet (their next evaluation gives them a lifecycle).
const (
	snapSection = "nodeagent"
	snapVersion = 2
)

// ErrSnapshot is wrapped by LoadSnapshot's errors for a snapshot whose
// content is inconsistent (as opposed to truncated, snap.ErrShort).
var ErrSnapshot = errors.New("nodeagent: corrupt snapshot")

// syms returns pointers to n's symbols, in snapshot order.
func (n *node) syms() [14]*sym {
	return [...]*sym{&n.domainID, &n.owningDomain, &n.expected, &n.recCert, &n.recIngress,
		&n.agent, &n.cert, &n.ingress, &n.reported, &n.path, &n.probe, &n.impact, &n.health, &n.reason}
}

// AppendSnapshot appends the tracker's state to w as one versioned
// section: the watermark, a string table of the symbols nodes hold (so a
// restored tracker starts with a compact table), and every node, sorted by
// node_id (equal states give equal bytes), with its position in the timer
// heap.
func (t *Tracker) AppendSnapshot(w *snap.Writer) {
	w.Header(snapSection, snapVersion)
	w.Varint(t.w)

	ns := slices.Clone(t.index.all)
	slices.SortFunc(ns, func(a, b *node) int { return strings.Compare(a.id, b.id) })

	// The string table: symbols in order of first use.
	num := make(map[sym]uint32)
	var strs []sym
	for _, n := range ns {
		for _, p := range n.syms() {
			if _, ok := num[*p]; !ok {
				num[*p] = uint32(len(strs))
				strs = append(strs, *p)
			}
		}
	}
	w.Uvarint(uint64(len(strs)))
	for _, s := range strs {
		w.String(t.syms.Str(s))
	}

	w.Uvarint(uint64(len(t.timers)))
	w.Uvarint(uint64(len(ns)))
	for _, n := range ns {
		for _, s := range [...]string{n.id, n.host, n.corr} {
			w.String(s)
		}
		w.Uvarint(uint64(len(n.others)))
		for _, o := range n.others {
			w.String(o.fp)
			w.Varint(o.last)
		}
		for _, v := range [...]float64{n.rtt, n.loss, n.bandwidth} {
			w.Float64(v)
		}
		for _, v := range [...]int64{n.backlog, n.behind, n.recVersion, n.lastSeen, n.emittedSeen, n.deadline} {
			w.Varint(v)
		}
		w.Uvarint(n.version)
		for _, p := range n.syms() {
			w.Uvarint(uint64(num[*p]))
		}
		w.Varint(int64(n.heapIdx))
		w.Byte(n.flags)
		w.Byte(byte(n.mode))
		w.Byte(byte(n.gate))
		w.Byte(byte(n.state))
		w.Byte(n.hosts)
		w.Uvarint(uint64(n.score))
		t.appendFleetNode(w, n)
	}
	t.appendFleet(w)
}

// LoadSnapshot replaces the tracker's state with the section
// AppendSnapshot wrote, read from r: applying the same events to the
// restored tracker emits the same Status sequence as to the original. The
// options are the tracker's own; armed deadlines are the snapshot's until
// each node is next re-derived. On error the tracker is left empty and r
// holds the error.
func (t *Tracker) LoadSnapshot(r *snap.Reader) error {
	err := t.load(r)
	if err != nil {
		r.Fail(err)
		*t = *New(t.opts, t.emit)
	}
	return err
}

func (t *Tracker) load(r *snap.Reader) error {
	version := r.HeaderIn(snapSection, 1, snapVersion)
	wm := r.Varint()
	fleet := newFleetState()
	syms := newSymtab()
	table := make([]sym, r.Count(1))
	for i := range table {
		table[i] = syms.Intern(r.String())
	}
	nt := r.Count(1)
	nn := r.Count(8)
	if r.Err() != nil {
		return r.Err()
	}
	if nt > nn {
		return fmt.Errorf("%w: %d timers for %d nodes", ErrSnapshot, nt, nn)
	}
	var nodes nodeIndex
	nodes.keys.HashMask = t.index.keys.HashMask
	nodes.reset(nn)
	timers := make([]*node, nt)
	for range nn {
		n := &node{id: r.String(), host: r.String(), corr: r.String()}
		if no := r.Count(2); no > 0 {
			n.others = make([]hostSeen, no)
			for i := range n.others {
				n.others[i] = hostSeen{r.String(), r.Varint()}
			}
		}
		n.rtt, n.loss, n.bandwidth = r.Float64(), r.Float64(), r.Float64()
		n.backlog, n.behind = r.Varint(), r.Varint()
		n.recVersion, n.lastSeen, n.emittedSeen, n.deadline = r.Varint(), r.Varint(), r.Varint(), r.Varint()
		n.version = r.Uvarint()
		for _, p := range n.syms() {
			i := r.Uvarint()
			if i >= uint64(len(table)) {
				r.Fail(fmt.Errorf("%w: node %q: symbol %d of %d", ErrSnapshot, n.id, i, len(table)))
				break
			}
			*p = table[i]
		}
		hi := r.Varint()
		n.flags = r.Byte()
		n.mode, n.gate, n.state, n.hosts = Mode(r.Byte()), Gate(r.Byte()), State(r.Byte()), r.Byte()
		score := r.Uvarint()
		if version >= 2 {
			loadFleetNode(r, n, &fleet)
		}
		if r.Err() != nil {
			return r.Err()
		}
		h := nodes.hashID(n.id)
		switch {
		case score > math.MaxUint16 || n.mode >= numModes || n.gate >= numGates || n.state >= numStates:
			return fmt.Errorf("%w: node %q: derived values out of range", ErrSnapshot, n.id)
		case nodes.find(n.id, h) != nil:
			return fmt.Errorf("%w: node %q twice", ErrSnapshot, n.id)
		case hi < -1 || hi >= int64(nt) || hi >= 0 && timers[hi] != nil:
			return fmt.Errorf("%w: node %q: timer %d of %d", ErrSnapshot, n.id, hi, nt)
		case (hi >= 0) != (n.deadline != noDeadline):
			return fmt.Errorf("%w: node %q: deadline %d with timer %d", ErrSnapshot, n.id, n.deadline, hi)
		case hi >= 0 && (n.deadline <= wm || n.flags&flagHeartbeat == 0):
			// Advance settles every node whose deadline it passes, and
			// settle re-arms only nodes with a heartbeat.
			return fmt.Errorf("%w: node %q: deadline %d not ahead of watermark %d, or armed without a heartbeat", ErrSnapshot, n.id, n.deadline, wm)
		}
		n.score, n.heapIdx = uint16(score), int32(hi)
		if hi >= 0 {
			timers[hi] = n
		}
		nodes.add(n, h)
	}
	for i, n := range timers {
		if n == nil {
			return fmt.Errorf("%w: timer %d unset", ErrSnapshot, i)
		}
		if i > 0 && n.deadline < timers[(i-1)/2].deadline {
			return fmt.Errorf("%w: timer heap out of order at %d", ErrSnapshot, i)
		}
	}
	if version >= 2 {
		if err := loadFleet(r, &fleet); err != nil {
			return err
		}
	}
	fleet.out, fleet.topics, fleet.partition = t.fleet.out, t.fleet.topics, t.fleet.partition
	for _, e := range fleet.reg.bundles {
		if !e.due {
			fleet.nextDue = min(fleet.nextDue, e.deadline)
		}
	}
	fleet.compactAt = max(minFleetCompactAt, 2*(len(fleet.pool)+len(fleet.lists)))
	t.index, t.timers, t.syms, t.w, t.fleet = nodes, timers, syms, wm, fleet
	t.last = nil
	t.compactAt = max(minCompactAt, 2*syms.Len())
	return nil
}

// appendFleetNode appends n's lifecycle, ring and fleet state.
func (t *Tracker) appendFleetNode(w *snap.Writer, n *node) {
	w.Byte(byte(n.life.phase))
	w.Byte(byte(n.life.state))
	w.Uvarint(uint64(n.life.seq))
	w.Varint(n.life.since)
	w.Byte(n.ring.n)
	w.Byte(n.ring.h)
	for i := range int(n.ring.n) {
		w.Uvarint(n.ring.ev[(int(n.ring.h)-i+RecentEvents)%RecentEvents])
	}
	f := n.fleet
	if f == nil {
		w.Byte(0)
		return
	}
	w.Byte(1)
	w.Strings(f.controllers)
	w.Strings(f.tags)
	for _, b := range [...]enum{f.intent, f.kind, f.master, f.authority, f.supply, f.rollout} {
		w.Byte(byte(b))
	}
	if f.operatorQuarantine {
		w.Byte(1)
	} else {
		w.Byte(0)
	}
	for _, s := range [...]string{f.bundle, f.target, f.reported, f.artifactID, f.artifactDigest, f.controller, f.relay, f.ctl[0].id, f.ctl[1].id, f.counted, f.countedIn} {
		w.String(s)
	}
	w.Varint(f.uptime)
	w.Varint(f.ctl[0].last)
	w.Varint(f.ctl[1].last)
}

func loadStrings(r *snap.Reader, fs *fleetState) []string {
	l := r.Strings()
	if l == nil {
		return nil
	}
	return internList(fs, l)
}

// internList interns l in fs (as Tracker.strs).
func internList(fs *fleetState, l []string) []string {
	key := strings.Join(l, "\x00")
	if v, ok := fs.lists[key]; ok {
		return v
	}
	for i, s := range l {
		l[i] = internStr(fs, s)
	}
	fs.lists[key] = l
	return l
}

func internStr(fs *fleetState, s string) string {
	if s == "" {
		return ""
	}
	if v, ok := fs.pool[s]; ok {
		return v
	}
	fs.pool[s] = s
	return s
}

// loadFleetNode reads what appendFleetNode wrote into n.
func loadFleetNode(r *snap.Reader, n *node, fs *fleetState) {
	n.life.phase, n.life.state = enum(r.Byte()), enum(r.Byte())
	n.life.seq, n.life.since = uint32(r.Uvarint()), r.Varint()
	n.ring.n, n.ring.h = r.Byte(), r.Byte()
	if n.ring.n > RecentEvents || n.ring.h >= RecentEvents || int(n.life.phase) > len(contract.Phases) ||
		int(n.life.state) > len(contract.LifecycleStates) {
		r.Fail(fmt.Errorf("%w: node %q: lifecycle or ring out of range", ErrSnapshot, n.id))
		return
	}
	for i := range int(n.ring.n) {
		n.ring.ev[(int(n.ring.h)-i+RecentEvents)%RecentEvents] = r.Uvarint()
	}
	if r.Byte() == 0 {
		return
	}
	f := &fleetNode{}
	f.controllers, f.tags = loadStrings(r, fs), loadStrings(r, fs)
	for _, p := range [...]*enum{&f.intent, &f.kind, &f.master, &f.authority, &f.supply, &f.rollout} {
		*p = enum(r.Byte())
	}
	f.operatorQuarantine = r.Byte() == 1
	for _, p := range [...]*string{&f.bundle, &f.target, &f.reported, &f.artifactID, &f.artifactDigest, &f.controller, &f.relay, &f.ctl[0].id, &f.ctl[1].id, &f.counted, &f.countedIn} {
		*p = internStr(fs, r.String())
	}
	f.uptime, f.ctl[0].last, f.ctl[1].last = r.Varint(), r.Varint(), r.Varint()
	n.fleet = f
}

// appendFleet appends the registry, the rollout counts and the sync-debt
// minute, in key order.
func (t *Tracker) appendFleet(w *snap.Writer) {
	fs := &t.fleet
	w.Varint(fs.minute)
	ids := slices.Sorted(maps.Keys(fs.reg.artifacts))
	w.Uvarint(uint64(len(ids)))
	for _, id := range ids {
		e := fs.reg.artifacts[id]
		for _, s := range [...]string{e.a.ArtifactID, e.a.Version, e.a.Digest, e.a.SignedBy, e.a.SBOMRef, e.a.ProvenanceRef} {
			w.String(s)
		}
		w.Bool(e.a.Revoked)
		w.Varint(e.at)
	}
	ids = slices.Sorted(maps.Keys(fs.reg.bundles))
	w.Uvarint(uint64(len(ids)))
	for _, id := range ids {
		e := fs.reg.bundles[id]
		for _, s := range [...]string{e.b.PolicyBundleID, e.b.TargetVersion, e.b.ArtifactID} {
			w.String(s)
		}
		w.Strings(e.b.Domains)
		w.Varint(e.b.Deadline.UnixNano())
		w.Varint(e.at)
		w.Bool(e.due)
	}
	keys := slices.SortedFunc(maps.Keys(fs.rollouts), func(a, b rolloutKey) int {
		if c := strings.Compare(a.bundle, b.bundle); c != 0 {
			return c
		}
		return strings.Compare(a.domain, b.domain)
	})
	w.Uvarint(uint64(len(keys)))
	for _, k := range keys {
		c := fs.rollouts[k]
		w.String(k.bundle)
		w.String(k.domain)
		for _, v := range c.n {
			w.Uvarint(uint64(v))
		}
		w.Uvarint(c.version)
		w.Bool(c.dirty)
		w.Bool(c.written)
	}
}

// loadFleet reads what appendFleet wrote into fs.
func loadFleet(r *snap.Reader, fs *fleetState) error {
	fs.minute = r.Varint()
	na := r.Count(8)
	for range na {
		e := &artifactEntry{}
		for _, p := range [...]*string{&e.a.ArtifactID, &e.a.Version, &e.a.Digest, &e.a.SignedBy, &e.a.SBOMRef, &e.a.ProvenanceRef} {
			*p = internStr(fs, r.String())
		}
		e.a.Revoked = r.Bool()
		e.at = r.Varint()
		fs.reg.artifacts[e.a.ArtifactID] = e
	}
	nb := r.Count(8)
	for range nb {
		e := &bundleEntry{}
		for _, p := range [...]*string{&e.b.PolicyBundleID, &e.b.TargetVersion, &e.b.ArtifactID} {
			*p = internStr(fs, r.String())
		}
		e.b.Domains = loadStrings(r, fs)
		e.deadline = r.Varint()
		e.b.Deadline = time.Unix(0, e.deadline).UTC()
		e.at = r.Varint()
		e.due = r.Bool()
		fs.reg.bundles[e.b.PolicyBundleID] = e
	}
	nr := r.Count(8)
	for range nr {
		k := rolloutKey{internStr(fs, r.String()), internStr(fs, r.String())}
		c := &rolloutCounts{}
		for i := range c.n {
			c.n[i] = uint32(r.Uvarint())
		}
		c.version = r.Uvarint()
		c.dirty, c.written = r.Bool(), r.Bool()
		fs.rollouts[k] = c
	}
	return r.Err()
}
