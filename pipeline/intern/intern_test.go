package intern

import (
	"fmt"
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
}
