package intern

import "testing"

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
