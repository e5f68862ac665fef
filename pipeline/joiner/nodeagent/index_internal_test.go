package nodeagent

import (
	"fmt"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/stream/snap"
)

// TestNodeIndex fills trackers with nodes under hash masks that force
// tags and probe sequences to collide (every hash equal; 16 distinct
// hashes; the full hash) and checks that every node is found, that an
// unknown one is not, and that a restored tracker finds them all again.
func TestNodeIndex(t *testing.T) {
	for _, mask := range []uint64{0x1, 0xf << 40, ^uint64(0)} {
		t.Run(fmt.Sprintf("mask=%#x", mask), func(t *testing.T) {
			tr := quietTracker()
			tr.index.keys.HashMask = mask
			const n = 3000
			for i := range n {
				tr.ApplyHeartbeat(&contract.Heartbeat{NodeID: fmt.Sprintf("node-%d", i), HostFingerprint: "h", Health: "OK"},
					base.Add(time.Duration(i)*time.Millisecond), "")
			}
			if tr.Len() != n {
				t.Fatalf("Len %d, want %d", tr.Len(), n)
			}
			var w snap.Writer
			tr.AppendSnapshot(&w)
			r := quietTracker()
			r.index.keys.HashMask = mask
			if err := r.LoadSnapshot(snap.NewReader(w.B)); err != nil {
				t.Fatal(err)
			}
			for _, tr := range []*Tracker{tr, r} {
				for i := range n {
					id := fmt.Sprintf("node-%d", i)
					tr.last = nil
					if got := tr.lookup(id); got == nil || got.id != id {
						t.Fatalf("lookup %s: %v", id, got)
					}
				}
				tr.last = nil
				if got := tr.lookup("node-x"); got != nil {
					t.Fatalf("lookup of an unknown node found %s", got.id)
				}
			}
		})
	}
}

// TestNodeIndexHashesIdentityKey checks that a node's hash is that of its
// identity key, the one the joiner's read-ahead passes to PrefetchSlot,
// PrefetchNode and PrefetchID, so that their slot names the node.
func TestNodeIndexHashesIdentityKey(t *testing.T) {
	tr := quietTracker()
	for _, id := range []string{"n1", "n2", string(make([]byte, 300))} {
		tr.ApplyHeartbeat(&contract.Heartbeat{NodeID: id, HostFingerprint: "h", Health: "OK"}, base, "")
		key := []byte(contract.ProviderMAAS + "/" + id)
		if !IsNodeKey(key) {
			t.Fatalf("IsNodeKey(%q) = false", key)
		}
		h := xxhash.Sum64(key)
		if got := tr.index.hashID(id); got != h {
			t.Fatalf("hash of %q: %#x, want the key's %#x", id, got, h)
		}
		if n := tr.index.prefetched(h); n == nil || n.id != id {
			t.Fatalf("the home slot of %q names %v", id, n)
		}
		tr.PrefetchSlot(h) // hints: they must only not fail
		tr.PrefetchNode(h)
		tr.PrefetchID(h)
	}
	for _, key := range []string{"maas/", "gpu/n1", "maa", ""} {
		if IsNodeKey([]byte(key)) {
			t.Errorf("IsNodeKey(%q) = true", key)
		}
	}
	tr.PrefetchNode(1) // a hash of no node
	tr.PrefetchID(1)
}
