package ingest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/contract/keys"
)

// The gateway must place keyed records exactly where contract.Partition (the
// contract's murmur2) says, or consumers would flag them as mis-partitioned.
func TestPartitionerAgreesWithMurmur2(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tp := Partitioner().ForTopic("t")
	keys := [][]byte{[]byte(""), []byte("a"), []byte("maas/node-1"), []byte("gateway/usage-42")}
	for range 2000 {
		k := make([]byte, rng.IntN(64)+1)
		for i := range k {
			k[i] = byte(rng.Uint32())
		}
		keys = append(keys, k)
	}
	for _, n := range []int{1, 3, 6, 12, 64} {
		for _, k := range keys {
			r := &kgo.Record{Key: k}
			if !tp.RequiresConsistency(r) {
				t.Fatalf("keyed record must require consistency")
			}
			if got, want := tp.Partition(r, n), int(contract.Partition(k, int32(n))); got != want {
				t.Fatalf("key %q n=%d: partitioner %d, contract.Partition %d", k, n, got, want)
			}
		}
	}
}

func TestPartitionerHonoursFanout(t *testing.T) {
	tp := Partitioner().ForTopic("t")
	ctx := withFanout(context.Background())
	for p := range int32(6) {
		r := &kgo.Record{Key: []byte("maas/scan/s1"), Partition: p, Context: ctx}
		if got := tp.Partition(r, 6); got != int(p) {
			t.Fatalf("fan-out record for partition %d placed on %d", p, got)
		}
	}
	// A plain record with a Partition set and an unmarked context is hashed.
	r := &kgo.Record{Key: []byte("maas/node-1"), Partition: 5, Context: context.Background()}
	if got, want := tp.Partition(r, 6), int(contract.Partition(r.Key, 6)); got != want {
		t.Fatalf("unmarked record placed on %d, want murmur2 %d", got, want)
	}
}

func TestDedupeIDExact(t *testing.T) {
	f := func(a, b contract.Envelope, same bool) {
		t.Helper()
		if got := dedupeID(&a) == dedupeID(&b); got != same {
			t.Fatalf("dedupeID(%+v) == dedupeID(%+v): %v, want %v", a, b, got, same)
		}
	}
	f(contract.Envelope{Producer: "p", EventID: "e1"}, contract.Envelope{Producer: "p", EventID: "e1"}, true)
	f(contract.Envelope{Producer: "p", EventID: "e1"}, contract.Envelope{Producer: "p", EventID: "e2"}, false)
	// seq wins over event_id when present.
	f(contract.Envelope{Producer: "p", EventID: "e1", Seq: 7, HasSeq: true}, contract.Envelope{Producer: "p", EventID: "e2", Seq: 7, HasSeq: true}, true)
	f(contract.Envelope{Producer: "p", Seq: 7, HasSeq: true}, contract.Envelope{Producer: "p", Seq: 8, HasSeq: true}, false)
	// Producer boundaries cannot be forged by ids containing separators.
	f(contract.Envelope{Producer: "p/e/x", EventID: "y"}, contract.Envelope{Producer: "p", EventID: "x/e/y"}, false)
	f(contract.Envelope{Producer: "p", EventID: "7"}, contract.Envelope{Producer: "p", Seq: 7, HasSeq: true}, false)
}

func TestRecentSetEvictsOldest(t *testing.T) {
	s := newRecentSet(3)
	add := func(ids ...string) {
		for _, id := range ids {
			s.add(recent{id, contract.Digest(len(id))})
		}
	}
	contains := func(id string) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		_, ok := s.lookup(id)
		return ok
	}
	add("a", "b", "c")
	s.add(recent{"b", 99}) // already present: no refresh, no eviction, the first digest stays
	for _, id := range []string{"a", "b", "c"} {
		if !contains(id) {
			t.Fatalf("%s missing", id)
		}
	}
	if d, _ := s.lookup("b"); d != 1 {
		t.Fatalf("b's digest %d, want the first (1)", d)
	}
	add("d")
	if contains("a") || !contains("d") || s.len() != 3 {
		t.Fatalf("after add(d): a=%v d=%v len=%d; want a evicted", contains("a"), contains("d"), s.len())
	}
	for i := range 10 {
		add(fmt.Sprint(i))
	}
	if s.len() != 3 || !contains("9") || contains("6") {
		t.Fatalf("bounded ring broken: len=%d", s.len())
	}
}

func TestPolicyRev(t *testing.T) {
	kr := keys.LocalKeyring("k")
	base := policyRev(contract.EnvLocalParity, contract.DefaultTopics(), kr, false)
	if len(base) != policyRevLen || base != policyRev(contract.EnvLocalParity, contract.DefaultTopics(), keys.LocalKeyring("k"), false) {
		t.Fatalf("policy rev %q is not a stable %d-digit digest", base, policyRevLen)
	}
	renamed := contract.DefaultTopics()
	renamed.Usage = "usage.v2"
	for name, other := range map[string]string{
		"environment": policyRev(contract.EnvDev, contract.DefaultTopics(), kr, false),
		"topics":      policyRev(contract.EnvLocalParity, renamed, kr, false),
		"keys":        policyRev(contract.EnvLocalParity, contract.DefaultTopics(), keys.LocalKeyring("other"), false),
		"auth mode":   policyRev(contract.EnvLocalParity, contract.DefaultTopics(), kr, true),
	} {
		if other == base {
			t.Errorf("changing %s does not change the policy rev", name)
		}
	}
}
