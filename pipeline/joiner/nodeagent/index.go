package nodeagent

import (
	"unsafe"

	"github.com/cespare/xxhash/v2"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/joiner/prefetch"
)

// nodeIndex finds a node by node_id. A partition holds tens of thousands
// of nodes or more, and each lookup of an event's node waits for memory
// (the table's slot, the node, its id); the index lets the joiner's
// read-ahead (Tracker.PrefetchSlot, PrefetchNode, PrefetchID) ask for
// them a few records early, which a Go map does not.
//
// It is an open-addressing table with linear probing. A slot holds the
// top 32 bits of the id's hash and 1 + the node's position in all (0:
// empty); the top 32 bits also give the home slot, so the table grows
// without hashing an id again. The hash is that of the node's identity
// key, "maas/<node_id>": the key its heartbeats, records and
// observations carry, which the read-ahead has hashed already. Nodes are
// never removed. The owner state's index of identities is built the same
// way (it grows by a quarter, to hold more keys in less memory; nodes
// are few beside their 320-byte structs, so this one doubles).
type nodeIndex struct {
	slots []uint64
	all   []*node // in the order they were added
	// hashMask is applied to every hash; tests narrow it to force
	// collisions of tags and probe sequences.
	hashMask uint64
}

const minNodeSlots = 64

// nodeKeyPrefix is what a node's identity key starts with.
const nodeKeyPrefix = contract.ProviderMAAS + "/"

// hashID returns the hash of the identity key of node id (xxhash64 of
// "maas/<id>", without building the key).
func (x *nodeIndex) hashID(id string) uint64 {
	var buf [256]byte
	if len(nodeKeyPrefix)+len(id) > len(buf) {
		var d xxhash.Digest
		d.Reset()
		_, _ = d.WriteString(nodeKeyPrefix)
		_, _ = d.WriteString(id)
		return d.Sum64() & x.hashMask
	}
	return xxhash.Sum64(append(append(buf[:0], nodeKeyPrefix...), id...)) & x.hashMask
}

// home returns the first slot to probe for hash (or slot) h.
func (x *nodeIndex) home(h uint64) int { return int((h >> 32) * uint64(len(x.slots)) >> 32) }

// find returns the node id, whose hash is h, or nil.
func (x *nodeIndex) find(id string, h uint64) *node {
	if len(x.slots) == 0 {
		return nil
	}
	tag := h >> 32
	for p := x.home(h); ; {
		v := x.slots[p]
		if v == 0 {
			return nil
		}
		if v>>32 == tag {
			if n := x.all[uint32(v)-1]; n.id == id {
				return n
			}
		}
		if p++; p == len(x.slots) {
			p = 0
		}
	}
}

// add files n, whose id hashes to h and is not in the index.
func (x *nodeIndex) add(n *node, h uint64) {
	if len(x.all) == 1<<32-1 {
		panic("BUG: nodeagent: 2^32-1 nodes in a partition")
	}
	if (len(x.all)+1)*4 > len(x.slots)*3 {
		x.grow()
	}
	x.all = append(x.all, n)
	x.put(h>>32<<32 | uint64(len(x.all)))
}

func (x *nodeIndex) put(v uint64) {
	p := x.home(v)
	for x.slots[p] != 0 {
		if p++; p == len(x.slots) {
			p = 0
		}
	}
	x.slots[p] = v
}

// grow doubles the table.
func (x *nodeIndex) grow() {
	old := x.slots
	x.slots = make([]uint64, max(minNodeSlots, 2*len(old)))
	for _, v := range old {
		if v != 0 {
			x.put(v)
		}
	}
}

// reset empties the index, sized for n nodes.
func (x *nodeIndex) reset(n int) {
	size := minNodeSlots
	for size*3 < n*4 {
		size *= 2
	}
	x.slots, x.all = make([]uint64, size), make([]*node, 0, n)
	if x.hashMask == 0 {
		x.hashMask = ^uint64(0)
	}
}

// prefetched returns the node in h's home slot if its tag matches h, nil
// otherwise: only the first slot is read, so a node that probes further
// is looked up without help.
func (x *nodeIndex) prefetched(h uint64) *node {
	if len(x.slots) == 0 {
		return nil
	}
	h &= x.hashMask
	v := x.slots[x.home(h)]
	if v == 0 || v>>32 != h>>32 || int(uint32(v)-1) >= len(x.all) {
		return nil
	}
	return x.all[uint32(v)-1]
}

// IsNodeKey reports whether key is a node's identity key ("maas/<node_id>"),
// whose records the tracker looks up: the read-ahead prefetches for those.
func IsNodeKey(key []byte) bool {
	return len(key) > len(nodeKeyPrefix) && string(key[:len(nodeKeyPrefix)]) == nodeKeyPrefix
}

// PrefetchSlot starts bringing into the caches the index slot of the node
// whose identity key hashes to h (xxhash64 of the key, as
// ownerstate.Store.Prefetch returns it). It is a hint: a wrong h costs a
// wasted fetch, never a wrong lookup.
func (t *Tracker) PrefetchSlot(h uint64) {
	if x := &t.index; len(x.slots) != 0 {
		prefetch.Line(unsafe.Pointer(&x.slots[x.home(h&x.hashMask)]))
	}
}

// PrefetchNode starts bringing into the caches the node PrefetchSlot's
// slot names (its first cache lines, which a heartbeat and a record
// read), reading that slot.
func (t *Tracker) PrefetchNode(h uint64) {
	if n := t.index.prefetched(h); n != nil {
		p := unsafe.Pointer(n)
		for off := uintptr(0); off < nodePrefetchBytes; off += 64 {
			prefetch.Line(unsafe.Add(p, off))
		}
	}
}

// PrefetchID starts bringing into the caches the node_id's bytes of the
// node PrefetchNode brought in, which the lookup compares.
func (t *Tracker) PrefetchID(h uint64) {
	if n := t.index.prefetched(h); n != nil && len(n.id) != 0 {
		prefetch.Line(unsafe.Pointer(unsafe.StringData(n.id)))
	}
}

// nodePrefetchBytes is how much of a node PrefetchNode asks for: all of
// it but the fleet core's lifecycle and ring, which only fleet evidence
// reads.
const nodePrefetchBytes = unsafe.Offsetof(node{}.life)
