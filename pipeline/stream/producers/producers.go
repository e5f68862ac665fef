// Package producers counts, per producer and reason, the records a stage
// rejected or did not apply although they were well formed: events whose
// producer got time or identity wrong (contract.ProducerReasons). One
// producer with a broken clock or a reused sequence shows up as its own
// line on the status endpoint instead of a global metric nobody reads.
//
// A Counts belongs to one partition's state: it changes only as records
// are applied, is part of the partition's checkpoint, and so replays to
// the same numbers. Its rows are cumulative, written with the partition's
// progress (table producer_rejections), so a row written twice is the
// same row.
package producers

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/stream/snap"
)

// MaxEntries bounds the (producer, reason) pairs one Counts keeps. A
// stream of records naming ever new producers (a producer that puts a
// request id in its name) would otherwise grow a partition's state
// without bound; past the bound, new producers are counted together as
// Overflow.
const MaxEntries = 4096

// Overflow is the producer under which counts past MaxEntries are kept. A
// real producer name cannot be mistaken for it on the status endpoint,
// which shows it as it is.
const Overflow = "(other producers)"

// Count is one producer's count for one reason.
type Count struct {
	Producer string
	Reason   contract.Reason
	// Events is the number of records counted, since the partition's
	// state began.
	Events uint64
	// LastAt is the broker timestamp of the latest record counted.
	LastAt time.Time
}

type key struct {
	producer string
	reason   contract.Reason
}

type entry struct {
	Count
	changed bool
}

// Counts is the zero-value-ready tally of one partition.
type Counts struct {
	m       map[key]*entry
	changed int
}

// Add counts one record of producer rejected for reason, with the
// record's broker timestamp at.
func (c *Counts) Add(producer string, reason contract.Reason, at time.Time) {
	if c.m == nil {
		c.m = make(map[key]*entry)
	}
	k := key{producer, reason}
	e := c.m[k]
	if e == nil {
		if len(c.m) >= MaxEntries {
			k.producer = Overflow
			e = c.m[k]
		}
		if e == nil {
			// producer may alias a pooled record's bytes (a zero-copy
			// decoder's string): keep a copy.
			k.producer = strings.Clone(k.producer)
			e = &entry{Count: Count{Producer: k.producer, Reason: reason}}
			c.m[k] = e
		}
	}
	e.Events++
	if at.After(e.LastAt) {
		e.LastAt = at
	}
	if !e.changed {
		e.changed = true
		c.changed++
	}
}

// Len returns the number of (producer, reason) pairs counted.
func (c *Counts) Len() int { return len(c.m) }

// Get returns the count of producer for reason.
func (c *Counts) Get(producer string, reason contract.Reason) Count {
	if e := c.m[key{producer, reason}]; e != nil {
		return e.Count
	}
	return Count{Producer: producer, Reason: reason}
}

// Changed appends to dst the counts changed since the previous call,
// ordered by producer and reason, and forgets that they changed.
func (c *Counts) Changed(dst []Count) []Count {
	if c.changed == 0 {
		return dst
	}
	n := len(dst)
	for _, e := range c.m {
		if e.changed {
			dst = append(dst, e.Count)
			e.changed = false
		}
	}
	c.changed = 0
	sortCounts(dst[n:])
	return dst
}

func sortCounts(cs []Count) {
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].Producer != cs[j].Producer {
			return cs[i].Producer < cs[j].Producer
		}
		return cs[i].Reason < cs[j].Reason
	})
}

const snapshotVersion = 1

// AppendSnapshot appends the counts to a partition snapshot, in a stable
// order so that equal states write equal bytes.
func (c *Counts) AppendSnapshot(w *snap.Writer) {
	w.Header("producers", snapshotVersion)
	all := make([]Count, 0, len(c.m))
	for _, e := range c.m {
		all = append(all, e.Count)
	}
	sortCounts(all)
	w.Uvarint(uint64(len(all)))
	for _, e := range all {
		w.String(e.Producer)
		w.String(string(e.Reason))
		w.Uvarint(e.Events)
		w.Time(e.LastAt)
	}
}

// LoadSnapshot replaces the counts with those AppendSnapshot wrote. The
// restored counts are not marked changed: their rows were written before
// the checkpoint was taken.
func (c *Counts) LoadSnapshot(r *snap.Reader) error {
	r.Header("producers", snapshotVersion)
	n := r.Count(4)
	if err := r.Err(); err != nil {
		return err
	}
	if n > MaxEntries+len(contract.ProducerReasons) {
		return fmt.Errorf("producers: %d counts in a snapshot, at most %d are kept", n, MaxEntries)
	}
	c.m, c.changed = make(map[key]*entry, n), 0
	for range n {
		e := &entry{}
		e.Producer = r.String()
		e.Reason = contract.Reason(r.String())
		e.Events = r.Uvarint()
		e.LastAt = r.Time()
		c.m[key{e.Producer, e.Reason}] = e
	}
	return r.Err()
}
