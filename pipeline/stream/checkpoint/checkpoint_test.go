package checkpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/internal/testenv"
)

const testPartitions = 4

func newStore(t testing.TB, brokers []string, mod func(*Options)) *Store {
	t.Helper()
	opts := Options{Brokers: brokers, Partitions: testPartitions, Create: true, ChunkBytes: 4 << 10}
	if mod != nil {
		mod(&opts)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func randomBlob(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func cut(r, o, t int64) Cut {
	return Cut{"platform.records": r, "provider.observations": o, "nodeagent.telemetry": t}
}

func mustSave(t *testing.T, s *Store, group string, p int32, c Cut, blob []byte) {
	t.Helper()
	if err := s.Save(testCtx(t), group, p, c, blob); err != nil {
		t.Fatalf("save %s/%d %v: %v", group, p, c, err)
	}
}

// wantLoad loads and checks the blob and cut; want nil expects no checkpoint.
func wantLoad(t *testing.T, s *Store, group string, p int32, notAfter Cut, want []byte, wantCut Cut) {
	t.Helper()
	cp, ok, err := s.Load(testCtx(t), group, p, notAfter)
	if err != nil {
		t.Fatalf("load %s/%d %v: %v", group, p, notAfter, err)
	}
	if want == nil {
		if ok {
			t.Fatalf("load %s/%d %v: got checkpoint at cut %v, want none", group, p, notAfter, cp.Cut)
		}
		return
	}
	if !ok {
		t.Fatalf("load %s/%d %v: no checkpoint, want the one at %v", group, p, notAfter, wantCut)
	}
	if !bytes.Equal(cp.Blob, want) {
		t.Fatalf("load %s/%d %v: blob of %d bytes differs from the %d saved", group, p, notAfter, len(cp.Blob), len(want))
	}
	if cp.Cut.String() != wantCut.String() {
		t.Fatalf("load %s/%d %v: cut %v, want %v", group, p, notAfter, cp.Cut, wantCut)
	}
}

func TestRoundtripMultiChunk(t *testing.T) {
	brokers, _ := testenv.Kafka(t, testPartitions)
	reg := prometheus.NewRegistry()
	s := newStore(t, brokers, func(o *Options) { o.ChunkBytes = 64 << 10; o.Registerer = reg })
	blob := randomBlob(1, 1<<20+12345) // 17 chunks, the last partial
	c := cut(100, 200, 300)
	mustSave(t, s, "g", 2, c, blob)
	wantLoad(t, s, "g", 2, c, blob, c)

	// A fresh store (another host) loads it too.
	s2 := newStore(t, brokers, nil)
	wantLoad(t, s2, "g", 2, cut(1000, 1000, 1000), blob, c)

	// An empty state is a checkpoint too.
	mustSave(t, s, "g", 3, c, []byte{})
	wantLoad(t, s, "g", 3, c, []byte{}, c)

	if got := testutil.ToFloat64(s.m.savedBytes); got != float64(len(blob)) {
		t.Errorf("saved bytes metric %v, want %d", got, len(blob))
	}
	if got := testutil.ToFloat64(s.m.loads.WithLabelValues("hit")); got != 2 {
		t.Errorf("load hits %v, want 2", got)
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n == 0 {
		t.Errorf("registered metrics: %d, %v", n, err)
	}
}

func TestNoneIsNotOK(t *testing.T) {
	brokers, _ := testenv.Kafka(t, testPartitions)
	s := newStore(t, brokers, nil)
	wantLoad(t, s, "g", 0, cut(5, 5, 5), nil, nil)
	if got := testutil.ToFloat64(s.m.loads.WithLabelValues("miss")); got != 1 {
		t.Errorf("load misses %v, want 1", got)
	}
	// A partition the topic does not have is an error that names it.
	_, _, err := s.Load(testCtx(t), "g", testPartitions, cut(5, 5, 5))
	if err == nil || !strings.Contains(err.Error(), "driftline.checkpoints/4") {
		t.Fatalf("load of partition %d: %v", testPartitions, err)
	}
}

func TestNewestNotAfter(t *testing.T) {
	brokers, _ := testenv.Kafka(t, testPartitions)
	s := newStore(t, brokers, nil)
	b1, b2, b3 := randomBlob(1, 10000), randomBlob(2, 9000), randomBlob(3, 11000)
	c1, c2, c3 := cut(10, 5, 0), cut(20, 6, 0), cut(30, 7, 3)
	mustSave(t, s, "g", 1, c1, b1)
	mustSave(t, s, "g", 1, c2, b2)
	mustSave(t, s, "g", 1, c3, b3)

	wantLoad(t, s, "g", 1, cut(100, 100, 100), b3, c3)
	wantLoad(t, s, "g", 1, c3, b3, c3)
	wantLoad(t, s, "g", 1, cut(30, 7, 2), b2, c2)     // c3 is one telemetry record beyond
	wantLoad(t, s, "g", 1, cut(25, 100, 100), b2, c2) // c3 beyond in records
	wantLoad(t, s, "g", 1, cut(19, 100, 100), b1, c1)
	wantLoad(t, s, "g", 1, cut(9, 100, 100), nil, nil)
	// Cuts over other streams never compare.
	wantLoad(t, s, "g", 1, Cut{"platform.records": 100, "provider.observations": 100}, nil, nil)
	if got := testutil.ToFloat64(s.m.skipped.WithLabelValues("after_cut")); got < 4 {
		t.Errorf("skipped after_cut %v, want at least 4", got)
	}
}

func TestTornAndDamagedIgnored(t *testing.T) {
	brokers, _ := testenv.Kafka(t, testPartitions)
	s := newStore(t, brokers, nil)
	good := randomBlob(1, 20000)
	c := cut(10, 10, 10)
	mustSave(t, s, "g", 0, c, good)

	// A writer that died after its chunks, before its manifest.
	torn := randomBlob(2, 30000)
	m := &manifest{Version: manifestVersion, ID: newID(), Group: "g", Partition: 0, Slot: slotB, Cut: cut(20, 20, 20),
		Size: int64(len(torn)), ChunkSize: s.opts.ChunkBytes, Chunks: 8}
	if err := s.writeChunks(testCtx(t), m, torn); err != nil {
		t.Fatal(err)
	}
	wantLoad(t, s, "g", 0, cut(100, 100, 100), good, c)

	// A manifest whose chunks do not hash to it (overwritten by a racing
	// writer under compaction, say), and one whose chunks are missing.
	m.XXH64 = 12345
	produceManifest(t, s, m)
	m2 := *m
	m2.ID = newID() // no chunk has this id
	produceManifest(t, s, &m2)
	wantLoad(t, s, "g", 0, cut(100, 100, 100), good, c)
	if got := testutil.ToFloat64(s.m.skipped.WithLabelValues("damaged")); got != 2 {
		t.Errorf("skipped damaged %v, want 2", got)
	}

	// An undecodable manifest is skipped as well.
	rec := &kgo.Record{Partition: 0, Value: []byte("{"), Headers: []kgo.RecordHeader{{Key: kindHeader, Value: []byte(kindManifest)}}}
	if err := s.prod.ProduceSync(testCtx(t), rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
	wantLoad(t, s, "g", 0, cut(100, 100, 100), good, c)

	// Saving again after all that works.
	next := randomBlob(3, 5000)
	mustSave(t, s, "g", 0, cut(30, 30, 30), next)
	wantLoad(t, s, "g", 0, cut(100, 100, 100), next, cut(30, 30, 30))
}

func produceManifest(t *testing.T, s *Store, m *manifest) {
	t.Helper()
	v, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	rec := &kgo.Record{Key: manifestKey(m.Group, m.Partition, m.Slot), Value: v, Partition: m.Partition,
		Headers: []kgo.RecordHeader{{Key: kindHeader, Value: []byte(kindManifest)}}}
	if err := s.prod.ProduceSync(testCtx(t), rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func TestLoadReadsOnlyTheTail(t *testing.T) {
	brokers, _ := testenv.Kafka(t, testPartitions)
	s := newStore(t, brokers, nil)
	const n, chunks = 60, 4
	blobs := make([][]byte, n)
	for i := range blobs {
		blobs[i] = randomBlob(uint64(i), chunks*s.opts.ChunkBytes-7)
		mustSave(t, s, "g", 1, cut(int64(10*i), 0, 0), blobs[i])
		// Another group's checkpoints interleave on the same partition.
		mustSave(t, s, "other", 1, cut(int64(10*i), 0, 0), blobs[i][:100])
	}
	fetched := func() float64 { return testutil.ToFloat64(s.m.fetchRecords) }
	total := float64(n * (chunks + 1 + 2))

	before := fetched()
	wantLoad(t, s, "g", 1, cut(1e6, 0, 0), blobs[n-1], cut(10*(n-1), 0, 0))
	if got := fetched() - before; got > firstWindow+chunks {
		t.Errorf("loading the newest checkpoint fetched %v records of %v, want at most %d", got, total, firstWindow+chunks)
	}

	// An old one: the scan passes each newer manifest but jumps over
	// the chunks of the checkpoints it passes.
	const back = 40
	before = fetched()
	wantLoad(t, s, "g", 1, cut(10*(n-1-back), 0, 0), blobs[n-1-back], cut(10*(n-1-back), 0, 0))
	t.Logf("loading a checkpoint %d back fetched %v records of %v", back, fetched()-before, total)
	if got, limit := fetched()-before, float64(back*3+firstWindow+chunks); got > limit {
		t.Errorf("loading a checkpoint %d back fetched %v records of %v, want at most %v", back, got, total, limit)
	}
}

func TestGroupsAndPartitionsDoNotMix(t *testing.T) {
	brokers, _ := testenv.Kafka(t, testPartitions)
	s := newStore(t, brokers, nil)
	c := cut(7, 7, 7)
	want := map[string][]byte{}
	for _, g := range []string{"g1", "g2", "g/1"} {
		for p := int32(0); p < 3; p++ {
			b := randomBlob(uint64(len(want)), 9000+int(p)*1000+len(g))
			want[g+string(rune('0'+p))] = b
			mustSave(t, s, g, p, c, b)
		}
	}
	for _, g := range []string{"g1", "g2", "g/1"} {
		for p := int32(0); p < 3; p++ {
			wantLoad(t, s, g, p, c, want[g+string(rune('0'+p))], c)
		}
		wantLoad(t, s, g, 3, c, nil, nil)
	}
	wantLoad(t, s, "g", 0, c, nil, nil)
}

// TestSlotsAndTombstones checks the keys a compacted topic relies on:
// checkpoints alternate between two slots, also across stores, and a
// smaller checkpoint tombstones the extra chunk keys of its slot.
func TestSlotsAndTombstones(t *testing.T) {
	brokers, _ := testenv.Kafka(t, testPartitions)
	s := newStore(t, brokers, nil)
	cb := s.opts.ChunkBytes
	mustSave(t, s, "g", 0, cut(1, 1, 1), randomBlob(1, 5*cb))  // slot a, 5 chunks
	mustSave(t, s, "g", 0, cut(2, 2, 2), randomBlob(2, 3*cb))  // slot b, 3 chunks
	s2 := newStore(t, brokers, nil)                            // knows nothing: must find slot b is newest
	mustSave(t, s2, "g", 0, cut(3, 3, 3), randomBlob(3, 2*cb)) // slot a, tombstones a/2..a/4
	wantLoad(t, s, "g", 0, cut(9, 9, 9), randomBlob(3, 2*cb), cut(3, 3, 3))

	var keys []string
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{DefaultTopic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for len(keys) < 5+1+3+1+2+1+3 {
		fs := cl.PollFetches(testCtx(t))
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			k := string(r.Key)
			if r.Value == nil {
				k += " tombstone"
			}
			keys = append(keys, k)
		})
	}
	want := "g/0/a/0 g/0/a/1 g/0/a/2 g/0/a/3 g/0/a/4 g/0/a/m " +
		"g/0/b/0 g/0/b/1 g/0/b/2 g/0/b/m " +
		"g/0/a/0 g/0/a/1 g/0/a/m " +
		"g/0/a/2 tombstone g/0/a/3 tombstone g/0/a/4 tombstone"
	if got := strings.Join(keys, " "); got != want {
		t.Fatalf("keys:\n got %s\nwant %s", got, want)
	}
}

func TestTopicCreatedAndChecked(t *testing.T) {
	brokers, _ := testenv.Kafka(t, testPartitions)
	s := newStore(t, brokers, func(o *Options) { o.Topic = "ckpt.custom" })
	if s.parts != testPartitions {
		t.Fatalf("created %d partitions, want %d", s.parts, testPartitions)
	}
	// The streams grew: the topic must grow too.
	_, err := New(testCtx(t), Options{Brokers: brokers, Topic: "ckpt.custom", Partitions: 8})
	if err == nil || !strings.Contains(err.Error(), "add partitions") {
		t.Fatalf("too few partitions: %v", err)
	}
	_, err = New(testCtx(t), Options{Brokers: brokers, Topic: "missing"})
	if err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("missing topic: %v", err)
	}
}

func TestCutNotAfter(t *testing.T) {
	f := func(c, limit Cut, want bool) {
		t.Helper()
		if got := c.NotAfter(limit); got != want {
			t.Errorf("%v.NotAfter(%v) = %v, want %v", c, limit, got, want)
		}
	}
	f(cut(1, 2, 3), cut(1, 2, 3), true)
	f(cut(1, 2, 3), cut(2, 2, 3), true)
	f(cut(1, 2, 4), cut(2, 2, 3), false)
	f(Cut{"a": 1}, Cut{"a": 1, "b": 0}, false)
	f(Cut{"a": 1, "b": 0}, Cut{"a": 1, "c": 0}, false)
}

// TestLoadUsable: a whole checkpoint its reader refuses (a snapshot
// version it cannot decode) is skipped and counted, and the next older one
// is offered; when the reader refuses all, there is none.
func TestLoadUsable(t *testing.T) {
	brokers, _ := testenv.Kafka(t, testPartitions)
	s := newStore(t, brokers, nil)
	older, newer := randomBlob(1, 10_000), randomBlob(2, 10_000)
	c1, c2 := cut(10, 10, 10), cut(20, 20, 20)
	mustSave(t, s, "g", 1, c1, older)
	mustSave(t, s, "g", 1, c2, newer)

	var offered []string
	refuse := func(blobs ...[]byte) func(Checkpoint) error {
		return func(cp Checkpoint) error {
			offered = append(offered, cp.Cut.String())
			for _, b := range blobs {
				if bytes.Equal(cp.Blob, b) {
					return errors.New("unknown snapshot version")
				}
			}
			return nil
		}
	}
	cp, ok, err := s.LoadUsable(testCtx(t), "g", 1, c2, refuse(newer))
	if err != nil || !ok {
		t.Fatalf("load: ok %v, err %v", ok, err)
	}
	if !bytes.Equal(cp.Blob, older) || cp.Cut.String() != c1.String() {
		t.Fatalf("loaded the checkpoint at %v, want the older one at %v", cp.Cut, c1)
	}
	if want := []string{c2.String(), c1.String()}; strings.Join(offered, " ") != strings.Join(want, " ") {
		t.Fatalf("offered %v, want the newer then the older", offered)
	}
	if got := testutil.ToFloat64(s.m.skipped.WithLabelValues("unusable")); got != 1 {
		t.Fatalf("skipped as unusable: %v, want 1", got)
	}

	offered = nil
	if cp, ok, err := s.LoadUsable(testCtx(t), "g", 1, c2, refuse(newer, older)); err != nil || ok {
		t.Fatalf("every checkpoint refused: got the one at %v (ok %v, err %v), want none", cp.Cut, ok, err)
	}
	if len(offered) != 2 {
		t.Fatalf("offered %v, want both", offered)
	}
	// Without a reader's verdict, Load returns the newest.
	wantLoad(t, s, "g", 1, c2, newer, c2)
}
