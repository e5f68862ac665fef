package contract

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestPartitionMatchesKafka checks Partition against franz-go's
// Kafka-compatible murmur2 partitioner.
func TestPartitionMatchesKafka(t *testing.T) {
	for _, n := range []int{1, 3, 6, 12, 64} {
		tp := kgo.StickyKeyPartitioner(nil).ForTopic("t")
		for i := 0; i < 2000; i++ {
			key := []byte(fmt.Sprintf("maas/node-%05d", i))
			want := tp.Partition(&kgo.Record{Key: key}, n)
			if got := Partition(key, int32(n)); int(got) != want {
				t.Fatalf("Partition(%q, %d) = %d, kafka %d", key, n, got, want)
			}
		}
	}
}

func TestAppendKeyMatchesKeyOf(t *testing.T) {
	for _, p := range []any{
		&PlatformRecord{Provider: "maas", ProviderID: "n1"}, &Observation{Provider: "gateway", ProviderID: "x/y"},
		&ScanCompleted{Provider: "maas", ScanID: "s1"}, &Heartbeat{NodeID: "n2"}, &Usage{MeteringSource: "gw", MeteringID: "m"},
		&Rated{MeteringSource: "a", MeteringID: "b"}, &LedgerEntry{MeteringSource: "c", MeteringID: "d"},
	} {
		if got := string(AppendKey([]byte("pre:"), p)); got != "pre:"+KeyOf(p) {
			t.Errorf("AppendKey(%T) = %q, KeyOf %q", p, got, KeyOf(p))
		}
	}
}

// BenchmarkKeyIs: the check of a record's key against its payload that
// the joiner makes on every event.
func BenchmarkKeyIs(b *testing.B) {
	o := &Observation{Provider: ProviderAppRuntime, ProviderID: "app-eu-north-00017"}
	key := []byte(KeyOf(o))
	for b.Loop() {
		if !KeyIs(key, o) {
			b.Fatal("not its key")
		}
	}
}

// TestKeyIs: KeyIs agrees with KeyOf.
func TestKeyIs(t *testing.T) {
	o := &Observation{Provider: ProviderAppRuntime, ProviderID: "a/b"}
	for key, want := range map[string]bool{"app_runtime/a/b": true, "app_runtime/a/c": false, "app_runtime/a": false, "": false, "app_runtimeXa/b": false} {
		if got := KeyIs([]byte(key), o); got != want || got != (key == KeyOf(o)) {
			t.Errorf("KeyIs(%q) = %v, want %v", key, got, want)
		}
	}
	if KeyIs(nil, &Heartbeat{NodeID: "n1"}) || !KeyIs([]byte("maas/n1"), &Heartbeat{NodeID: "n1"}) {
		t.Error("a heartbeat's key")
	}
}
