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
