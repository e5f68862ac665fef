package claims

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// TestGensFindAddForget claims keys in generations, with two keys under
// one hash, and forgets the generations that end at the floor.
func TestGensFindAddForget(t *testing.T) {
	gs := Gens{Span: 100}
	key := func(i int) []byte { return []byte(fmt.Sprintf("src/m-%d", i)) }
	refs := map[int]Ref{}
	for i := range 1000 {
		g := gs.Gen(int64(i))
		if g.Start != int64(i/100*100) {
			t.Fatalf("usage at %d in the generation from %d", i, g.Start)
		}
		refs[i] = g.Add(Hash(key(i)), key(i), fmt.Sprintf("u-%d", i), 0)
	}
	// Another key under the hash of key 5, as a collision would be.
	gs.Gen(5).Add(Hash(key(5)), []byte("other"), "u-other", 9)
	if c, ok := gs.Find(Hash(key(5)), []byte("other"), 0); !ok || string(c.UsageID) != "u-other" || c.Digest != 9 {
		t.Fatalf("colliding key: %v %+v", ok, c)
	}
	if c, ok := gs.Find(Hash(key(5)), key(5), 0); !ok || string(c.UsageID) != "u-5" {
		t.Fatalf("key 5 beside its collision: %v %+v", ok, c)
	}
	if _, ok := gs.Find(Hash(key(5000)), key(5000), 0); ok {
		t.Fatal("unclaimed key found")
	}
	if gs.Claims() != 1001 || len(gs.List) != 10 {
		t.Fatalf("%d claims in %d generations", gs.Claims(), len(gs.List))
	}
	// Generations ending at or before the floor are forgotten by Find at
	// once and dropped by Forget.
	if _, ok := gs.Find(Hash(key(150)), key(150), 200); ok {
		t.Fatal("claim of a forgotten generation found")
	}
	gs.Forget(200)
	if gs.Claims() != 800 || gs.List[0].Start != 200 {
		t.Fatalf("after Forget(200): %d claims from %d", gs.Claims(), gs.List[0].Start)
	}
	n := 0
	gs.List[0].Each(func(key []byte, c Claim) { n++ })
	if n != 100 {
		t.Fatalf("Each passed %d claims", n)
	}
	gs.List[0].Remove(Hash(key(250)), refs[250])
	if _, ok := gs.Find(Hash(key(250)), key(250), 200); ok || gs.Claims() != 799 {
		t.Fatalf("removed claim: found %v, %d claims", ok, gs.Claims())
	}
}

// TestGensAtTheEndsOfTime: usage that occurred within a generation's
// span of either end of int64 (contract.MinTime, contract.MaxTime) is
// claimed in a generation that Find looks in and Forget keeps until the
// floor passes its end, though that end (or the multiple of Span it
// starts at) lies beyond int64.
func TestGensAtTheEndsOfTime(t *testing.T) {
	const span = int64(12 * time.Hour)
	for _, at := range []int64{math.MaxInt64, math.MaxInt64 - span/3, math.MinInt64, math.MinInt64 + span/3, -1, 0} {
		gs := Gens{Span: span}
		key := []byte("gw/m-1")
		gs.Gen(at).Add(Hash(key), key, "u-1", 1)
		if g := gs.Gen(at); len(gs.List) != 1 || g.Start > at || at-g.Start >= span {
			t.Fatalf("at %d: %d generations, the one of at starts at %d", at, len(gs.List), g.Start)
		}
		for _, floor := range []int64{math.MinInt64, Sub(at, span), at} {
			if _, ok := gs.Find(Hash(key), key, floor); !ok {
				t.Fatalf("at %d, floor %d: claim not found", at, floor)
			}
			if gs.Ended(at, floor) {
				t.Fatalf("at %d: the generation ended at floor %d", at, floor)
			}
			gs.Forget(floor)
			if gs.Claims() != 1 {
				t.Fatalf("at %d: Forget(%d) dropped the claim", at, floor)
			}
		}
		if at > math.MaxInt64-span {
			continue // its generation ends after the largest floor
		}
		end := gs.List[0].Start + span
		if at < math.MinInt64+span {
			end = at / span * span // the end of the first generation, which starts at math.MinInt64
		}
		if _, ok := gs.Find(Hash(key), key, end-1); !ok || gs.Ended(at, end-1) {
			t.Fatalf("at %d: forgotten before its end %d", at, end)
		}
		if _, ok := gs.Find(Hash(key), key, end); ok || !gs.Ended(at, end) {
			t.Fatalf("at %d: still found at its end %d", at, end)
		}
		gs.Forget(end)
		if len(gs.List) != 0 {
			t.Fatalf("at %d: Forget(%d) kept the generation", at, end)
		}
	}
}

