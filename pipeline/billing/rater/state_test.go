package rater

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/driftline/driftline/internal/memstat"
	"github.com/driftline/driftline/pipeline/billing/claims"
	"github.com/driftline/driftline/pipeline/billing/pricebook"
	"github.com/driftline/driftline/pipeline/contract"
)

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC).UnixNano()

func ev(part int32, key, usageID string, d contract.Digest, at int64) *usageEvent {
	return &usageEvent{part: part, key: []byte(key), hash: hashKey([]byte(key)), usageID: usageID, digest: d, at: at}
}

// The rater decodes with a reused ZeroCopy contract.Decoder: the key and
// usage_id it claims must not alias the record they came from.
func TestCheckKeepsItsOwnUsageID(t *testing.T) {
	s := newKeyState(48 * time.Hour)
	s.parts[3] = s.newPart()
	line := []byte("usage-1 src/m-1")
	e := &usageEvent{part: 3, usageID: unsafe.String(&line[0], 7), key: line[8:], hash: hashKey(line[8:]), digest: 7, at: t0}
	if v, _, _ := s.check(e); v != verdictNew {
		t.Fatalf("verdict %v", v)
	}
	copy(line, "XXXXXXXXXXXXXXX") // the record's memory is reused
	s.commit()
	if v, first, _ := s.check(ev(3, "src/m-1", "usage-2", 7, t0)); v != verdictDuplicate || first != (claim{"usage-1", 7}) {
		t.Fatalf("kept %v %+v", v, first)
	}
}

// TestCheckTellsConflicts: the same usage_id with the same payload digest
// is a redelivery, with another one a conflict naming the first claim, and
// another usage_id on the key a duplicate; in the transaction and after
// its commit alike.
func TestCheckTellsConflicts(t *testing.T) {
	s := newKeyState(48 * time.Hour)
	s.parts[0] = s.newPart()
	for _, committed := range []bool{false, true} {
		if !committed {
			if v, _, _ := s.check(ev(0, "k", "u-1", 11, t0)); v != verdictNew {
				t.Fatalf("first: %v", v)
			}
		} else {
			s.commit()
		}
		if v, _, _ := s.check(ev(0, "k", "u-1", 11, t0)); v != verdictRedelivery {
			t.Fatalf("committed %v: redelivery: %v", committed, v)
		}
		if v, first, _ := s.check(ev(0, "k", "u-1", 12, t0)); v != verdictConflict || first != (claim{"u-1", 11}) {
			t.Fatalf("committed %v: conflict: %v %+v", committed, v, first)
		}
		if v, first, _ := s.check(ev(0, "k", "u-2", 11, t0)); v != verdictDuplicate || first.usageID != "u-1" {
			t.Fatalf("committed %v: duplicate: %v %+v", committed, v, first)
		}
	}
	// A claim without a digest (0) takes any payload for a redelivery.
	if v, _, _ := s.check(ev(0, "old", "u-9", 0, t0)); v != verdictNew {
		t.Fatalf("no digest: %v", v)
	}
	if v, _, _ := s.check(ev(0, "old", "u-9", 5, t0)); v != verdictRedelivery {
		t.Fatalf("unknown digest: %v", v)
	}
	if v, _, _ := s.check(ev(1, "k", "u-1", 11, t0)); v != verdictNotOwned {
		t.Fatalf("not owned: %v", v)
	}
}

// TestCheckAbortUndoes: an aborted transaction's claims and watermark are
// gone, a committed one's stay.
func TestCheckAbortUndoes(t *testing.T) {
	s := newKeyState(time.Hour)
	s.parts[0] = s.newPart()
	s.check(ev(0, "a", "u-a", 1, t0))
	s.commit()
	s.check(ev(0, "b", "u-b", 1, t0+int64(10*time.Hour)))
	s.abort()
	if got := s.parts[0].watermark; got != t0 {
		t.Fatalf("watermark after abort %d, want %d", got, t0)
	}
	if v, _, _ := s.check(ev(0, "a", "u-a", 1, t0)); v != verdictRedelivery {
		t.Fatalf("committed claim: %v", v)
	}
	if v, _, _ := s.check(ev(0, "b", "u-x", 1, t0)); v != verdictNew {
		t.Fatalf("aborted claim: %v", v)
	}
	if s.keys() != 2 {
		t.Fatalf("keys %d, want 2", s.keys())
	}
}

