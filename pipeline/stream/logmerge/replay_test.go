package logmerge

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestReadToTransactionalTail: a partition whose last offsets before the
// target are transaction markers is read to the target at once (the
// markers carry the position), with only the data records delivered; a
// target beyond what exists is waited for until ctx ends, never taken as
// reached.
func TestReadToTransactionalTail(t *testing.T) {
	brokers, names := testenv.Kafka(t, 1)
	topic := names.Rated
	prod := testenv.KafkaClient(t, brokers, kgo.TransactionalID("readto-test"), kgo.DefaultProduceTopic(topic))
	ctx := context.Background()
	for range 3 { // three transactions of two records each
		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
	}
	adm := kadm.NewClient(prod)
	endOffsets, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := endOffsets.Lookup(topic, 0)
	if end.Offset != 9 { // 6 records and 3 commit markers
		t.Fatalf("end offset %d, want 9", end.Offset)
	}

	read := func(target int64, timeout time.Duration) (int, error) {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...), fromStart(topic)}, ReplayOpts()...)...)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		rctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		n := 0
		err = ReadTo(rctx, cl, map[string]map[int32]int64{topic: {0: target}},
			func(_ string, _ int32, recs []*kgo.Record, _ int64) {
				for _, r := range recs {
					if r.Attrs.IsControl() {
						t.Error("a transaction marker was delivered")
					}
				}
				n += len(recs)
			}, func() {})
		return n, err
	}
	start := time.Now()
	if n, err := read(9, time.Minute); err != nil || n != 6 {
		t.Fatalf("read %d records, err %v; want 6", n, err)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("reading to a marker took %v: the end was guessed, not read", d)
	}
	if n, err := read(11, 2*time.Second); err == nil || !strings.Contains(err.Error(), "1 partitions not read") || n != 6 {
		t.Fatalf("read beyond the end: %d records, err %v; want a timeout naming the partition left", n, err)
	}
}
