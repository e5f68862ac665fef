package reader

import (
	"context"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/driftline/driftline/pipeline/api/apitypes"
)

// Progress is the current consumer_progress row of one partition of a
// consumer.
type Progress struct {
	Consumer  string
	Partition uint32
	// Watermark is nil while the partition has not advanced it (the zero
	// DateTime); UpdatedAt is nil if never written.
	Watermark, UpdatedAt *time.Time
	Events, FindingsOpen uint64
}

// Progress reads every consumer's progress, by consumer and partition.
func (rd *Reader) Progress(ctx context.Context) ([]Progress, error) {
	var out []Progress
	err := rd.each(ctx, "consumer_progress", `SELECT consumer, partition, watermark, events,
	findings_open, updated_at FROM consumer_progress FINAL ORDER BY consumer, partition`, nil, func(r driver.Rows) error {
		var (
			p                  Progress
			watermark, updated time.Time
		)
		err := r.Scan(&p.Consumer, &p.Partition, &watermark, &p.Events, &p.FindingsOpen, &updated)
		p.Watermark, p.UpdatedAt = nullTime(watermark), nullTime(updated)
		out = append(out, p)
		return err
	})
	return out, err
}

// MaxProducerRejections bounds the per-producer lines the status reads:
// the producers with the most rejected records first.
const MaxProducerRejections = 100

// ProducerRejections reads the per-producer rejection counts of every
// consumer, summed over its partitions, most rejected first.
func (rd *Reader) ProducerRejections(ctx context.Context) ([]apitypes.ProducerRejections, error) {
	var out []apitypes.ProducerRejections
	err := rd.each(ctx, "producer_rejections", `SELECT consumer, producer, reason, sum(events) AS n, max(last_at)
	FROM producer_rejections FINAL GROUP BY consumer, producer, reason
	ORDER BY n DESC, consumer, producer, reason LIMIT ?`, []any{MaxProducerRejections}, func(r driver.Rows) error {
		var p apitypes.ProducerRejections
		err := r.Scan(&p.Consumer, &p.Producer, &p.Reason, &p.Events, &p.LastAt)
		p.LastAt = p.LastAt.UTC()
		out = append(out, p)
		return err
	})
	return out, err
}

// LowWatermark is the smallest watermark of consumer's partitions and how
// many partitions reported.
func (rd *Reader) LowWatermark(ctx context.Context, consumer string) (time.Time, int, error) {
	var (
		low time.Time
		n   uint64
	)
	err := rd.each(ctx, "wait_watermark", `SELECT min(watermark), count() FROM consumer_progress FINAL WHERE consumer = ?`, []any{consumer}, func(r driver.Rows) error { return r.Scan(&low, &n) })
	return low, int(n), err
}
