package ownerstate

import "github.com/cespare/xxhash/v2"

// index maps identity keys to identities: an open-addressing table of
// 8-byte slots with linear probing. A slot holds the high 32 bits of the
// key's hash (the tag) and 1 + the identity's index (0: empty); a lookup
// compares the full key of every identity whose tag matches, so the
// table is exact whatever the hash does. A key's home slot is its tag
// scaled to the table (tag*len>>32), so growing the table needs no key:
// it grows by a quarter when 7/8 full, which keeps it between 70% and
// 87.5% full (8 to 11.4 bytes per key).
type index struct {
	slots []uint64
	n     int
	// hashMask is applied to every hash; tests narrow it to force
	// collisions of tags and probe sequences.
	hashMask uint64
}

const minIndexSlots = 16

// init empties the table, sized for n keys and a sixteenth more.
func (x *index) init(n int) {
	x.slots, x.n = make([]uint64, max(minIndexSlots, (n+n/16)*8/7+1)), 0
	if x.hashMask == 0 {
		x.hashMask = ^uint64(0)
	}
}

// home returns the first slot to probe for hash h.
func (x *index) home(h uint64) int { return int((h >> 32) * uint64(len(x.slots)) >> 32) }

// hashKey returns the hash of the key provider/providerID (xxhash of the
// key's bytes, without building the key).
func (x *index) hashKey(provider, providerID string) uint64 {
	var buf [256]byte
	if len(provider)+1+len(providerID) > len(buf) {
		var d xxhash.Digest
		d.Reset()
		_, _ = d.WriteString(provider)
		_, _ = d.WriteString("/")
		_, _ = d.WriteString(providerID)
		return d.Sum64() & x.hashMask
	}
	k := append(append(append(buf[:0], provider...), '/'), providerID...)
	return xxhash.Sum64(k) & x.hashMask
}

// hashBytes returns the hash of a whole key (the same as hashKey's).
func (x *index) hashBytes(key []byte) uint64 { return xxhash.Sum64(key) & x.hashMask }

// hash returns the hash of a whole key (the same as hashKey's).
func (x *index) hash(key string) uint64 { return xxhash.Sum64String(key) & x.hashMask }

// full reports whether one more key needs a larger table.
func (x *index) full() bool { return (x.n+1)*8 > len(x.slots)*7 }

// insert files identity i under h, growing the table first if needed.
// The key must not be in the table.
func (x *index) insert(h uint64, i uint32) {
	if x.full() {
		x.grow()
	}
	x.put(h>>32<<32 | uint64(i+1))
}

func (x *index) put(v uint64) {
	p := x.home(v)
	for x.slots[p] != 0 {
		if p++; p == len(x.slots) {
			p = 0
		}
	}
	x.slots[p] = v
	x.n++
}

// grow makes the table a quarter larger.
func (x *index) grow() {
	old := x.slots
	x.slots, x.n = make([]uint64, len(old)+len(old)/4), 0
	for _, v := range old {
		if v != 0 {
			x.put(v)
		}
	}
}
