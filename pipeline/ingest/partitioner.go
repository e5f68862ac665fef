package ingest

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
)

// fanoutKey marks, in a record's Context, a record whose Partition field is
// chosen by the gateway (one copy of a scan marker per partition).
type fanoutKey struct{}

// withFanout returns a context marking records produced with it as
// explicitly partitioned.
func withFanout(ctx context.Context) context.Context {
	return context.WithValue(ctx, fanoutKey{}, true)
}

func isFanout(r *kgo.Record) bool {
	if r.Context == nil {
		return false
	}
	v, _ := r.Context.Value(fanoutKey{}).(bool)
	return v
}

// Partitioner returns the gateway's partitioner: records marked for fan-out
// go to their Record.Partition; every other record is partitioned exactly as
// Kafka's default partitioner does (murmur2 of the key, see contract.Partition),
// with sticky partitioning for records without a key.
func Partitioner() kgo.Partitioner {
	return partitioner{kgo.StickyKeyPartitioner(nil)}
}

type partitioner struct{ keyed kgo.Partitioner }

func (p partitioner) ForTopic(topic string) kgo.TopicPartitioner {
	return &topicPartitioner{keyed: p.keyed.ForTopic(topic)}
}

type topicPartitioner struct{ keyed kgo.TopicPartitioner }

func (p *topicPartitioner) RequiresConsistency(r *kgo.Record) bool {
	return isFanout(r) || p.keyed.RequiresConsistency(r)
}

func (p *topicPartitioner) Partition(r *kgo.Record, n int) int {
	if isFanout(r) {
		if int(r.Partition) >= n || r.Partition < 0 {
			// The topic shrank, which Kafka cannot do, or the metadata
			// is stale; fold rather than panic inside the client.
			return (int(r.Partition)%n + n) % n
		}
		return int(r.Partition)
	}
	return p.keyed.Partition(r, n)
}

// OnNewBatch forwards to the sticky partitioner for keyless records.
func (p *topicPartitioner) OnNewBatch() {
	if nb, ok := p.keyed.(kgo.TopicPartitionerOnNewBatch); ok {
		nb.OnNewBatch()
	}
}
