package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/stream/topics"
)

// Kafka starts an in-process Kafka-protocol cluster of one broker on a free
// loopback port, creates every pipeline topic (default names) with
// partitions partitions, and closes the cluster when the test ends.
func Kafka(t testing.TB, partitions int32) (brokers []string, names contract.Topics) {
	t.Helper()
	c, names := KafkaCluster(t, partitions)
	return c.ListenAddrs(), names
}

// KafkaCluster is Kafka for tests that also steer the cluster itself
// (kfake's ControlKey, to inject broker errors).
func KafkaCluster(t testing.TB, partitions int32) (*kfake.Cluster, contract.Topics) {
	t.Helper()
	return KafkaReplicated(t, partitions, 1)
}

// KafkaReplicated starts an in-process cluster of n brokers and creates
// every pipeline topic (default names) with partitions partitions,
// replication n and min.insync.replicas 2 (1 for one broker), as a
// production cluster has them. The cluster's RemoveNode stops a broker:
// its partitions and coordinators move to the others, which clients
// must follow without losing or repeating a record.
func KafkaReplicated(t testing.TB, partitions int32, n int) (*kfake.Cluster, contract.Topics) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(n))
	if err != nil {
		t.Fatalf("start kfake cluster: %v", err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatalf("kafka client: %v", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	names := contract.DefaultTopics()
	r := topics.Replication{Factor: int16(n), MinInsync: min(2, n)}
	if err := topics.EnsureReplicated(ctx, kadm.NewClient(cl), names, partitions, r); err != nil {
		t.Fatalf("create topics: %v", err)
	}
	return c, names
}

// KafkaClient returns a client of brokers with opts, closed when the test
// ends.
func KafkaClient(t testing.TB, brokers []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		t.Fatalf("kafka client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}