// TestCheckCollidingHashes: keys whose 64-bit hashes collide are told
// apart (the index is forced to hold another key under the same hash).
func TestCheckCollidingHashes(t *testing.T) {
	s := newKeyState(48 * time.Hour)
	s.parts[0] = s.newPart()
	s.check(ev(0, "k1", "u-1", 1, t0))
	s.commit()
	// k2 comes with k1's hash, as a collision would.
	k2 := func(usageID string) *usageEvent {
		e := ev(0, "k2", usageID, 2, t0)
		e.hash = hashOf("k1")
		return e
	}
	if v, _, _ := s.check(k2("u-2")); v != verdictNew {
		t.Fatalf("colliding key: %v", v)
	}
	if v, _, _ := s.check(k2("u-2")); v != verdictRedelivery {
		t.Fatalf("colliding key again: %v", v)
	}
	if v, first, _ := s.check(k2("u-3")); v != verdictDuplicate || first.usageID != "u-2" {
		t.Fatalf("colliding key, other id: %v %+v", v, first)
	}
	if v, first, _ := s.check(ev(0, "k1", "u-4", 1, t0)); v != verdictDuplicate || first.usageID != "u-1" {
		t.Fatalf("k1 beside its collision: %v %+v", v, first)
	}
	s.abort()
	if v, _, _ := s.check(k2("u-3")); v != verdictNew {
		t.Fatalf("colliding key after abort: %v", v)
	}
}

// TestCheckHorizon: usage that occurred more than the horizon before the
// watermark is late; keys of generations past the horizon are forgotten
// and dropped at commit; the watermark does not pass a record's broker
// timestamp.
func TestCheckHorizon(t *testing.T) {
	h := 4 * time.Hour
	s := newKeyState(h)
	s.parts[0] = s.newPart()
	s.check(ev(0, "old", "u-old", 1, t0))
	s.commit()
	// A clock running ahead moves the watermark only to the broker's time.
	ahead := ev(0, "ahead", "u-ahead", 1, t0+int64(100*time.Hour))
	ahead.ts = t0 + int64(time.Minute)
	s.check(ahead)
	if v, _, _ := s.check(ev(0, "old", "u-old", 1, t0)); v != verdictRedelivery {
		t.Fatalf("redelivery within the horizon: %v", v)
	}
	s.commit()
	later := t0 + int64(h+2*time.Hour)
	if v, _, _ := s.check(ev(0, "new", "u-new", 1, later)); v != verdictNew {
		t.Fatalf("new: %v", v)
	}
	if v, _, floor := s.check(ev(0, "old", "u-old", 1, t0)); v != verdictLate || floor != later-int64(h) {
		t.Fatalf("redelivery past the horizon: %v %d", v, floor)
	}
	// Usage within the horizon whose key was claimed before it: the old
	// claim is forgotten (its generation ended before the floor).
	if v, _, _ := s.check(ev(0, "old", "u-other", 1, later-int64(time.Hour))); v != verdictNew {
		t.Fatalf("key past the horizon: %v", v)
	}
	before := len(s.parts[0].gens.List)
	s.commit()
	if after := len(s.parts[0].gens.List); after >= before {
		t.Fatalf("generations %d -> %d: none dropped", before, after)
	}
}

// TestCheckMemory: a claim costs its arena entry (digest, usage_id, the
// key's part the usage_id does not end with) and a table slot, and
// nothing the garbage collector scans: keys and usage_ids of 30 bytes that
// share nothing, and fleet-like ones whose usage_id ends with the key's
// metering_id.
func TestCheckMemory(t *testing.T) {
	const n = 200_000
	for _, c := range []struct {
		name       string
		key, usage func(i int) string
		max        float64
	}{
		{"30-byte keys and usage_ids", func(i int) string { return fmt.Sprintf("gpu-meter-eu1/m-%014d", i) },
			func(i int) string { return fmt.Sprintf("usage-%024x", uint64(i)*0x9e3779b97f4a7c15) }, 100},
		{"usage_ids ending with the metering_id", func(i int) string { return fmt.Sprintf("gpuaas/vm-%07d:r1:2", i) },
			func(i int) string { return fmt.Sprintf("usg-run1-vm-%07d:r1:2", i) }, 70},
	} {
		evs := make([]*usageEvent, n)
		for i := range evs {
			evs[i] = ev(0, c.key(i), c.usage(i), contract.Digest(i+1), t0)
		}
		before := memstat.Live()
		s := newKeyState(48 * time.Hour)
		s.parts[0] = s.newPart()
		for _, e := range evs {
			s.check(e)
		}
		s.commit()
		after := memstat.Live()
		if s.keys() != n {
			t.Fatalf("%s: keys %d", c.name, s.keys())
		}
		heap := float64(after-before) / n
		est := float64(s.bytes()) / n
		t.Logf("%s: %.0f bytes of heap per claim (%.0f estimated)", c.name, heap, est)
		if heap > c.max || est > c.max {
			t.Errorf("%s: %.0f bytes of heap per claim (%.0f estimated), want at most %.0f", c.name, heap, est, c.max)
		}
		runtime.KeepAlive(s)
		runtime.KeepAlive(evs)
	}
}

