package sink

import (
	"encoding/binary"
	"fmt"
	"iter"
	"math"
	"math/bits"
	"reflect"
	"sync"
	"time"
	"unsafe"

	"github.com/driftline/driftline/pipeline/readmodel"
)

// Packed holds the rows of type R of a batch packed: each row is a
// fixed number of 4-byte slots with no pointer in them, its strings and
// lists copied into one byte array of the batch and referenced by offset,
// its times as Unix seconds and nanoseconds. A batch of the joiner holds
// a row for most findings and nodes a catch-up round changed, and the
// batch being written is held beside the one being built: as structs of
// strings (a node's status is 888 bytes with 41 pointers, a finding 584
// with 31) they were the largest part of the heap the collector marks.
// Rows are unpacked again a block at a time as the insert reads them
// (Blocks).
//
// A string is copied once per batch where it can be told cheaply that
// it was copied before: a row that overwrites its earlier row keeps the
// strings that did not change, and a small cache by the string's address
// finds the values many rows share (states, versions, domains, node
// tags), which the joiner interns so that they share their bytes; a hit
// compares the bytes, so an address reused for another value is only a
// miss. R may hold strings (of any string type), []string, time.Time,
// numbers, booleans, and arrays and structs of those; anything else is a
// programming error (Packed panics on its first row).
//
// The zero value is empty and ready to use.
type Packed[R any] struct {
	lay *layout
	// chunks hold packChunkRows rows each, a row lay.slots consecutive
	// slots; Reset keeps them for the next batch.
	chunks [][]slot
	n      int
	// bytes holds the strings and lists of the rows, each its length (a
	// uvarint) and its bytes; a row refers to one by its offset. bytes[0]
	// is a zero length, so offset 0 is the empty string or list.
	bytes []byte
	cache *[packCacheSize]copied
}

const (
	packChunkBits = 10
	packChunkRows = 1 << packChunkBits
)

// A slot is the unit of a packed row: a ref, a part of a time, or 4
// bytes of plain fields. A string's ref in 4 bytes instead of an offset
// and a length in 8 takes a third off a node's status row (the rows of
// two rounds were the largest part of the joiner's heap after its state).
type slot = uint32

// ref is where a string or a list is in Packed.bytes: the offset of its
// length.
type ref = slot

// copied is an entry of the cache: the address and length of a value
// copied into the batch, and where its copy is.
type copied struct {
	addr uintptr
	at   ref
}

const (
	packCacheBits = 10
	packCacheSize = 1 << packCacheBits
)

// A layout is how rows of one type are packed: a field per op.
type layout struct {
	slots int
	ops   []op
}

type opKind uint8

const (
	opString opKind = iota // a slot: its ref
	opList                 // a slot: its ref, after which each value is a uvarint length and its bytes
	opTime                 // three slots: Unix seconds (zeroTime for a zero time), low half first, and nanoseconds
	opRaw                  // size bytes copied as they are, in (size+3)/4 slots
)

type op struct {
	kind opKind
	off  uintptr // in R
	size uintptr // opRaw
	at   int     // first slot in the row
}

// zeroTime stands for a zero time.Time in a packed row (the bits of
// math.MinInt64 seconds, which no time.Time holds).
const zeroTime uint64 = 1 << 63

var (
	layouts  sync.Map // reflect.Type -> *layout
	timeType = reflect.TypeFor[time.Time]()
)

func layoutOf(t reflect.Type) *layout {
	if l, ok := layouts.Load(t); ok {
		return l.(*layout)
	}
	l := &layout{}
	l.add(t, 0, t.String())
	layouts.Store(t, l)
	return l
}

// add adds the ops of a field of type t at offset off.
func (l *layout) add(t reflect.Type, off uintptr, path string) {
	switch {
	case t == timeType:
		l.ops = append(l.ops, op{kind: opTime, off: off, at: l.slots})
		l.slots += 3
		return
	case t.Kind() == reflect.String:
		l.ops = append(l.ops, op{kind: opString, off: off, at: l.slots})
		l.slots++
		return
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String:
		l.ops = append(l.ops, op{kind: opList, off: off, at: l.slots})
		l.slots++
		return
	case t.Kind() == reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			l.add(f.Type, off+f.Offset, path+"."+f.Name)
		}
		return
	case plain(t):
		// Consecutive plain fields share their slots.
		if n := len(l.ops); n > 0 && l.ops[n-1].kind == opRaw && l.ops[n-1].off+l.ops[n-1].size == off {
			last := &l.ops[n-1]
			last.size = off + t.Size() - last.off
			l.slots = last.at + int(last.size+3)/4
			return
		}
		l.ops = append(l.ops, op{kind: opRaw, off: off, size: t.Size(), at: l.slots})
		l.slots += int(t.Size()+3) / 4
		return
	}
	panic(fmt.Sprintf("sink: cannot pack %s of type %s", path, t))
}

