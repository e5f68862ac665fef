// Package keyindex finds the joiner's entries by identity key
// (provider/provider_id, a record's Kafka key): the owner state's
// identities and the node tracker's nodes. Both are looked up by the
// hash the joiner's read-ahead computes once per record, and the table's
// slots are what the read-ahead prefetches.
package keyindex

import "github.com/cespare/xxhash/v2"

// Index maps identity keys to positions in its owner's list: an
// open-addressing table of 8-byte slots with linear probing. A slot holds
// the high 32 bits of the key's hash (the tag) and 1 + the position (0:
// empty); Find walks the slots from Home and has the owner compare the
// full key at every position whose tag matches, so the table is exact
// whatever the hash does. A key's home slot is its tag scaled to the
// table (tag*len>>32), so growing the table needs no key: it grows by a
// quarter when 7/8 full, which keeps it between 70% and 87.5% full (8 to
// 11.4 bytes per key). Entries are never removed.
type Index struct {
	Slots []uint64
	N     int // keys held
	// HashMask is applied to every hash; tests narrow it to force
	// collisions of tags and probe sequences.
	HashMask uint64
}

const minIndexSlots = 16

// Init empties the table, sized for n keys and a sixteenth more.
func (x *Index) Init(n int) {
	x.Slots, x.N = make([]uint64, max(minIndexSlots, (n+n/16)*8/7+1)), 0
	if x.HashMask == 0 {
		x.HashMask = ^uint64(0)
	}
}

// Home returns the first slot to probe for hash h.
func (x *Index) Home(h uint64) int { return int((h >> 32) * uint64(len(x.Slots)) >> 32) }

// HashKey returns the hash of the key provider/providerID (xxhash of the
// key's bytes, without building the key).
func (x *Index) HashKey(provider, providerID string) uint64 {
	var buf [256]byte
	if len(provider)+1+len(providerID) > len(buf) {
		var d xxhash.Digest
		d.Reset()
		_, _ = d.WriteString(provider)
		_, _ = d.WriteString("/")
		_, _ = d.WriteString(providerID)
		return d.Sum64() & x.HashMask
	}
	k := append(append(append(buf[:0], provider...), '/'), providerID...)
	return xxhash.Sum64(k) & x.HashMask
}

// HashBytes returns the hash of a whole key (the same as HashKey's).
func (x *Index) HashBytes(key []byte) uint64 { return xxhash.Sum64(key) & x.HashMask }

// Hash returns the hash of a whole key (the same as HashKey's).
func (x *Index) Hash(key string) uint64 { return xxhash.Sum64String(key) & x.HashMask }

// Find returns the position filed under h for which is reports true,
// walking h's probe sequence from its home slot until an empty slot: is
// compares the owner's full key at each position whose tag matches h.
func (x *Index) Find(h uint64, is func(i uint32) bool) (uint32, bool) {
	slots := x.Slots
	for p := x.Home(h); ; p++ {
		if p == len(slots) {
			p = 0
		}
		v := slots[p]
		if v == 0 {
			return 0, false
		}
		if v>>32 == h>>32 && is(uint32(v)-1) {
			return uint32(v) - 1, true
		}
	}
}

// full reports whether one more key needs a larger table.
func (x *Index) full() bool { return (x.N+1)*8 > len(x.Slots)*7 }

// Insert files position i under h, growing the table first if needed.
// The key must not be in the table.
func (x *Index) Insert(h uint64, i uint32) {
	if x.full() {
		x.grow()
	}
	x.put(h>>32<<32 | uint64(i+1))
}

func (x *Index) put(v uint64) {
	p := x.Home(v)
	for x.Slots[p] != 0 {
		if p++; p == len(x.Slots) {
			p = 0
		}
	}
	x.Slots[p] = v
	x.N++
}

// grow makes the table a quarter larger.
func (x *Index) grow() {
	old := x.Slots
	x.Slots, x.N = make([]uint64, len(old)+len(old)/4), 0
	for _, v := range old {
		if v != 0 {
			x.put(v)
		}
	}
}

// AtHome returns the position filed in h's home slot if its tag matches
// h: what the read-ahead prefetches, a guess only a lookup confirms (a
// key that probes past its home slot is not found this way).
func (x *Index) AtHome(h uint64) (uint32, bool) {
	v := x.Slots[x.Home(h)]
	if v == 0 || v>>32 != h>>32 {
		return 0, false
	}
	return uint32(v) - 1, true
}
