package dedupe

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/cespare/xxhash/v2"

	"github.com/driftline/driftline/internal/cputime"
	"github.com/driftline/driftline/internal/memstat"
)

// The benchmarks compare the Set with the alternatives on the same
// inputs; bench/dedupe/README.md has the figures and the command.
//
// Inputs: seq events come from 64 producers in turn, each sending
// increasing seqs with a gap of 2 once in 16 events; id events from 1024
// producers, each id a distinct 26-byte ULID-like string. Events occur 1 ms
// apart.

const (
	seqProducers = 64
	idProducers  = 1024
	idLen        = 26
)

var producerNames = func() []string {
	out := make([]string, idProducers)
	for i := range out {
		out[i] = fmt.Sprintf("node-agent-%05d", i)
	}
	return out
}()

// seqInput returns the producer and seq of event i (the same for every
// implementation, cheap to compute).
func seqInput(i int) (string, uint64) {
	round := uint64(i / seqProducers)
	return producerNames[i%seqProducers], round + round/16
}

// idInput is n distinct ids in one string, so that taking one allocates
// nothing.
func idInput(n int) string {
	var sb strings.Builder
	sb.Grow(n * idLen)
	for i := range n {
		fmt.Fprintf(&sb, "01JD3Q9R6V%016d", uint64(i)*0x9e3779b97f4a7c15>>20)
	}
	return sb.String()
}

func idAt(all string, i int) string { return all[i*idLen : (i+1)*idLen] }

// observer is one implementation under comparison; it reports whether the
// identity was new.
type observer interface {
	seq(producer string, seq uint64, at time.Time) bool
	id(producer, id string, at time.Time) bool
}

// set is the package's Set.
type set struct{ s *Set }

func (o set) seq(p string, seq uint64, at time.Time) bool {
	return o.s.Observe(p, true, seq, "", at, 1) == Fresh
}
func (o set) id(p, id string, at time.Time) bool { return o.s.Observe(p, false, 0, id, at, 1) == Fresh }

// roaring32 is a bare 32-bit roaring bitmap per producer (no horizon).
type roaring32 map[string]*roaring.Bitmap

func (o roaring32) seq(p string, seq uint64, _ time.Time) bool {
	return bitmapOf(o, p, roaring.New).CheckedAdd(uint32(seq))
}
func (o roaring32) id(string, string, time.Time) bool { panic("unused") }

// roaring64s is a 64-bit roaring bitmap per producer (the previous Set).
type roaring64s map[string]*roaring64.Bitmap

func (o roaring64s) seq(p string, seq uint64, _ time.Time) bool {
	return bitmapOf(o, p, roaring64.New).CheckedAdd(seq)
}
func (o roaring64s) id(string, string, time.Time) bool { panic("unused") }

// bitmapOf returns the bitmap of producer p in m, made by mk the first
// time.
func bitmapOf[M ~map[string]B, B comparable](m M, p string, mk func() B) B {
	var zero B
	b := m[p]
	if b == zero {
		b = mk()
		m[p] = b
	}
	return b
}

// hashMap keeps only a 64-bit xxhash of the identity: NOT exact (two
// events whose hashes collide are merged), measured as the floor an
// inexact design would buy.
type hashMap map[uint64]struct{}

func (o hashMap) seq(p string, seq uint64, _ time.Time) bool {
	return o.add(xxhash.Sum64String(p) ^ seq*0x9e3779b97f4a7c15)
}
func (o hashMap) id(p, id string, _ time.Time) bool {
	return o.add(xxhash.Sum64String(p) ^ xxhash.Sum64String(id))
}
func (o hashMap) add(h uint64) bool {
	if _, ok := o[h]; ok {
		return false
	}
	o[h] = struct{}{}
	return true
}

// stringMap keys an exact string per identity (the previous Set for ids).
type stringMap map[string]struct{}

func (o stringMap) seq(p string, seq uint64, _ time.Time) bool {
	var buf [160]byte
	return o.add(strconv.AppendUint(append(append(buf[:0], p...), 0), seq, 10))
}
func (o stringMap) id(p, id string, _ time.Time) bool {
	var buf [300]byte
	return o.add(append(append(append(buf[:0], p...), 0), id...))
}
func (o stringMap) add(k []byte) bool {
	if _, ok := o[string(k)]; ok {
		return false
	}
	o[string(k)] = struct{}{}
	return true
}

// impl is a dedupe structure under comparison.
type impl struct {
	name string
	new  func() observer
}

func impls(kind string) []impl {
	out := []impl{{"set", func() observer { return set{New(DefaultOptions())} }}}
	if kind == "seq" {
		out = append(out, impl{"roaring32", func() observer { return roaring32{} }}, impl{"roaring64", func() observer { return roaring64s{} }})
	}
	return append(out, impl{"xxhash-map-inexact", func() observer { return hashMap{} }}, impl{"string-map", func() observer { return stringMap{} }})
}

