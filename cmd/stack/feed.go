package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/driftline/driftline/internal/fleet"
)

// feed posts the fleet's events in order through the ingest gateway
// (fleet.Feed retries batches the gateway answers as busy) and prints
// progress every two seconds.
func feed(ctx context.Context, out io.Writer, src fleet.Source, url, apiKey string) error {
	lastPrint := time.Now()
	stats, err := fleet.Feed(ctx, url, apiKey, src, fleet.FeedOptions{
		Progress: func(s fleet.FeedStats) {
			if time.Since(lastPrint) >= 2*time.Second {
				fmt.Fprintf(out, "  sent %d events in %d batches (accepted %d, duplicate %d, rejected %d)\n",
					s.Events, s.Batches, s.Accepted, s.Duplicate, s.Rejected)
				lastPrint = time.Now()
			}
		},
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "sent %d events: accepted %d, duplicate %d, rejected %d (quarantined), %d retried batches\n",
		stats.Events, stats.Accepted, stats.Duplicate, stats.Rejected, stats.Retries)
	for _, r := range stats.RejectedReceipts {
		fmt.Fprintf(out, "  rejected: %s\n", r)
	}
	return nil
}
