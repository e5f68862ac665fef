package reconcile

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/stream/streamtest"
)

// TestLagEndsAtZeroAfterTransactions: rated lines written in transactions,
// as the rater writes them, end each partition with a transaction marker
// that no record follows; the reconciler's committed offsets still reach
// the end of every partition.
func TestLagEndsAtZeroAfterTransactions(t *testing.T) {
	f := newFixture(t)
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	txn, err := kgo.NewClient(kgo.SeedBrokers(f.brokers...), kgo.TransactionalID("markers-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		id, meter := fmt.Sprintf("u-%d", i), fmt.Sprintf("m-%d", i)
		f.usage(id, meter, "gpu_hour", at)
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		r := rated(id, meter, "1.00")
		r.RatedAt = at.Add(time.Second)
		if err := txn.ProduceSync(ctx, streamtest.Event(t, f.names, contract.TypeBillingRated, "rater", uint64(i+1), at, r)).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
	}
	stop := f.start("markers")
	defer stop()
	adm := kadm.NewClient(f.cl)
	testenv.CheckFor(t, 30*time.Second, func() error {
		lag, err := adm.Lag(ctx, "markers")
		if err != nil {
			return err
		}
		var errs []error
		lag.Each(func(g kadm.DescribedGroupLag) {
			for _, ps := range g.Lag {
				for _, p := range ps {
					if p.Lag != 0 {
						errs = append(errs, fmt.Errorf("%s/%d: committed %d, end %d", p.Topic, p.Partition, p.Commit.At, p.End.Offset))
					}
				}
			}
		})
		if len(errs) > 0 {
			return fmt.Errorf("lag: %v", errs)
		}
		return nil
	})
}