// plain reports whether values of t hold no pointer and are copied as
// bytes.
func plain(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return true
	case reflect.Array:
		return plain(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if !plain(t.Field(i).Type) {
				return false
			}
		}
		return true
	}
	return false
}

// PackedOf returns a Packed holding rows, in order.
func PackedOf[R any](rows ...R) Packed[R] {
	var p Packed[R]
	for i := range rows {
		p.Append(&rows[i])
	}
	return p
}

// Len returns the number of rows.
func (p *Packed[R]) Len() int { return p.n }

// Append adds the row v and returns its index.
func (p *Packed[R]) Append(v *R) int {
	if p.lay == nil {
		p.lay = layoutOf(reflect.TypeFor[R]())
	}
	if c := p.n >> packChunkBits; c == len(p.chunks) {
		p.chunks = append(p.chunks, make([]slot, packChunkRows*p.lay.slots))
	}
	p.n++
	p.pack(p.row(p.n-1), v, false)
	return p.n - 1
}

// row returns the slots of row i.
func (p *Packed[R]) row(i int) []slot {
	w := p.lay.slots
	k := (i & (packChunkRows - 1)) * w
	return p.chunks[i>>packChunkBits][k : k+w : k+w]
}

// Set overwrites the row at index i (below Len) with v.
func (p *Packed[R]) Set(i int, v *R) { p.pack(p.row(i), v, true) }

// Row returns the row at index i (below Len). Its strings alias the
// batch's bytes: they are valid until Reset.
func (p *Packed[R]) Row(i int) R {
	var r R
	p.unpack(&r, p.row(i), nil)
	return r
}

// All returns the rows, in order (Row).
func (p *Packed[R]) All() []R {
	out := make([]R, p.n)
	for i := range out {
		p.unpack(&out[i], p.row(i), nil)
	}
	return out
}

// Reset empties p, keeping its capacity.
func (p *Packed[R]) Reset() {
	p.n, p.bytes = 0, p.bytes[:0]
	if p.cache != nil {
		*p.cache = [packCacheSize]copied{}
	}
}

// pack writes v into row; over is set when row holds v's earlier row,
// whose unchanged strings and lists are kept.
func (p *Packed[R]) pack(row []slot, v *R, over bool) {
	base := unsafe.Pointer(v)
	for _, o := range p.lay.ops {
		at := &row[o.at]
		src := unsafe.Add(base, o.off)
		switch o.kind {
		case opString:
			s := *(*string)(src)
			if over && p.str(*at) == s {
				continue
			}
			*at = p.put(s)
		case opList:
			l := *(*[]string)(src)
			if over && p.listIs(*at, l) {
				continue
			}
			*at = p.putList(l)
		case opTime:
			t := (*time.Time)(src)
			sec, ns := zeroTime, slot(0)
			if !t.IsZero() {
				sec, ns = uint64(t.Unix()), slot(t.Nanosecond())
			}
			row[o.at], row[o.at+1], row[o.at+2] = slot(sec), slot(sec>>32), ns
		case opRaw:
			copy(unsafe.Slice((*byte)(unsafe.Pointer(at)), o.size), unsafe.Slice((*byte)(src), o.size))
		}
	}
}

// unpack writes row into *r (zero): its lists into *buf when buf is not
// nil (their values alias the batch's bytes), else into new slices.
func (p *Packed[R]) unpack(r *R, row []slot, buf *[]string) {
	base := unsafe.Pointer(r)
	for _, o := range p.lay.ops {
		at := row[o.at]
		dst := unsafe.Add(base, o.off)
		switch o.kind {
		case opString:
			*(*string)(dst) = p.str(at)
		case opList:
			if at == 0 {
				continue
			}
			var l []string
			if buf != nil {
				start := len(*buf)
				*buf = p.appendList(*buf, at)
				l = (*buf)[start:len(*buf):len(*buf)]
			} else {
				l = p.appendList(nil, at)
			}
			*(*[]string)(dst) = l
		case opTime:
			if sec := uint64(at) | uint64(row[o.at+1])<<32; sec != zeroTime {
				*(*time.Time)(dst) = time.Unix(int64(sec), int64(row[o.at+2])).UTC()
			}
		case opRaw:
			copy(unsafe.Slice((*byte)(dst), o.size), unsafe.Slice((*byte)(unsafe.Pointer(&row[o.at])), o.size))
		}
	}
}

// span returns the bytes of the string or list at at (they alias
// p.bytes: valid until Reset).
func (p *Packed[R]) span(at ref) []byte {
	if at == 0 {
		return nil
	}
	if n := p.bytes[at]; n < 0x80 {
		return p.bytes[at+1 : at+1+ref(n)]
	}
	return p.spanLong(at)
}

