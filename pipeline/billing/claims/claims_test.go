package claims

import (
	"fmt"
	"testing"
)

// TestGensFindAddForget claims keys in generations, with two keys under
// one hash, and forgets the generations that end at the floor.
func TestGensFindAddForget(t *testing.T) {
	gs := Gens{Span: 100}
	key := func(i int) []byte { return []byte(fmt.Sprintf("src/m-%d", i)) }
	for i := range 1000 {
		g := gs.Gen(int64(i))
		if g.Start != int64(i/100*100) {
			t.Fatalf("usage at %d in the generation from %d", i, g.Start)
		}
		g.Add(Hash(key(i)), key(i), fmt.Sprintf("u-%d", i), 0)
	}
	// Another key under the hash of key 5, as a collision would be.
	if !gs.Gen(5).Add(Hash(key(5)), []byte("other"), "u-other", 9) {
		t.Fatal("colliding key not in the collision map")
	}
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
	gs.List[0].Remove(Hash(key(250)), string(key(250)), false)
	if _, ok := gs.Find(Hash(key(250)), key(250), 200); ok || gs.Claims() != 799 {
		t.Fatalf("removed claim: found %v, %d claims", ok, gs.Claims())
	}
}
