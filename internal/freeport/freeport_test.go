package freeport

import (
	"net"
	"strconv"
	"testing"
)

// TestPick checks that picked ports are below the ephemeral range and
// free, and that a range leaving no room below it falls back to a port
// the kernel picks.
func TestPick(t *testing.T) {
	start := ephemeralStart()
	if start-lowest < 1000 {
		t.Skipf("the ephemeral range starts at %d: no room below it", start)
	}
	for range 20 {
		p, err := Pick("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		if p < lowest || p >= start {
			t.Fatalf("picked %d, want a port in [%d, %d)", p, lowest, start)
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("picked port %d is not free: %v", p, err)
		}
		ln.Close()
	}
	p, err := pick("127.0.0.1", lowest+10)
	if err != nil || p == 0 {
		t.Fatalf("fallback: port %d, err %v", p, err)
	}
}

// TestPickSkipsTaken checks that a port in use is not handed out: with a
// listener on every port but one of a small range, Pick returns that one
// or falls back to the kernel's.
func TestPickSkipsTaken(t *testing.T) {
	const n = 8
	var taken []int
	for p := lowest; p < lowest+n; p++ {
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue // taken by someone else already
		}
		defer ln.Close()
		taken = append(taken, p)
	}
	for range 10 {
		p, err := pick("127.0.0.1", lowest+1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range taken {
			if p == q {
				t.Fatalf("picked port %d, which is listened on", p)
			}
		}
	}
}

// TestPickNeverTwice checks that Pick does not hand out a port twice, as
// two picks made before either port is bound would: 300 picks from a
// range of 1,000 ports would repeat one with near certainty otherwise.
func TestPickNeverTwice(t *testing.T) {
	seen := make(map[int]bool)
	for range 300 {
		p, err := pick("127.0.0.1", lowest+1000)
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
}

func TestAddr(t *testing.T) {
	a, err := Addr("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	host, port, err := net.SplitHostPort(a)
	if err != nil || host != "127.0.0.1" || port == "0" {
		t.Fatalf("Addr = %q (%v)", a, err)
	}
}
