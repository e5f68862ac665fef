package rater_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/billing/rater"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/stream"
	"github.com/driftline/driftline/pipeline/stream/streamtest"
)

// TestMispartitionedUsageRatedOnce: a usage a producer wrote to a
// partition its usage key does not hash to is copied to the key's
// partition and rated there, once; after a restart, which restores the
// key's partition from its log alone, a redelivery of it to the right
// partition is still a redelivery.
func TestMispartitionedUsageRatedOnce(t *testing.T) {
	const partitions = 3
	brokers, names := testenv.Kafka(t, partitions)
	u := func(id string) usage {
		return usage{eventID: "e-" + id, usageID: id, source: "gpu-meter", meteringID: "m-" + id, unit: "gpu_hour", quantity: "1", tenant: "t1"}
	}
	moved, other := u("u1"), u("u2")
	home := contract.Partition([]byte(moved.key()), partitions)
	wrong := (home + 1) % partitions
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	send := func(u usage, p int32) {
		t.Helper()
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: names.Usage, Partition: p, Key: []byte(u.key()), Value: u.encode()}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	send(moved, wrong)
	send(other, contract.Partition([]byte(other.key()), partitions))

	opts := rater.Options{
		StageOptions: stream.StageOptions{Brokers: brokers, Topics: names}, Prices: deployBook(t),
		Now: func() time.Time { return time.Date(2026, 11, 21, 10, 16, 0, 0, time.UTC) },
	}
	ratedOf := func(want int) map[string]int {
		t.Helper()
		var got map[string]int
		testenv.CheckFor(t, 30*time.Second, func() error {
			got = map[string]int{}
			for _, rec := range readAll(t, brokers, names.Rated, 300*time.Millisecond) {
				l := decodeRated(t, rec)
				got[l.Payload.UsageID]++
				if rec.Partition != contract.Partition(rec.Key, partitions) {
					t.Errorf("rated line of %s on partition %d, its key hashes to %d", l.Payload.UsageID, rec.Partition, contract.Partition(rec.Key, partitions))
				}
			}
			if n := len(got); n < want {
				return fmt.Errorf("rated lines of %d usage_ids, want %d", n, want)
			}
			return nil
		})
		return got
	}
	stop := streamtest.Start(t, "rater", func(ctx context.Context) (*rater.Rater, error) { return rater.New(ctx, opts) })
	if got := ratedOf(2); got["u1"] != 1 || got["u2"] != 1 {
		t.Fatalf("rated lines per usage_id %v, want one each", got)
	}
	var copies []*kgo.Record
	for _, rec := range readAll(t, brokers, names.Usage, 300*time.Millisecond) {
		for _, h := range rec.Headers {
			if h.Key == contract.HeaderReroutedFrom {
				copies = append(copies, rec)
				if want := fmt.Sprintf("%s/%d/0", names.Usage, wrong); string(h.Value) != want {
					t.Errorf("copy says it came from %s, want %s", h.Value, want)
				}
			}
		}
	}
	if len(copies) != 1 || copies[0].Partition != home || string(copies[0].Value) != string(moved.encode()) {
		t.Fatalf("%d copies of the mis-partitioned usage (want 1 on partition %d, its value unchanged): %v", len(copies), home, copies)
	}
	stop()

	// A new rater restores every partition from its log; the redelivery
	// of u1, now to the right partition, is followed there by a new usage
	// whose line says the redelivery was judged.
	stop = streamtest.Start(t, "rater", func(ctx context.Context) (*rater.Rater, error) { return rater.New(ctx, opts) })
	defer stop()
	after := u("u3")
	after.meteringID = moved.meteringID + "-after"
	for contract.Partition([]byte(after.key()), partitions) != home {
		after.meteringID += "+"
	}
	send(moved, home)
	send(after, home)
	if got := ratedOf(3); got["u1"] != 1 || got["u2"] != 1 || got["u3"] != 1 {
		t.Fatalf("rated lines per usage_id after the restart %v, want one each", got)
	}
}
