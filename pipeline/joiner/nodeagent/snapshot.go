package nodeagent

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/driftline/driftline/pipeline/stream/snap"
)

const (
	snapSection = "nodeagent"
	snapVersion = 1
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

	ns := make([]*node, 0, len(t.nodes))
	for _, n := range t.nodes {
		ns = append(ns, n)
	}
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
		w.String(n.id)
		w.String(n.host)
		w.String(n.corr)
		w.Uvarint(uint64(len(n.others)))
		for _, o := range n.others {
			w.String(o.fp)
			w.Varint(o.last)
		}
		w.Float64(n.rtt)
		w.Float64(n.loss)
		w.Float64(n.bandwidth)
		w.Varint(n.backlog)
		w.Varint(n.behind)
		w.Varint(n.recVersion)
		w.Varint(n.lastSeen)
		w.Varint(n.emittedSeen)
		w.Varint(n.deadline)
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
	}
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
	r.Header(snapSection, snapVersion)
	wm := r.Varint()
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
	nodes := make(map[string]*node, nn)
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
		if r.Err() != nil {
			return r.Err()
		}
		switch {
		case score > math.MaxUint16 || n.mode >= numModes || n.gate >= numGates || n.state >= numStates:
			return fmt.Errorf("%w: node %q: derived values out of range", ErrSnapshot, n.id)
		case nodes[n.id] != nil:
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
		nodes[n.id] = n
	}
	for i, n := range timers {
		if n == nil {
			return fmt.Errorf("%w: timer %d unset", ErrSnapshot, i)
		}
		if i > 0 && n.deadline < timers[(i-1)/2].deadline {
			return fmt.Errorf("%w: timer heap out of order at %d", ErrSnapshot, i)
		}
	}
	t.nodes, t.timers, t.syms, t.w = nodes, timers, syms, wm
	t.compactAt = max(minCompactAt, 2*syms.Len())
	return nil
}
