package rater_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/billing/rater"
	"github.com/driftline/driftline/pipeline/stream"
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
	r, err := rater.New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	var runErr error
	go func() { defer wg.Done(); runErr = r.Run(ctx) }()
	defer func() {
		cancel()
		wg.Wait()
		if runErr != nil {
			t.Error(runErr)
		}
	}()

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
	testenv.CheckFor(t, time.Minute, func() error {
		if got := len(readAll(t, brokers, names.Rated, 500*time.Millisecond)); got < n {
			return fmt.Errorf("%d rated lines, want %d", got, n)
		}
		return nil
	})
	seen := map[string]int{}
	for _, rec := range readAll(t, brokers, names.Rated, 500*time.Millisecond) {
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