func heap() (alloc, mallocs uint64) {
	alloc, mallocs, _ = heapObjects()
	return alloc, mallocs
}

// heapObjects also returns the objects live on the heap, which the
// garbage collector visits at every cycle.
func heapObjects() (alloc, mallocs, objects uint64) {
	m := memstat.Collected()
	return m.HeapAlloc, m.Mallocs, m.HeapObjects
}

// BenchmarkRetained inserts N distinct events per iteration (run it with
// -benchtime=1x) and reports the time, allocations and retained heap per
// event.
func BenchmarkRetained(b *testing.B) {
	for _, kind := range []string{"seq", "id"} {
		for _, n := range []int{1_000_000, 5_000_000} {
			var ids string
			if kind == "id" {
				ids = idInput(n)
			}
			for _, im := range impls(kind) {
				b.Run(fmt.Sprintf("%s/%s/N=%dM", kind, im.name, n/1_000_000), func(b *testing.B) {
					for range b.N {
						b.StopTimer()
						before, mallocs := heap()
						o := im.new()
						b.StartTimer()
						start, cpu := time.Now(), cputime.Now()
						for i := range n {
							at := t0.Add(time.Duration(i) * time.Millisecond)
							var fresh bool
							if kind == "seq" {
								p, seq := seqInput(i)
								fresh = o.seq(p, seq, at)
							} else {
								fresh = o.id(producerNames[i%idProducers], idAt(ids, i), at)
							}
							if !fresh {
								b.Fatalf("event %d not fresh", i)
							}
						}
						elapsed, cpu := time.Since(start), cputime.Now()-cpu
						b.StopTimer()
						after, mallocs2 := heap()
						runtime.KeepAlive(o)
						b.ReportMetric(float64(elapsed.Nanoseconds())/float64(n), "ns/event")
						b.ReportMetric(float64(cpu)/float64(n), "cpu-ns/event")
						b.ReportMetric(float64(int64(after)-int64(before))/float64(n), "B/event")
						b.ReportMetric(float64(mallocs2-mallocs)/float64(n), "allocs/event")
						b.StartTimer()
					}
				})
			}
		}
	}
}

// BenchmarkObserve is the Set's hot path in the steady state: a 1 h
// horizon released in 5-minute buckets, the watermark moved every 1000
// events, a redelivery every 20 events. It reports ns/op and allocs/op
// per event and the retained heap per live identity.
func BenchmarkObserve(b *testing.B) {
	const live = 3_600_000 // events within the horizon at 1 ms apart
	ids := idInput(live + 1000)
	// agent: a fleet of node-agents, each a producer of contiguous seqs
	// (18 events of each live within the horizon); agent-gaps: the same
	// with every other seq skipped, as an agent that numbers events it
	// sends elsewhere (or the fleet's heartbeats, numbered by time slot).
	const agents = 200_000
	agentNames := make([]string, agents)
	for i := range agentNames {
		agentNames[i] = fmt.Sprintf("nodeagent-node-%06d", i)
	}
	for _, kind := range []string{"seq", "id", "agent", "agent-gaps"} {
		b.Run(kind, func(b *testing.B) {
			base, _, baseObjects := heapObjects()
			s := New(Options{Horizon: time.Hour, Bucket: 5 * time.Minute})
			obs := func(i int) Result {
				at := t0.Add(time.Duration(i) * time.Millisecond)
				if i%1000 == 0 {
					s.Advance(at)
				}
				switch kind {
				case "seq":
					p, seq := seqInput(i)
					return s.Observe(p, true, seq, "", at, 1)
				case "agent":
					return s.Observe(agentNames[i%agents], true, uint64(i/agents), "", at, 1)
				case "agent-gaps":
					return s.Observe(agentNames[i%agents], true, 2*uint64(i/agents), "", at, 1)
				}
				return s.Observe(producerNames[i%idProducers], false, 0, idAt(ids, i%(live+1000)), at, 1)
			}
			// Warm up to the steady state: a full horizon of events.
			for i := range live + 1000 {
				obs(i)
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cputime.Now()
			i := live + 1000
			for n := range b.N {
				if n%20 == 19 {
					obs(i - 500) // a redelivery
					continue
				}
				obs(i)
				i++
			}
			cpu = cputime.Now() - cpu
			b.StopTimer()
			b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
			after, _, objects := heapObjects()
			b.ReportMetric(float64(int64(after)-int64(base))/float64(s.Len()), "heapB/live")
			b.ReportMetric(float64(int64(objects)-int64(baseObjects))/float64(s.Producers()), "objects/producer")
		})
	}
}