func hashOf(key string) uint64 {
	return hashKey([]byte(key))
}

// TestReplayEqualsLive: the state a restore rebuilds (the committed
// records through check, in batches of another size) equals the live
// state after rounds of which some aborted and were processed again, as
// a transaction's records are after an abort: same verdicts, keys,
// watermark and generations, with keys forgotten past the horizon.
func TestReplayEqualsLive(t *testing.T) {
	const horizon = 4 * time.Hour
	rng := rand.New(rand.NewPCG(1, 2))
	var log []*usageEvent
	at := t0
	for i := 0; i < 20_000; i++ {
		at += int64(time.Duration(rng.IntN(4000)) * time.Millisecond) // about 11 h in all
		key := fmt.Sprintf("src/m-%d", rng.IntN(15_000))
		id := fmt.Sprintf("u-%d", rng.IntN(18_000))
		occurred := at - int64(time.Duration(rng.IntN(6*3600))*time.Second) // some late
		log = append(log, ev(0, key, id, contract.Digest(rng.IntN(3)+1), occurred))
		log[i].ts = at
	}
	verdicts := func(s *keyState, evs []*usageEvent) []verdict {
		var out []verdict
		for _, e := range evs {
			v, _, _ := s.check(e)
			out = append(out, v)
		}
		return out
	}
	live := newKeyState(horizon)
	live.parts[0] = live.newPart()
	var liveVerdicts []verdict
	for i := 0; i < len(log); {
		n := min(1+rng.IntN(700), len(log)-i)
		vs := verdicts(live, log[i:i+n])
		if rng.IntN(4) == 0 {
			live.abort() // the round is polled again
			continue
		}
		live.commit()
		liveVerdicts = append(liveVerdicts, vs...)
		i += n
	}
	replay := newKeyState(horizon)
	replay.parts[0] = replay.newPart()
	var replayVerdicts []verdict
	for i := 0; i < len(log); i += 1000 {
		replayVerdicts = append(replayVerdicts, verdicts(replay, log[i:min(i+1000, len(log))])...)
		replay.commit()
	}
	late := 0
	for i := range liveVerdicts {
		if liveVerdicts[i] != replayVerdicts[i] {
			t.Fatalf("event %d: live %v, replay %v", i, liveVerdicts[i], replayVerdicts[i])
		}
		if liveVerdicts[i] == verdictLate {
			late++
		}
	}
	if late == 0 || late == len(log) {
		t.Fatalf("%d late events of %d: the test does not exercise the horizon", late, len(log))
	}
	lp, rp := live.parts[0], replay.parts[0]
	if lp.watermark != rp.watermark || len(lp.gens.List) != len(rp.gens.List) {
		t.Fatalf("live watermark %d, %d generations; replay %d, %d", lp.watermark, len(lp.gens.List), rp.watermark, len(rp.gens.List))
	}
	for i := range lp.gens.List {
		lg, rg := lp.gens.List[i], rp.gens.List[i]
		if lg.Start != rg.Start || lg.Claims() != rg.Claims() {
			t.Fatalf("generation %d: live %d with %d claims, replay %d with %d", i, lg.Start, lg.Claims(), rg.Start, rg.Claims())
		}
		lg.Each(func(key []byte, c claims.Claim) {
			r, ok := rg.Find(hashKey(key), key)
			if !ok {
				t.Fatalf("generation %d: key %s missing from the replay", i, key)
			}
			if string(c.UsageID) != string(r.UsageID) || c.Digest != r.Digest {
				t.Fatalf("generation %d: key %s: live %s %x, replay %s %x", i, key, c.UsageID, c.Digest, r.UsageID, r.Digest)
			}
		})
	}
}

func TestOptionsCompression(t *testing.T) {
	for _, c := range []struct {
		in, want string
		ok       bool
	}{{"", "snappy", true}, {"none", "none", true}, {"zstd", "zstd", true}, {"brotli", "", false}} {
		o := Options{Prices: &pricebook.Store{}, Compression: c.in}
		o.Brokers = []string{"127.0.0.1:9092"}
		err := o.defaults()
		if (err == nil) != c.ok || (c.ok && o.Compression != c.want) {
			t.Errorf("Compression %q: got %q, err %v", c.in, o.Compression, err)
		}
	}
}
