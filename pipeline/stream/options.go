package stream

import (
	"errors"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/stream/logmerge"
)

// Options configure a Member.
type Options struct {
	// Name names the stage in errors ("joiner: ..."). Required.
	Name string
	// Brokers are the Kafka seed brokers. Required.
	Brokers []string
	// Group is the consumer group. Required.
	Group string
	// Names are the pipeline's topics: at start every co-partitioned
	// group of them is checked to agree on its partition count
	// (topics.CheckCopartitioned). Default contract.DefaultTopics().
	Names contract.Topics
	// Topics are the topics the member consumes, co-partitioned, so
	// their partition numbers name the member's partitions. Required.
	Topics []string
	// Balancer hands out the partitions. Default range assignment, which
	// gives a member every stream of a partition number.
	Balancer kgo.GroupBalancer
	// SessionTimeout is how long the group waits for a silent member (a
	// crashed process) before it hands the member's partitions to the
	// others. Default 45s.
	SessionTimeout time.Duration
	// RebalanceTimeout is how long a rebalance waits for every member to
	// finish its round and rejoin; a restore is retried within it.
	// Default 60s.
	RebalanceTimeout time.Duration
	// SettleTime is how long the group must have been stable before the
	// member restores partitions an assignment newly gave it. Members
	// that start together (a deploy) join one after another, and each
	// join moves partitions: restored at once, a partition moved on is
	// checkpointed, restored again elsewhere and its records fetched
	// again. Until the group has settled the new partitions stay
	// assigned but paused; the poll loop restores them once no rebalance
	// happened for SettleTime and the broker reports the group stable,
	// and heartbeats run every SettleTime/2 (at most 3s) so that the
	// member learns of a joining one within the wait. It delays every
	// assignment (a lone member's first one too) by SettleTime and up to
	// one poll more (a round's interval). Zero or negative: restore at
	// once, in the rebalance. Default 0.
	SettleTime time.Duration
	// KeepControlRecords hands the processor transaction markers too, so
	// that the positions of a logmerge.Merge are exact (logmerge.Data
	// drops them). Default false.
	KeepControlRecords bool
	// Rounds sizes the poll loop's rounds. Zero: a round is one poll of
	// at most PollRecords records.
	Rounds logmerge.Rounds
	// PollRecords bounds the records of a round without Rounds. Default
	// 10000. Such a poll may take part of a fetch only, so a member that
	// merges streams (a logmerge.Merge) sets Rounds, whose polls take
	// whole fetches.
	PollRecords int
	// TransactionalID, when set, makes the member a transactional
	// consume-transform-produce session (kgo.GroupTransactSession, see
	// Session). It must be stable across restarts of one instance, so
	// that a restart fences the crashed incarnation, and distinct between
	// instances running at once. Default none.
	TransactionalID string
	// TransactionTimeout bounds how long a crashed member's open
	// transaction can hold back read_committed consumers if it is not
	// fenced by a restart. A restore waits for a pending transaction's
	// offsets for twice it and 30s more. Default 10s.
	TransactionTimeout time.Duration
	// InstanceID is the static group membership id (group.instance.id):
	// a restarted instance with the same id takes over its partitions at
	// once. Default none: dynamic membership.
	InstanceID string
	// Logger receives operational logs. Default slog.Default().
	Logger *slog.Logger
	// ConsumerOpts are extra franz-go options of the group consumer only
	// (kgo.WithPools).
	ConsumerOpts []kgo.Opt
	// ClientOpts are extra franz-go options of every client of the
	// member: the group consumer, the admin client and restores (tests,
	// TLS, SASL). They are applied last.
	ClientOpts []kgo.Opt
}

// FetchMaxBytes bounds one fetch (compressed) of a member, its restores
// included. A fetch is decompressed whole; batches of repetitive JSON
// compress 10x and more, so franz-go's 50 MiB default kept gigabytes
// buffered at 10M events.
const FetchMaxBytes = 8 << 20

// ReplayTimeout bounds one restore's replay of the logs.
const ReplayTimeout = 10 * time.Minute

func (o *Options) defaults() error {
	switch {
	case o.Name == "":
		return errors.New("stream: no name")
	case len(o.Brokers) == 0:
		return errors.New(o.Name + ": no brokers")
	case o.Group == "":
		return errors.New(o.Name + ": no group")
	case len(o.Topics) == 0:
		return errors.New(o.Name + ": no topics")
	}
	Default(&o.Names, contract.DefaultTopics())
	if o.Balancer == nil {
		o.Balancer = kgo.RangeBalancer()
	}
	if o.SessionTimeout <= 0 {
		o.SessionTimeout = 45 * time.Second
	}
	if o.RebalanceTimeout <= 0 {
		o.RebalanceTimeout = 60 * time.Second
	}
	DefaultPositive(&o.PollRecords, 10000)
	if o.TransactionTimeout <= 0 {
		o.TransactionTimeout = 10 * time.Second
	}
	Default(&o.Logger, slog.Default())
	return nil
}