// TestSub saturates where a difference of int64 would wrap around, and
// Floor with it.
func TestSub(t *testing.T) {
	for _, c := range []struct{ a, b, want int64 }{
		{10, 3, 7},
		{-10, 3, -13},
		{math.MinInt64 + 5, 3, math.MinInt64 + 2},
		{math.MinInt64 + 5, 6, math.MinInt64},
		{math.MinInt64, math.MaxInt64, math.MinInt64},
		{math.MaxInt64 - 5, -3, math.MaxInt64 - 2},
		{math.MaxInt64 - 5, -6, math.MaxInt64},
		{0, math.MinInt64, math.MaxInt64},
		{-1, math.MinInt64, math.MaxInt64},
		{math.MinInt64, math.MinInt64, 0},
	} {
		if got := Sub(c.a, c.b); got != c.want {
			t.Errorf("Sub(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
	if got := Floor(math.MinInt64+int64(time.Hour), 48*time.Hour); got != math.MinInt64 {
		t.Errorf("Floor near the earliest time = %d", got)
	}
	if got := Floor(int64(time.Hour), 48*time.Hour); got != -int64(47*time.Hour) {
		t.Errorf("Floor before 1970 = %d", got)
	}
}

// TestAppendUsageKey: the keys of two pairs of metering_source and
// metering_id differ, over every pair of short strings of a and slash, and
// a plain source's is its usage key.
func TestAppendUsageKey(t *testing.T) {
	var strs []string
	for n := range 5 {
		for bits := range 1 << n {
			b := make([]byte, n)
			for i := range b {
				b[i] = "a/"[bits>>i&1]
			}
			strs = append(strs, string(b))
		}
	}
	seen := map[string][2]string{}
	for _, source := range strs {
		for _, id := range strs {
			k := string(AppendUsageKey(nil, source, id))
			if p, ok := seen[k]; ok {
				t.Fatalf("(%q, %q) and (%q, %q) share the key %q", p[0], p[1], source, id, k)
			}
			seen[k] = [2]string{source, id}
			if joined := source + "/" + id; PlainSource(source) != (k == joined) {
				t.Fatalf("(%q, %q): key %q, plain %v", source, id, k, PlainSource(source))
			}
		}
	}
	if k := string(AppendUsageKey([]byte("x"), "gw/eu", "m-1")); k != "x/5/gw/eu/m-1" {
		t.Fatalf("key %q", k)
	}
}

// TestGenerationAgainstAMap adds, finds and removes many claims, with
// forced hash collisions, keys that share their end with the usage_id
// and keys that do not, and compares every answer with a map's.
func TestGenerationAgainstAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	g := NewGeneration(0)
	type want struct {
		usageID string
		ref     Ref
		h       uint64
	}
	held := map[string]want{}
	// Keys ending in 7 share few hashes, so that probe sequences cross
	// and keys collide.
	hash := func(k string) uint64 {
		if k[len(k)-1] == '7' {
			return uint64(len(k)) << 60
		}
		return Hash([]byte(k))
	}
	keyOf := func(i int) (key, usageID string) {
		m := fmt.Sprintf("vm-%07d:r1:%d", i, i%10)
		switch i % 3 {
		case 0:
			return "gpuaas/" + m, "usg-run1-" + m // the metering_id ends the usage_id
		case 1:
			return "gpuaas/" + m, "usg-run1-" + m + "-dup" // shares nothing
		}
		return m, m // the whole key is the usage_id
	}
	check := func(step int) {
		for k, w := range held {
			c, ok := g.Find(w.h, []byte(k))
			if !ok || string(c.UsageID) != w.usageID {
				t.Fatalf("step %d: key %s: found %v %q, want %q", step, k, ok, c.UsageID, w.usageID)
			}
		}
		n := 0
		g.Each(func(key []byte, c Claim) {
			n++
			if w, ok := held[string(key)]; !ok || w.usageID != string(c.UsageID) {
				t.Fatalf("step %d: Each passed %s %s, held %+v", step, key, c.UsageID, w)
			}
		})
		if n != len(held) || g.Claims() != len(held) {
			t.Fatalf("step %d: Each %d, Claims %d, want %d", step, n, g.Claims(), len(held))
		}
	}
	for step := range 30_000 {
		i := rng.IntN(20_000)
		k, u := keyOf(i)
		h := hash(k)
		if w, ok := held[k]; ok {
			if rng.IntN(2) == 0 {
				g.Remove(w.h, w.ref)
				delete(held, k)
				if _, found := g.Find(h, []byte(k)); found {
					t.Fatalf("step %d: removed key %s found", step, k)
				}
			}
		} else {
			if _, found := g.Find(h, []byte(k)); found {
				t.Fatalf("step %d: unclaimed key %s found", step, k)
			}
			held[k] = want{usageID: u, ref: g.Add(h, []byte(k), u, 1), h: h}
		}
		if step%5_000 == 0 {
			check(step)
		}
	}
	check(-1)
}

// Keys whose usage_id holds their metering_id keep their metering_source
// as a number while the generation has room for more sources, and in the
// entry after: both read back alike.
func TestGenerationSources(t *testing.T) {
	g := NewGeneration(0)
	const n = maxSources + 500
	key := func(i int) (k []byte, usageID string) {
		m := fmt.Sprintf("m-%d", i)
		return []byte(fmt.Sprintf("src%d/%s", i, m)), "usg-" + m
	}
	for i := range n {
		k, u := key(i)
		g.Add(Hash(k), k, u, 1)
	}
	if len(g.sources) != maxSources {
		t.Fatalf("%d sources numbered, want %d", len(g.sources), maxSources)
	}
	for i := range n {
		k, u := key(i)
		if c, ok := g.Find(Hash(k), k); !ok || string(c.UsageID) != u {
			t.Fatalf("key %s: %v %q", k, ok, c.UsageID)
		}
	}
	seen := 0
	g.Each(func(k []byte, c Claim) {
		seen++
		if want := "usg-" + string(k[bytes.IndexByte(k, '/')+1:]); string(c.UsageID) != want {
			t.Fatalf("Each: key %s with %s", k, c.UsageID)
		}
	})
	if seen != n {
		t.Fatalf("Each passed %d, want %d", seen, n)
	}
}
