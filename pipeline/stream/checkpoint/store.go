package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Store saves and loads checkpoints in a Kafka topic. It is safe for
// concurrent use by several partitions; Save calls for one (group,
// partition) must not overlap (a partition has one owner that saves after
// each of its flushes, one at a time).
type Store struct {
	opts  Options
	m     *metrics
	prod  *kgo.Client // idempotent producer, manual partitioner
	cl    *kgo.Client // metadata, offsets and raw fetches
	adm   *kadm.Client
	parts int32 // partition count of the topic

	// mu protects newest and closed.
	mu sync.Mutex
	// newest is, per (group, partition), the newest checkpoint this store
	// wrote or saw, so Save knows which slot to write without a lookup.
	newest map[slotKey]slotState
	closed bool
}

type slotKey struct {
	group     string
	partition int32
}

// slotState is what Save needs of the newest checkpoint of a partition.
type slotState struct {
	slot   string // its slot
	chunks int    // its chunk count
	other  int    // chunk count of the other slot's checkpoint
}

// New connects to the brokers, creates the topic when it is missing and
// Options.Create is set, and checks that it has at least
// Options.Partitions partitions.
func New(ctx context.Context, opts Options) (*Store, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	s := &Store{opts: opts, m: newMetrics(opts.Registerer), newest: map[slotKey]slotState{}}
	var err error
	s.cl, err = kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(opts.Brokers...)}, opts.ClientOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("checkpoint client: %w", err)
	}
	// A batch holds at most one chunk, with room for key and headers;
	// never less than franz-go's default, so small chunks still batch.
	batchMax := int32(opts.ChunkBytes + 64<<10)
	if batchMax < 1_000_012 {
		batchMax = 1_000_012
	}
	s.prod, err = kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(opts.Brokers...),
		kgo.DefaultProduceTopic(opts.Topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(batchMax),
		kgo.RequiredAcks(kgo.AllISRAcks()),
	}, opts.ClientOpts...)...)
	if err != nil {
		s.cl.Close()
		return nil, fmt.Errorf("checkpoint producer: %w", err)
	}
	s.adm = kadm.NewClient(s.cl)
	if err := s.ensureTopic(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// ensureTopic creates the topic if allowed and learns its partition count.
func (s *Store) ensureTopic(ctx context.Context) error {
	t := s.opts.Topic
	if s.opts.Create {
		resp, err := s.adm.CreateTopic(ctx, s.opts.Partitions, s.opts.Replication, s.opts.topicConfig(), t)
		if err == nil {
			err = resp.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create checkpoint topic %s: %w", t, err)
		}
	}
	td, err := s.adm.ListTopics(ctx, t)
	if err != nil {
		return fmt.Errorf("describe checkpoint topic %s: %w", t, err)
	}
	d, ok := td[t]
	if !ok || d.Err != nil {
		return fmt.Errorf("checkpoint topic %s is missing; Possible solutions: create it with as many partitions as the checkpointed streams, or allow creation at start", t)
	}
	s.parts = int32(len(d.Partitions))
	if s.parts < s.opts.Partitions {
		return fmt.Errorf("checkpoint topic %s has %d partitions but the checkpointed streams have %d; Possible solutions: add partitions to %s (checkpoints of partition p live on partition p)", t, s.parts, s.opts.Partitions, t)
	}
	return nil
}

// Close releases the store's clients. Calls in flight fail.
func (s *Store) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	if s.prod != nil {
		s.prod.Close()
	}
	s.cl.Close()
}

func (s *Store) checkPartition(op string, p int32) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if p < 0 || p >= s.parts {
		return &PartitionError{Op: op, Topic: s.opts.Topic, Partition: p, Offset: -1,
			Err: fmt.Errorf("the topic has %d partitions; Possible solutions: add partitions so it has as many as the checkpointed streams", s.parts)}
	}
	return nil
}

func (s *Store) remember(group string, p int32, m *manifest) {
	s.mu.Lock()
	s.newest[slotKey{group, p}] = slotState{slot: m.Slot, chunks: m.Chunks, other: m.Other}
	s.mu.Unlock()
}

func (s *Store) known(group string, p int32) (slotState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.newest[slotKey{group, p}]
	return st, ok
}