// spanLong is span of a value of 128 bytes or more.
func (p *Packed[R]) spanLong(at ref) []byte {
	n, k := binary.Uvarint(p.bytes[at:])
	return p.bytes[int(at)+k : int(at)+k+int(n)]
}

// str returns the string at at (it aliases p.bytes: valid until Reset).
func (p *Packed[R]) str(at ref) string {
	b := p.span(at)
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// cached returns the cache entry of a value at addr of length n.
func (p *Packed[R]) cached(addr uintptr, n int) *copied {
	if p.cache == nil {
		p.cache = new([packCacheSize]copied)
	}
	return &p.cache[(uint64(addr)^uint64(n))*0x9e3779b97f4a7c15>>(64-packCacheBits)]
}

// put copies v into p.bytes, unless the cache finds a copy of it.
func (p *Packed[R]) put(v string) ref {
	if v == "" {
		return 0
	}
	addr := uintptr(unsafe.Pointer(unsafe.StringData(v)))
	c := p.cached(addr, len(v))
	if c.addr == addr && p.str(c.at) == v {
		return c.at
	}
	off := p.begin(len(v))
	p.bytes = append(p.bytes, v...)
	c.addr, c.at = addr, off
	return off
}

// begin appends the length n of a value to p.bytes and returns the
// value's ref.
func (p *Packed[R]) begin(n int) ref {
	if len(p.bytes) == 0 {
		p.bytes = append(p.bytes, 0) // offset 0: empty
	}
	if len(p.bytes)+binary.MaxVarintLen64+n > math.MaxUint32 {
		panic("sink: the packed rows of a batch hold more than 4 GiB of strings")
	}
	off := ref(len(p.bytes))
	p.bytes = binary.AppendUvarint(p.bytes, uint64(n))
	return off
}

// putList copies l into p.bytes, each value as its length and bytes,
// unless the cache finds a copy of it: the joiner interns lists, so
// that equal lists share their array.
func (p *Packed[R]) putList(l []string) ref {
	if len(l) == 0 {
		return 0
	}
	addr := uintptr(unsafe.Pointer(&l[0]))
	c := p.cached(addr, len(l))
	if c.addr == addr && p.listIs(c.at, l) {
		return c.at
	}
	n := 0
	for _, v := range l {
		n += uvarintLen(len(v)) + len(v)
	}
	off := p.begin(n)
	for _, v := range l {
		p.bytes = binary.AppendUvarint(p.bytes, uint64(len(v)))
		p.bytes = append(p.bytes, v...)
	}
	c.addr, c.at = addr, off
	return off
}

// uvarintLen returns the length of n as a uvarint.
func uvarintLen(n int) int { return (bits.Len64(uint64(n)|1) + 6) / 7 }

// appendList appends the values of the list at at to l; they alias
// p.bytes.
func (p *Packed[R]) appendList(l []string, at ref) []string {
	for b := p.span(at); len(b) > 0; {
		n, k := binary.Uvarint(b)
		l = append(l, unsafe.String(unsafe.SliceData(b[k:]), int(n)))
		b = b[k+int(n):]
	}
	return l
}

// listIs reports whether the list at at holds the values of l (the empty
// list when at is 0).
func (p *Packed[R]) listIs(at ref, l []string) bool {
	if at == 0 {
		return len(l) == 0
	}
	b := p.span(at)
	if len(l) == 0 {
		return false
	}
	for _, v := range l {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) || string(b[k:k+int(n)]) != v {
			return false
		}
		b = b[k+int(n):]
	}
	return len(b) == 0
}

// Blocks yields the rows of the Packed of each batch, unpacked, in
// blocks of at most readmodel.BlockRows rows (the insert's block): the
// same buffer each time, as long as the rows up to a block (a live
// round's few rows do not allocate a block's), its strings aliasing the
// batches' bytes.
func Blocks[R any](bs []*Batch, of func(*Batch) *Packed[R]) iter.Seq[[][]R] {
	return func(yield func([][]R) bool) {
		total := 0
		for _, b := range bs {
			total += of(b).n
		}
		if total == 0 {
			return
		}
		buf := make([]R, min(total, readmodel.BlockRows))
		var lists []string
		var zero R
		n := 0
		for _, b := range bs {
			p := of(b)
			for i := range p.n {
				buf[n] = zero
				p.unpack(&buf[n], p.row(i), &lists)
				if n++; n == len(buf) {
					if !yield([][]R{buf}) {
						return
					}
					n, lists = 0, lists[:0]
				}
			}
		}
		if n > 0 {
			yield([][]R{buf[:n]})
		}
	}
}
