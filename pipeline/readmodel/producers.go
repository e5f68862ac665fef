package readmodel

import (
	"time"

	"github.com/driftline/driftline/pipeline/stream/producers"
)

// ProducerRejection is a row of producer_rejections: one partition's
// cumulative count of a producer's records rejected for one reason.
type ProducerRejection struct {
	Consumer  string // the consumer group
	Partition int32
	producers.Count
}

// ProducerRejections is the writer of producer_rejections, shared by the
// consumers that count rejections per producer.
var ProducerRejections = NewTable("producer_rejections",
	String("consumer", func(p *ProducerRejection) string { return p.Consumer }),
	UInt32("partition", func(p *ProducerRejection) uint32 { return uint32(p.Partition) }),
	String("producer", func(p *ProducerRejection) string { return p.Producer }),
	String("reason", func(p *ProducerRejection) string { return string(p.Reason) }),
	UInt64("events", func(p *ProducerRejection) uint64 { return p.Events }),
	DateTime("last_at", func(p *ProducerRejection) time.Time { return Epoch(p.LastAt) }),
	Now[ProducerRejection]("updated_at"),
	// The count only grows: the row of the larger count wins, whatever
	// order two writers' rows of one partition reach the table in.
	UInt64("version", func(p *ProducerRejection) uint64 { return PositionVersion(p.Events) }),
)

// AppendProducerRejections appends to dst the counts of consumer's
// partition changed since the previous call.
func AppendProducerRejections(dst []ProducerRejection, consumer string, partition int32, c *producers.Counts) []ProducerRejection {
	for _, cnt := range c.Changed(nil) {
		dst = append(dst, ProducerRejection{Consumer: consumer, Partition: partition, Count: cnt})
	}
	return dst
}
