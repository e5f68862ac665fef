package service

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/stream/topics"
)

// EnsureTopics creates the missing topics with -kafka.partitions
// partitions each when -kafka.createTopics is set (replication 1: the
// local stack has one broker), and checks that co-partitioned topics
// agree.
func (c *Common) EnsureTopics(ctx context.Context) error {
	if !c.CreateTopics {
		return nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.SeedBrokers()...))
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	return topics.Ensure(ctx, kadm.NewClient(cl), c.Topics, int32(c.Partitions), 1)
}

// PartitionCount returns the partition count of topic.
func (c *Common) PartitionCount(ctx context.Context, topic string) (int32, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.SeedBrokers()...))
	if err != nil {
		return 0, fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	return topics.PartitionCount(ctx, kadm.NewClient(cl), topic)
}
