package keyindex

import (
	"fmt"
	"testing"
)

// TestIndexFindsEveryKey inserts keys through many growths, with the
// full hash and with one narrowed to a few tags, and checks that Find
// finds every key's position and the table stays within its load bounds.
func TestIndexFindsEveryKey(t *testing.T) {
	for _, mask := range []uint64{^uint64(0), 0x0000_0007_ffff_ffff, 0xffff_0000_0000_0000} {
		t.Run(fmt.Sprintf("mask=%x", mask), func(t *testing.T) {
			x := Index{HashMask: mask}
			x.Init(0)
			const n = 20_000
			hashes := make([]uint64, n)
			for i := range hashes {
				hashes[i] = x.Hash(fmt.Sprintf("maas/node-%d", i))
				x.Insert(hashes[i], uint32(i))
				if x.N*8 > len(x.Slots)*7 {
					t.Fatalf("after %d keys: %d of %d slots used, above 7/8", i+1, x.N, len(x.Slots))
				}
			}
			if x.N != n {
				t.Fatalf("N = %d, want %d", x.N, n)
			}
			if x.N*10 < len(x.Slots)*6 {
				t.Errorf("%d keys in %d slots: below 60%% full", x.N, len(x.Slots))
			}
			for i, h := range hashes {
				if p, ok := x.Find(h, func(p uint32) bool { return p == uint32(i) }); !ok || p != uint32(i) {
					t.Fatalf("key %d (hash %x): Find = %d, %v", i, h, p, ok)
				}
				if p, ok := x.AtHome(h); ok && hashes[p]>>32 != h>>32 {
					t.Fatalf("AtHome(%x) = %d, whose tag differs", h, p)
				}
			}
		})
	}
}

// TestIndexHashesAgree checks that the three ways to hash a key give one
// hash, including keys longer than HashKey's stack buffer.
func TestIndexHashesAgree(t *testing.T) {
	x := Index{}
	x.Init(0)
	long := string(make([]byte, 300))
	for _, id := range []string{"", "i-1", long} {
		key := "aws/" + id
		if a, b, c := x.HashKey("aws", id), x.Hash(key), x.HashBytes([]byte(key)); a != b || b != c {
			t.Errorf("key of %d bytes: HashKey %x, Hash %x, HashBytes %x", len(key), a, b, c)
		}
	}
}

// TestIndexFindStopsAtEmpty checks that Find reports a key absent when
// no position on its probe sequence matches, also when the table wraps.
func TestIndexFindStopsAtEmpty(t *testing.T) {
	x := Index{}
	x.Init(0)
	last := ^uint64(0) // homes in the last slot, so its sequence wraps
	x.Insert(last, 0)
	x.Insert(last, 1)
	if p, ok := x.Find(last, func(p uint32) bool { return p == 1 }); !ok || p != 1 {
		t.Fatalf("Find past the wrap = %d, %v; want 1, true", p, ok)
	}
	if p, ok := x.Find(last, func(uint32) bool { return false }); ok {
		t.Fatalf("Find of an absent key = %d, true", p)
	}
}
