package classify

import (
	"slices"
	"testing"
	"unsafe"
)

// TestSplitTags checks the split tag lists against strings.Split's,
// through the cache by address: a hit for the same string, and a miss,
// not a stale list, when other tags come at an address seen before (as
// after a compaction of the store's interned strings).
func TestSplitTags(t *testing.T) {
	var e Engine
	buf := []byte("domain:us-east\x00tenant:tenant-003\x00tier:gold")
	at := func(n int) string { return unsafe.String(&buf[0], n) }
	first := e.splitTags(at(len(buf)))
	if want := []string{"domain:us-east", "tenant:tenant-003", "tier:gold"}; !slices.Equal(first, want) {
		t.Fatalf("split %q, want %q", first, want)
	}
	if again := e.splitTags(at(len(buf))); &again[0] != &first[0] {
		t.Fatal("the same string split again")
	}
	// Other tags at the same address, of the same length and shorter.
	copy(buf, "domain:eu-west\x00tenant:tenant-004\x00tier:gold")
	if got, want := e.splitTags(at(len(buf))), []string{"domain:eu-west", "tenant:tenant-004", "tier:gold"}; !slices.Equal(got, want) {
		t.Fatalf("other tags at the same address: %q, want %q", got, want)
	}
	if got, want := e.splitTags(at(len("domain:eu-west"))), []string{"domain:eu-west"}; !slices.Equal(got, want) {
		t.Fatalf("a prefix at the same address: %q, want %q", got, want)
	}
	copy(buf, "domain:eu-west\x00tenant:tenant-004")
	if got, want := e.splitTags(at(len("domain:eu-west\x00tenant:tenant-004"))), []string{"domain:eu-west", "tenant:tenant-004"}; !slices.Equal(got, want) {
		t.Fatalf("fewer tags at the same address: %q, want %q", got, want)
	}
	for _, c := range []struct {
		l      []string
		joined string
		is     bool
	}{
		{[]string{"a", "b"}, "a\x00b", true},
		{[]string{"a", ""}, "a\x00", true},
		{[]string{"", ""}, "\x00", true},
		{[]string{"a", "b"}, "a\x00bc", false},
		{[]string{"a", "b"}, "ab", false},
		{[]string{"ab"}, "a\x00b", false},
		{nil, "", false},
	} {
		if got := joinedIs(c.l, c.joined); got != c.is {
			t.Errorf("joinedIs(%q, %q) = %v", c.l, c.joined, got)
		}
	}
}
