package testenv

import (
	"context"
	"errors"
	"fmt"
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

// ReadTopics returns every committed record of the topics, by topic, read
// from their start until a poll of idle brings nothing, once every
// partition that held records when the read began has returned some: on
// a loaded machine (the race detector) a client's first fetch can take
// longer than idle, and an empty first poll is not the end of the
// topics. A partition that returns nothing (only aborted records) is
// waited for 30 seconds at most.
func ReadTopics(t testing.TB, ctx context.Context, brokers []string, idle time.Duration, names ...string) map[string][]*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(names...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatalf("kafka client: %v", err)
	}
	defer cl.Close()
	pending := nonEmptyPartitions(t, ctx, kadm.NewClient(cl), names...)
	giveUp := time.Now().Add(30 * time.Second)
	out := map[string][]*kgo.Record{}
	for {
		pctx, cancel := context.WithTimeout(ctx, idle)
		fs := cl.PollFetches(pctx)
		cancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			out[r.Topic] = append(out[r.Topic], r)
			delete(pending, topicPartition{r.Topic, r.Partition})
			n++
		})
		for _, e := range fs.Errors() {
			if !errors.Is(e.Err, context.DeadlineExceeded) {
				t.Fatalf("read %s/%d: %v", e.Topic, e.Partition, e.Err)
			}
		}
		if n == 0 && (len(pending) == 0 || time.Now().After(giveUp)) {
			return out
		}
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %v: %v", names, err)
		}
	}
}

type topicPartition struct {
	topic     string
	partition int32
}

// nonEmptyPartitions returns the partitions of the topics that hold
// records (their end offset past their start). A listing that fails (a
// broker of the seed list stopped, its leaderships not yet moved) is
// tried again for 30 seconds.
func nonEmptyPartitions(t testing.TB, ctx context.Context, adm *kadm.Client, names ...string) map[topicPartition]bool {
	t.Helper()
	var starts, ends kadm.ListedOffsets
	list := func() error {
		var err error
		if starts, err = adm.ListStartOffsets(ctx, names...); err == nil {
			err = starts.Error()
		}
		if err != nil {
			return fmt.Errorf("start offsets of %v: %w", names, err)
		}
		if ends, err = adm.ListEndOffsets(ctx, names...); err == nil {
			err = ends.Error()
		}
		if err != nil {
			return fmt.Errorf("end offsets of %v: %w", names, err)
		}
		return nil
	}
	for giveUp := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		err := list()
		if err == nil {
			break
		}
		if time.Now().After(giveUp) || ctx.Err() != nil {
			t.Fatal(err)
		}
	}
	out := map[topicPartition]bool{}
	ends.Each(func(o kadm.ListedOffset) {
		if s, ok := starts.Lookup(o.Topic, o.Partition); ok && o.Offset > s.Offset {
			out[topicPartition{o.Topic, o.Partition}] = true
		}
	})
	return out
}
