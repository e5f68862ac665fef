package dedupe

import (
	"encoding/binary"

	"github.com/cespare/xxhash/v2"
)

// chunkSize is the size of an id arena chunk; an entry larger than it
// gets a chunk of its own.
const chunkSize = 64 << 10

// keepFree is the number of released chunks kept for reuse.
const keepFree = 16

// An arena entry is: xxhash (8 bytes, little endian), producer index (4),
// id length (uvarint), id bytes.
const entryHead = 8 + 4

// idSet is the exact set of (producer, event_id) identities, grouped by
// bucket of occurred_at.
type idSet struct {
	// index maps the hash of an identity to its arena entry:
	// chunk number << 32 | offset. It holds no pointers.
	index map[uint64]uint64
	// collide holds, with their bucket, identities whose hash another
	// identity held when they were added (producer index, 4 bytes little
	// endian, then the id). It is empty unless 64-bit hashes collide.
	collide map[string]int64
	chunks  [][]byte // by chunk number; nil when free
	free    []uint32 // free chunk numbers
	buckets []idBucket
	key     []byte // scratch for collide keys
}

// idBucket is the arena chunks of the identities that occurred in one
// bucket.
type idBucket struct {
	key    int64
	chunks []uint32 // the last one is being filled
	n      int      // entries
}

func (st *idSet) init() {
	*st = idSet{index: make(map[uint64]uint64), collide: make(map[string]int64)}
}

// hashID is the index key of (producer index, id): the id's xxhash mixed
// with the producer, so the same id from two producers lands apart.
func hashID(prod uint32, id string) uint64 {
	return xxhash.Sum64String(id) ^ (uint64(prod)+1)*0x9e3779b97f4a7c15
}

// add adds the identity to bucket b and reports whether it was absent.
func (st *idSet) add(b int64, prod uint32, id string) bool {
	h := hashID(prod, id)
	if ref, ok := st.index[h]; ok {
		if st.equal(ref, prod, id) {
			return false
		}
		return st.addCollide(b, prod, id)
	}
	// A colliding identity outlives the one whose hash it met when that
	// one's bucket is released first.
	if len(st.collide) > 0 {
		if _, ok := st.collide[string(st.collideKey(prod, id))]; ok {
			return false
		}
	}
	st.index[h] = st.append(b, h, prod, id)
	return true
}

func (st *idSet) collideKey(prod uint32, id string) []byte {
	st.key = binary.LittleEndian.AppendUint32(st.key[:0], prod)
	st.key = append(st.key, id...)
	return st.key
}

func (st *idSet) addCollide(b int64, prod uint32, id string) bool {
	k := st.collideKey(prod, id)
	if _, ok := st.collide[string(k)]; ok {
		return false
	}
	st.collide[string(k)] = b
	st.bucket(b) // so that snapshots and releases see b
	return true
}

// entry returns the arena entry at ref.
func (st *idSet) entry(ref uint64) []byte { return st.chunks[uint32(ref>>32)][uint32(ref):] }

// equal reports whether the entry at ref is (prod, id).
func (st *idSet) equal(ref uint64, prod uint32, id string) bool {
	e := st.entry(ref)
	if binary.LittleEndian.Uint32(e[8:]) != prod {
		return false
	}
	n, k := binary.Uvarint(e[entryHead:])
	e = e[entryHead+k:]
	return n == uint64(len(id)) && string(e[:n]) == id
}

// append copies the identity into bucket b's arena and returns its ref.
func (st *idSet) append(b int64, h uint64, prod uint32, id string) uint64 {
	bk := st.bucket(b)
	size := entryHead + uvarintLen(uint64(len(id))) + len(id)
	var c uint32
	if n := len(bk.chunks); n > 0 && cap(st.chunks[bk.chunks[n-1]])-len(st.chunks[bk.chunks[n-1]]) >= size {
		c = bk.chunks[n-1]
	} else {
		c = st.newChunk(size)
		bk.chunks = append(bk.chunks, c)
	}
	buf := st.chunks[c]
	off := len(buf)
	buf = binary.LittleEndian.AppendUint64(buf, h)
	buf = binary.LittleEndian.AppendUint32(buf, prod)
	buf = binary.AppendUvarint(buf, uint64(len(id)))
	st.chunks[c] = append(buf, id...)
	bk.n++
	return uint64(c)<<32 | uint64(off)
}

// bucket returns bucket b, adding it in order.
func (st *idSet) bucket(b int64) *idBucket {
	i := len(st.buckets)
	for i > 0 && st.buckets[i-1].key > b {
		i--
	}
	if i > 0 && st.buckets[i-1].key == b {
		return &st.buckets[i-1]
	}
	st.buckets = append(st.buckets, idBucket{})
	copy(st.buckets[i+1:], st.buckets[i:])
	st.buckets[i] = idBucket{key: b}
	return &st.buckets[i]
}

func (st *idSet) newChunk(size int) uint32 {
	if n := len(st.free); n > 0 {
		c := st.free[n-1]
		st.free = st.free[:n-1]
		if cap(st.chunks[c]) >= size {
			st.chunks[c] = st.chunks[c][:0]
		} else {
			st.chunks[c] = make([]byte, 0, max(size, chunkSize))
		}
		return c
	}
	if uint64(len(st.chunks)) > 1<<32-1 {
		panic("BUG: dedupe: 2^32 arena chunks")
	}
	st.chunks = append(st.chunks, make([]byte, 0, max(size, chunkSize)))
	return uint32(len(st.chunks) - 1)
}

// expire releases the buckets below eb.
func (st *idSet) expire(eb int64) {
	n := 0
	for n < len(st.buckets) && st.buckets[n].key < eb {
		bk := &st.buckets[n]
		for _, c := range bk.chunks {
			for off := 0; off < len(st.chunks[c]); {
				e := st.chunks[c][off:]
				h := binary.LittleEndian.Uint64(e)
				if st.index[h] == uint64(c)<<32|uint64(off) {
					delete(st.index, h)
				}
				l, k := binary.Uvarint(e[entryHead:])
				off += entryHead + k + int(l)
			}
			if len(st.free) < keepFree {
				st.chunks[c] = st.chunks[c][:0]
			} else {
				st.chunks[c] = nil
			}
			st.free = append(st.free, c)
		}
		n++
	}
	if n == 0 {
		return
	}
	kept := copy(st.buckets, st.buckets[n:])
	clear(st.buckets[kept:])
	st.buckets = st.buckets[:kept]
	for k, b := range st.collide {
		if b < eb {
			delete(st.collide, k)
		}
	}
	if len(st.index) == 0 {
		// Go maps do not shrink: start afresh once empty.
		st.index = make(map[uint64]uint64)
	}
}

// each calls fn with every identity of bucket bk (arena, then overflow).
func (st *idSet) each(bk *idBucket, fn func(prod uint32, id []byte)) {
	for _, c := range bk.chunks {
		for off := 0; off < len(st.chunks[c]); {
			e := st.chunks[c][off:]
			prod := binary.LittleEndian.Uint32(e[8:])
			l, k := binary.Uvarint(e[entryHead:])
			fn(prod, e[entryHead+k:entryHead+k+int(l)])
			off += entryHead + k + int(l)
		}
	}
	for key, b := range st.collide {
		if b == bk.key {
			fn(binary.LittleEndian.Uint32([]byte(key)), []byte(key[4:]))
		}
	}
}

func (st *idSet) len() int { return len(st.index) + len(st.collide) }

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
