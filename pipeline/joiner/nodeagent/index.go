package nodeagent

import (
	"bytes"
	"unsafe"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/joiner/keyindex"
	"github.com/driftline/driftline/pipeline/joiner/prefetch"
)

// nodeIndex finds a node by node_id. A partition holds tens of thousands
// of nodes or more, and each lookup of an event's node waits for memory
// (the table's slot, the node, its id); the index lets the joiner's
// read-ahead (Tracker.PrefetchSlot, PrefetchNode, PrefetchID) ask for
// them a few records early, which a Go map does not. Its table is the
// owner state's kind (keyindex), keyed by the node's identity key,
// "maas/<node_id>": the key its heartbeats, records and observations
// carry, which the read-ahead has hashed already. Nodes are never
// removed.
type nodeIndex struct {
	keys keyindex.Index
	all  []*node // by position in keys, in the order they were added
}

// hashID returns the hash of the identity key of node id.
func (x *nodeIndex) hashID(id string) uint64 { return x.keys.HashKey(contract.ProviderMAAS, id) }

// find returns the node id, whose hash is h, or nil.
func (x *nodeIndex) find(id string, h uint64) *node {
	if i, ok := x.keys.Find(h, func(i uint32) bool { return x.all[i].id == id }); ok {
		return x.all[i]
	}
	return nil
}

// add files n, whose id hashes to h and is not in the index.
func (x *nodeIndex) add(n *node, h uint64) {
	if len(x.all) == 1<<32-1 {
		panic("BUG: nodeagent: 2^32-1 nodes in a partition")
	}
	x.keys.Insert(h, uint32(len(x.all)))
	x.all = append(x.all, n)
}

// reset empties the index, sized for n nodes.
func (x *nodeIndex) reset(n int) {
	x.keys.Init(n)
	x.all = make([]*node, 0, n)
}

// prefetched returns the node in h's home slot if its tag matches h, nil
// otherwise (keyindex.Index.AtHome).
func (x *nodeIndex) prefetched(h uint64) *node {
	i, ok := x.keys.AtHome(h & x.keys.HashMask)
	if !ok || int(i) >= len(x.all) {
		return nil
	}
	return x.all[i]
}

// IsNodeKey reports whether key is a node's identity key ("maas/<node_id>"),
// whose records the tracker looks up: the read-ahead prefetches for those.
func IsNodeKey(key []byte) bool {
	return len(key) > len(nodeKeyPrefix) && bytes.HasPrefix(key, []byte(nodeKeyPrefix))
}

// nodeKeyPrefix is what a node's identity key starts with.
const nodeKeyPrefix = contract.ProviderMAAS + "/"

// PrefetchSlot starts bringing into the caches the index slot of the node
// whose identity key hashes to h (xxhash64 of the key, as
// ownerstate.Store.Prefetch returns it). It is a hint: a wrong h costs a
// wasted fetch, never a wrong lookup.
func (t *Tracker) PrefetchSlot(h uint64) {
	x := &t.index.keys
	prefetch.Line(unsafe.Pointer(&x.Slots[x.Home(h&x.HashMask)]))
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
