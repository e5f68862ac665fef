package rater_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/billing/rater"
	"github.com/driftline/driftline/pipeline/stream"
	"github.com/driftline/driftline/pipeline/stream/streamtest"
)

// TestExactlyOnceAcrossBrokerLoss rates usage on a three-broker cluster
// whose topics have replication 3 and min.insync.replicas 2, and stops
// one broker mid-stream: first the coordinator of the rater's group and
// transactions, later the leader of a usage partition. Partitions and
// coordinators move to the two brokers left, the rater follows them
// inside its transactions, and a read_committed reader sees exactly one
// rated line per usage_id: nothing lost, nothing twice.
func TestExactlyOnceAcrossBrokerLoss(t *testing.T) {
	c, names := testenv.KafkaReplicated(t, 3, 3)
	brokers := c.ListenAddrs()
	const n = 3000
	var events []usage
	for i := 0; i < n; i++ {
		u := usage{eventID: fmt.Sprintf("e-%05d", i), usageID: fmt.Sprintf("usage-%05d", i), source: "meter",
			meteringID: fmt.Sprintf("m-%05d", i), unit: "gpu_hour", quantity: "1.000000", tenant: "t1"}
		events = append(events, u)
		if i%10 == 0 {
			events = append(events, u) // a redelivery
		}
	}

	opts := rater.DefaultOptions()
	opts.StageOptions = stream.StageOptions{Brokers: brokers, Topics: names}
	opts.Prices, opts.MaxBatch = deployBook(t), 200
	defer streamtest.Start(t, "rater", func(ctx context.Context) (*rater.Rater, error) { return rater.New(ctx, opts) })()

	// Feed in chunks; stop a broker after a third and after two thirds.
	chunk := len(events) / 12
	for i := 0; len(events) > 0; i++ {
		k := min(len(events), chunk)
		produce(t, brokers, names.Usage, events[:k]...)
		events = events[k:]
		switch i {
		case 4:
			node := c.CoordinatorFor("driftline-rater")
			if err := c.RemoveNode(node); err != nil {
				t.Fatal(err)
			}
			t.Logf("stopped broker %d, the rater's coordinator, mid-stream", node)
		case 8:
			node := c.LeaderFor(names.Usage, 0)
			if err := c.RemoveNode(node); err != nil {
				t.Fatal(err)
			}
			t.Logf("stopped broker %d, the leader of %s[0], mid-stream", node, names.Usage)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The seed list still names the stopped brokers; a reader finds the
	// one left through any seed that answers.
	// The lines judged are those of the read that found them all.
	var rated []*kgo.Record
	testenv.CheckFor(t, time.Minute, func() error {
		if rated = readAll(t, brokers, names.Rated, 500*time.Millisecond); len(rated) < n {
			return fmt.Errorf("%d rated lines, want %d", len(rated), n)
		}
		return nil
	})
	seen := map[string]int{}
	for _, rec := range rated {
		seen[decodeRated(t, rec).Payload.UsageID]++
	}
	if len(seen) != n {
		t.Fatalf("%d usage_ids rated, want %d", len(seen), n)
	}
	for id, k := range seen {
		if k != 1 {
			t.Errorf("%s rated %d times", id, k)
		}
	}
}
