package rater_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/billing/pricebook"
	"github.com/driftline/driftline/pipeline/billing/rater"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/stream"
)

// BenchmarkEndToEnd rates b.N usage events already in usage.events on an
// in-process broker (kfake, 6 partitions), from the rater's start until
// the group has committed every offset, with transactions on and off.
// kfake is not a production broker: the figures compare the two modes on
// one machine rather than predict a cluster's throughput.
func BenchmarkEndToEnd(b *testing.B) {
	for _, txns := range []bool{true, false} {
		b.Run(fmt.Sprintf("transactions=%v", txns), func(b *testing.B) {
			brokers, names := testenv.Kafka(b, 6)
			events := usageEvents(b.N)
			cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerBatchMaxBytes(1<<20))
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			ctx := context.Background()
			rs := make([]*kgo.Record, len(events))
			for i, e := range events {
				rs[i] = &kgo.Record{Topic: names.Usage, Key: []byte(fmt.Sprintf("gpu-meter-eu1/m-%08d", i)), Value: e}
			}
			if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
				b.Fatal(err)
			}
			book, err := pricebook.Open(filepath.Join("..", "..", "deploy", "pricebook.json"), nil)
			if err != nil {
				b.Fatal(err)
			}
			adm := kadm.NewClient(cl)
			ends, err := adm.ListEndOffsets(ctx, names.Usage)
			if err != nil {
				b.Fatal(err)
			}

			b.ResetTimer()
			r, err := rater.New(ctx, rater.Options{Prices: book, DisableTransactions: !txns,
				StageOptions: stream.StageOptions{Brokers: brokers, Topics: names, Environment: contract.EnvLocalParity,
					Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}})
			if err != nil {
				b.Fatal(err)
			}
			rctx, cancel := context.WithCancel(ctx)
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { defer wg.Done(); _ = r.Run(rctx) }()
			for {
				committed, err := adm.FetchOffsets(ctx, "driftline-rater")
				done := err == nil
				ends.Each(func(o kadm.ListedOffset) {
					c, ok := committed.Lookup(o.Topic, o.Partition)
					if o.Offset > 0 && (!ok || c.At < o.Offset) {
						done = false
					}
				})
				if done {
					break
				}
				if os.Getenv("E2E_DEBUG") != "" {
					fmt.Fprintf(os.Stderr, "committed %v err %v ends %v\n", committed, err, ends)
					time.Sleep(time.Second)
				}
				time.Sleep(5 * time.Millisecond)
			}
			b.StopTimer()
			cancel()
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
