package dedupe

import (
	"encoding/binary"

	"github.com/cespare/xxhash/v2"

	"github.com/driftline/driftline/pipeline/stream/snap"
)

// chunkSize is the size of an id arena chunk; an entry larger than it
// gets a chunk of its own.
const chunkSize = 64 << 10

// keepFree is the least number of released chunks kept for reuse; up to
// as many as the newest bucket holds are kept, since the next bucket
// likely needs as many.
const keepFree = 16

// An arena entry is: producer index (4 bytes, little endian), content
// digest (8 bytes, little endian), id length (uvarint), id bytes.
const entryHead = 12

// idSet is the exact set of (producer, event_id) identities, grouped by
// bucket of occurred_at. Each bucket has its own index, dropped whole on
// release: deleting entries from one long-lived Go map instead leaves
// tombstones that slow every later lookup many times over (bench/dedupe).
type idSet struct {
	chunks  [][]byte // arena chunks by number
	free    []uint32 // free chunk numbers, those with memory last
	spare   int      // free chunks with memory
	buckets []idBucket
	key     []byte // scratch for collide keys
}

// idBucket is the identities that occurred in one bucket.
type idBucket struct {
	key int64
	// index maps the hash of an identity to its arena entry:
	// chunk number << 32 | offset. It holds no pointers, so the garbage
	// collector does not scan it.
	index map[uint64]uint64
	// collide holds identities whose hash another identity of the bucket
	// held when they were added (producer index, 4 bytes little endian,
	// then the id), with their digest. It is nil unless 64-bit hashes
	// collide.
	collide map[string]uint64
	chunks  []uint32 // the last one is being filled
}

func (st *idSet) init() { *st = idSet{} }

// hashID is the index key of (producer index, id): the id's xxhash mixed
// with the producer, so the same id from two producers lands apart.
func hashID(prod uint32, id string) uint64 {
	return xxhash.Sum64String(id) ^ (uint64(prod)+1)*0x9e3779b97f4a7c15
}

// add adds the identity with its content digest to bucket b and reports
// whether it was absent; when it was not, first is the digest it was
// added with.
func (st *idSet) add(b int64, prod uint32, id string, digest uint64) (added bool, first uint64) {
	return st.addHash(st.bucket(b), hashID(prod, id), prod, id, digest)
}

func (st *idSet) addHash(bk *idBucket, h uint64, prod uint32, id string, digest uint64) (bool, uint64) {
	if ref, ok := bk.index[h]; ok {
		if st.equal(ref, prod, id) {
			return false, st.digest(ref)
		}
		k := st.collideKey(prod, id)
		if first, ok := bk.collide[string(k)]; ok {
			return false, first
		}
		if bk.collide == nil {
			bk.collide = make(map[string]uint64)
		}
		bk.collide[string(k)] = digest
		return true, 0
	}
	bk.index[h] = st.append(bk, prod, id, digest)
	return true, 0
}

// digest returns the digest of the entry at ref.
func (st *idSet) digest(ref uint64) uint64 {
	return binary.LittleEndian.Uint64(st.chunks[uint32(ref>>32)][uint32(ref)+4:])
}

func (st *idSet) collideKey(prod uint32, id string) []byte {
	st.key = binary.LittleEndian.AppendUint32(st.key[:0], prod)
	st.key = append(st.key, id...)
	return st.key
}

// equal reports whether the entry at ref is (prod, id).
func (st *idSet) equal(ref uint64, prod uint32, id string) bool {
	e := st.chunks[uint32(ref>>32)][uint32(ref):]
	if binary.LittleEndian.Uint32(e) != prod {
		return false
	}
	n, k := binary.Uvarint(e[entryHead:])
	e = e[entryHead+k:]
	return n == uint64(len(id)) && string(e[:n]) == id
}

// append copies the identity into bk's arena and returns its ref.
func (st *idSet) append(bk *idBucket, prod uint32, id string, digest uint64) uint64 {
	size := entryHead + snap.UvarintLen(uint64(len(id))) + len(id)
	var c uint32
	if n := len(bk.chunks); n > 0 && cap(st.chunks[bk.chunks[n-1]])-len(st.chunks[bk.chunks[n-1]]) >= size {
		c = bk.chunks[n-1]
	} else {
		c = st.newChunk(size)
		bk.chunks = append(bk.chunks, c)
	}
	buf := st.chunks[c]
	off := len(buf)
	buf = binary.LittleEndian.AppendUint32(buf, prod)
	buf = binary.LittleEndian.AppendUint64(buf, digest)
	buf = binary.AppendUvarint(buf, uint64(len(id)))
	st.chunks[c] = append(buf, id...)
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
	// Size a new newest bucket's index like the one before it: growing a
	// map rehashes it. (An older bucket opened by a late event starts
	// small.)
	hint := 0
	if n := len(st.buckets); n > 0 && i == n {
		hint = len(st.buckets[n-1].index)
	}
	st.buckets = append(st.buckets, idBucket{})
	copy(st.buckets[i+1:], st.buckets[i:])
	st.buckets[i] = idBucket{key: b, index: make(map[uint64]uint64, hint)}
	return &st.buckets[i]
}

func (st *idSet) newChunk(size int) uint32 {
	if n := len(st.free); n > 0 {
		c := st.free[n-1]
		st.free = st.free[:n-1]
		if cap(st.chunks[c]) > 0 {
			st.spare--
		}
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

// expire releases the buckets below eb, whole.
func (st *idSet) expire(eb int64) {
	keep := keepFree
	if k := len(st.buckets); k > 0 {
		keep = max(keep, len(st.buckets[k-1].chunks))
	}
	var bare []uint32 // released without memory
	n := 0
	for n < len(st.buckets) && st.buckets[n].key < eb {
		for _, c := range st.buckets[n].chunks {
			if st.spare < keep {
				st.chunks[c] = st.chunks[c][:0]
				st.free = append(st.free, c)
				st.spare++
			} else {
				st.chunks[c] = nil
				bare = append(bare, c)
			}
		}
		n++
	}
	if len(bare) > 0 {
		st.free = append(bare, st.free...) // popped last
	}
	if n == 0 {
		return
	}
	kept := copy(st.buckets, st.buckets[n:])
	clear(st.buckets[kept:])
	st.buckets = st.buckets[:kept]
}

// each calls fn with every identity of bucket bk and its digest (arena,
// then overflow in no particular order).
func (st *idSet) each(bk *idBucket, fn func(prod uint32, id []byte, digest uint64)) {
	for _, c := range bk.chunks {
		for off := 0; off < len(st.chunks[c]); {
			e := st.chunks[c][off:]
			prod := binary.LittleEndian.Uint32(e)
			l, k := binary.Uvarint(e[entryHead:])
			fn(prod, e[entryHead+k:entryHead+k+int(l)], binary.LittleEndian.Uint64(e[4:]))
			off += entryHead + k + int(l)
		}
	}
	for key, d := range bk.collide {
		fn(binary.LittleEndian.Uint32([]byte(key)), []byte(key[4:]), d)
	}
}

func (st *idSet) len() int {
	n := 0
	for i := range st.buckets {
		n += len(st.buckets[i].index) + len(st.buckets[i].collide)
	}
	return n
}
