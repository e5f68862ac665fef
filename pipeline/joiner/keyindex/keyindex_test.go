package keyindex

import (
	"fmt"
	"testing"
)

// find walks the probe sequence of h as the owners' lookups do and
// returns the positions filed under h's tag.
func (x *Index) find(h uint64) []uint32 {
	var got []uint32
	for p := x.Home(h); x.Slots[p] != 0; {
		if v := x.Slots[p]; v>>32 == h>>32 {
			got = append(got, uint32(v)-1)
		}
		if p++; p == len(x.Slots) {
			p = 0
		}
	}
	return got
}

// TestIndexFindsEveryKey inserts keys through many growths, with the
// full hash and with one narrowed to a few tags, and checks that every
// key's position is on its probe sequence and the table stays within its
// load bounds.
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
				found := false
				for _, p := range x.find(h) {
					found = found || p == uint32(i)
				}
				if !found {
					t.Fatalf("key %d (hash %x) not on its probe sequence", i, h)
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
