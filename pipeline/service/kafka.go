package service

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/stream/topics"
)

// EnsureTopics creates the missing topics with -kafka.partitions
// partitions each, replicated as -kafka.replicationFactor and
// -kafka.minInsyncReplicas say, when -kafka.createTopics is set, and
// checks that co-partitioned topics agree. It is the one place where a
// binary creates the pipeline's topics.
func (c *Common) EnsureTopics(ctx context.Context) error {
	if !c.CreateTopics {
		return nil
	}
	cl, err := c.KafkaClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	return topics.EnsureReplicated(ctx, kadm.NewClient(cl), c.Topics, int32(c.Partitions), c.Kafka.Replication())
}

// KafkaClient returns a client of the seed brokers, secured as the
// -kafka.tls.* and -kafka.sasl.* flags say, with opts added.
func (c *Common) KafkaClient(opts ...kgo.Opt) (*kgo.Client, error) {
	sec, err := c.Kafka.ClientOpts()
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append(append([]kgo.Opt{kgo.SeedBrokers(c.SeedBrokers()...)}, opts...), sec...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	return cl, nil
}

// KafkaOpts returns the options that secure a client (TLS, SASL), for
// the clients a library builds from its ClientOpts.
func (c *Common) KafkaOpts() []kgo.Opt {
	opts, err := c.Kafka.ClientOpts()
	if err != nil {
		// Validate loaded them: a binary does not get here with an error.
		panic("BUG: service: Kafka client options used before Validate: " + err.Error())
	}
	return opts
}

// PartitionCount returns the partition count of topic.
func (c *Common) PartitionCount(ctx context.Context, topic string) (int32, error) {
	cl, err := c.KafkaClient()
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	return topics.PartitionCount(ctx, kadm.NewClient(cl), topic)
}
