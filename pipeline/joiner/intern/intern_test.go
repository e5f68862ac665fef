package intern

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

func TestIntern(t *testing.T) {
	tab := New("", "OK")
	if tab.Intern("") != 0 || tab.Intern("OK") != 1 || tab.Len() != 2 {
		t.Fatal("fixed symbols")
	}
	b := []byte("running")
	s := tab.Intern(string(b))
	b[0] = 'R' // the table holds its own copy
	if tab.Str(s) != "running" || tab.Intern("running") != s || tab.Len() != 3 {
		t.Fatalf("interned %q", tab.Str(s))
	}
	known := string(b[1:]) // "unning": interned once, then found without allocating
	tab.Intern(known)
	if n := testing.AllocsPerRun(100, func() { tab.Intern(known) }); n != 0 {
		t.Fatalf("%v allocations to intern a known string", n)
	}
}

// TestInternCache checks that the cache in front of the map never
// returns another string's symbol: values that share a slot, the empty
// string, and strings shorter than 8 bytes.
func TestInternCache(t *testing.T) {
	tab := New()
	want := map[string]Sym{}
	var vals []string
	for i := range 5000 {
		vals = append(vals, fmt.Sprintf("v-%d", i), fmt.Sprintf("corr-scan-%08d", i), fmt.Sprintf("%d", i%7), "")
	}
	for round := range 3 {
		for i, v := range vals {
			if round == 1 && i%3 == 0 {
				continue // other orders: other slot contents
			}
			id := tab.Intern(v)
			if w, ok := want[v]; ok && w != id {
				t.Fatalf("%q: symbol %d, first %d", v, id, w)
			}
			want[v] = id
			if tab.Str(id) != v {
				t.Fatalf("%q: symbol %d is %q", v, id, tab.Str(id))
			}
		}
	}
	if tab.Len() != len(want) {
		t.Fatalf("%d symbols for %d values", tab.Len(), len(want))
	}
}

// BenchmarkIntern interns a mix of a few hot values and many cold ones,
// as records and observations bring them.
func BenchmarkIntern(b *testing.B) {
	hot := []string{"running", "allocated", "gpu-h100", "eu-west", "gpuaas", "corr-scan-00000042"}
	cold := make([]string, 1<<20)
	for i := range cold {
		cold[i] = fmt.Sprintf("route-%d.apps.example.net", i)
	}
	tab := New()
	for _, s := range cold {
		tab.Intern(s)
	}
	b.Run("hot", func(b *testing.B) {
		for i := range b.N {
			tab.Intern(hot[i%len(hot)])
		}
	})
	b.Run("cold", func(b *testing.B) {
		for i := range b.N {
			tab.Intern(cold[(i*7919)&(len(cold)-1)])
		}
	})
	// new: values never seen before (a new identity's versions and
	// routes), in a table that grows from empty.
	b.Run("new", func(b *testing.B) {
		tab := New()
		buf := []byte("version-")
		for i := range b.N {
			tab.Intern(string(strconv.AppendInt(buf[:8], int64(i), 10)))
		}
	})
}

// BenchmarkInternGC measures a garbage collection with a table of
// 2,000,000 values live: the cost every collection pays for the table.
func BenchmarkInternGC(b *testing.B) {
	tab := New()
	buf := []byte("route-")
	for i := range 2_000_000 {
		tab.Intern(string(strconv.AppendInt(buf[:6], int64(i), 10)))
	}
	runtime.GC()
	b.ResetTimer()
	for range b.N {
		runtime.GC()
	}
	b.StopTimer()
	runtime.KeepAlive(tab)
}

// TestInternChunks checks values across chunk boundaries, long values
// with a chunk of their own, and that a string returned before the table
// grew still reads the same.
func TestInternChunks(t *testing.T) {
	tab := New()
	long := strings.Repeat("x", maxChunk/4+1)
	var vals []string
	for i := range 200_000 {
		v := fmt.Sprintf("value-%d-%s", i, strings.Repeat("y", i%97))
		if i%50_000 == 7 {
			v = long + strconv.Itoa(i)
		}
		vals = append(vals, v)
	}
	first := tab.Str(tab.Intern(vals[0]))
	for i, v := range vals {
		if id := tab.Intern(v); id != Sym(i) {
			t.Fatalf("%d: symbol %d", i, id)
		}
	}
	for i, v := range vals {
		if tab.Str(Sym(i)) != v || tab.Intern(v) != Sym(i) {
			t.Fatalf("%d: %q", i, tab.Str(Sym(i)))
		}
	}
	if first != vals[0] || tab.Len() != len(vals) {
		t.Fatalf("first value now %q, %d symbols", first, tab.Len())
	}
}

// TestPrefetch checks that Prefetch changes nothing: on a new table, on
// empty and absent values, and on a table grown since.
func TestPrefetch(t *testing.T) {
	tab := New("")
	tab.Prefetch("")
	tab.Prefetch("absent")
	want := map[string]Sym{}
	for i := range 10_000 {
		s := fmt.Sprintf("v-%d", i)
		tab.Prefetch(s)
		want[s] = tab.Intern(s)
	}
	n := tab.Len()
	for s, id := range want {
		tab.Prefetch(s)
		if got := tab.Intern(s); got != id || tab.Str(id) != s {
			t.Fatalf("%q: symbol %d after Prefetch, want %d", s, got, id)
		}
	}
	if tab.Len() != n {
		t.Fatalf("%d symbols after interning known values, want %d", tab.Len(), n)
	}
}
