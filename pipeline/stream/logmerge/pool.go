package logmerge

import (
	"bytes"
	"math/bits"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/twmb/franz-go/pkg/kgo"
)

// FetchPool lends a consumer the memory its fetches are decoded into:
// the decompressed record batches and the records themselves, which are
// otherwise allocated per fetch and are most of what a consumer that
// keeps up with a backlog allocates (and so of its garbage collection).
// Pass it with kgo.WithPools, and call Recycle on each record once
// nothing refers to it or to its Key, Value or Headers any more (a
// consumer that keeps some records, say to quarantine them, just does
// not recycle those: their batch is then left to the garbage collector).
//
// It is safe for concurrent use. The zero FetchPool is ready.
type FetchPool struct {
	bytes [poolClasses]sync.Pool // *[]byte of capacity 1<<class
	recs  [poolClasses]sync.Pool // *[]kgo.Record of capacity 1<<class
}

const (
	poolClasses = 31
	// decompressGuess is the decompressed size guessed per compressed
	// byte when the codec does not say it (all but raw snappy); a batch
	// that turns out larger is decoded into a new buffer, which comes back
	// to the pool.
	decompressGuess = 5
)

// xerialPrefix starts a snappy batch in the Java producer's framing,
// whose decoded length is not in one header.
var xerialPrefix = []byte{130, 83, 78, 65, 80, 80, 89, 0}

// decodedLen returns the decompressed size of a batch: exact for raw
// snappy (it is in the block's header), guessed otherwise.
func decodedLen(compressed []byte, codec kgo.CompressionCodecType) int {
	if codec == kgo.CodecSnappy && !bytes.HasPrefix(compressed, xerialPrefix) {
		if n, err := s2.DecodedLen(compressed); err == nil {
			return n
		}
	}
	return decompressGuess * len(compressed)
}

// class returns the smallest class whose capacity holds n.
func class(n int) int {
	if n <= 1 {
		return 0
	}
	return bits.Len(uint(n - 1))
}

// floorClass returns the largest class whose capacity fits in n (n > 0).
func floorClass(n int) int { return bits.Len(uint(n)) - 1 }

// GetDecompressBytes implements kgo.PoolDecompressBytes.
func (p *FetchPool) GetDecompressBytes(compressed []byte, codec kgo.CompressionCodecType) []byte {
	n := decodedLen(compressed, codec)
	c := class(max(4096, n))
	if c >= poolClasses {
		return make([]byte, 0, n)
	}
	if b, ok := p.bytes[c].Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return make([]byte, 0, 1<<c)
}

// PutDecompressBytes implements kgo.PoolDecompressBytes.
func (p *FetchPool) PutDecompressBytes(b []byte) {
	if cap(b) == 0 {
		return
	}
	if c := floorClass(cap(b)); c < poolClasses {
		b = b[:0]
		p.bytes[c].Put(&b)
	}
}

// GetRecords implements kgo.PoolRecords.
func (p *FetchPool) GetRecords(n int) []kgo.Record {
	c := class(n)
	if c >= poolClasses {
		return make([]kgo.Record, 0, n)
	}
	if rs, ok := p.recs[c].Get().(*[]kgo.Record); ok {
		return (*rs)[:0]
	}
	return make([]kgo.Record, 0, 1<<c)
}

// PutRecords implements kgo.PoolRecords.
func (p *FetchPool) PutRecords(rs []kgo.Record) {
	if cap(rs) == 0 {
		return
	}
	if c := floorClass(cap(rs)); c < poolClasses {
		rs = rs[:0]
		p.recs[c].Put(&rs)
	}
}

var (
	_ kgo.PoolDecompressBytes = (*FetchPool)(nil)
	_ kgo.PoolRecords         = (*FetchPool)(nil)
)
