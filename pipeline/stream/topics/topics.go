// Package topics creates the Kafka topics of the pipeline and checks them
// against what the consumers need: co-partitioned topics share a partition
// count. The names themselves are contract.Topics.
package topics

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/driftline/driftline/pipeline/contract"
)

// Spec says how to create one topic.
type Spec struct {
	Name       string
	Partitions int32
	Compacted  bool
	// LogAppendTime has the broker stamp each record with its own clock
	// (message.timestamp.type), so that a producer's clock cannot set
	// the broker timestamp that bounds its events' effect on event time
	// (docs/event-time.md).
	LogAppendTime bool
}

// Specs returns the creation spec of every topic of n. Co-partitioned
// topics share the partition count; platform records are compacted
// (CONTRACT section 1); the topics consumers take event time from are
// stamped with the broker's clock.
func Specs(n contract.Topics, partitions int32) []Spec {
	return []Spec{
		{n.PlatformRecords, partitions, true, true},
		{n.Observations, partitions, false, true},
		{n.Telemetry, partitions, false, true},
		{n.Commands, partitions, false, true},
		{n.Usage, partitions, false, true},
		{n.Rated, partitions, false, true},
		{n.Ledger, partitions, false, true},
		{n.Requests, partitions, false, false},
		{n.Quarantine, partitions, false, false},
	}
}

// Replication says how created topics are replicated.
type Replication struct {
	// Factor is the replication factor; -1 takes the broker's default.
	Factor int16
	// MinInsync is min.insync.replicas: with acks=all a write succeeds
	// once this many replicas hold it. 0 takes the broker's default.
	MinInsync int
}

// Config returns the topic configuration Replication sets, added to cfg
// (a new map when cfg is nil).
func (r Replication) Config(cfg map[string]*string) map[string]*string {
	if cfg == nil {
		cfg = map[string]*string{}
	}
	if r.MinInsync > 0 {
		v := strconv.Itoa(r.MinInsync)
		cfg["min.insync.replicas"] = &v
	}
	return cfg
}

// ConfigStrings is Config as plain strings (checkpoint.Options.TopicConfig).
func (r Replication) ConfigStrings() map[string]string {
	out := map[string]string{}
	for k, v := range r.Config(nil) {
		out[k] = *v
	}
	return out
}

// Ensure is EnsureReplicated with replication factor replication and the
// broker's min.insync.replicas.
func Ensure(ctx context.Context, adm *kadm.Client, n contract.Topics, partitions int32, replication int16) error {
	return EnsureReplicated(ctx, adm, n, partitions, Replication{Factor: replication})
}

// EnsureReplicated creates the topics that do not exist yet, replicated
// as r says, and checks that existing co-partitioned topics agree on
// their partition count: a joiner cannot join streams partitioned
// differently. Existing topics keep their replication.
func EnsureReplicated(ctx context.Context, adm *kadm.Client, n contract.Topics, partitions int32, r Replication) error {
	for _, s := range Specs(n, partitions) {
		cfg := r.Config(nil)
		if s.Compacted {
			compact := "compact"
			cfg["cleanup.policy"] = &compact
		}
		if s.LogAppendTime {
			logAppend := "LogAppendTime"
			cfg["message.timestamp.type"] = &logAppend
		}
		resp, err := adm.CreateTopic(ctx, s.Partitions, r.Factor, cfg, s.Name)
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", s.Name, err)
		}
		if resp.Err != nil && !errors.Is(resp.Err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", s.Name, resp.Err)
		}
	}
	return CheckCopartitioned(ctx, adm, n)
}

// CheckCopartitioned verifies that each co-partitioned group of topics has
// one partition count.
func CheckCopartitioned(ctx context.Context, adm *kadm.Client, n contract.Topics) error {
	for _, group := range [][]string{n.Joined(), n.Billing()} {
		td, err := adm.ListTopics(ctx, group...)
		if err != nil {
			return fmt.Errorf("describe topics: %w", err)
		}
		want := int32(-1)
		for _, t := range group {
			d, ok := td[t]
			if !ok || d.Err != nil {
				return fmt.Errorf("topic %s is missing (create it, or allow creation at start)", t)
			}
			got := int32(len(d.Partitions))
			if want == -1 {
				want = got
			} else if got != want {
				return fmt.Errorf("topics %v must be co-partitioned but %s has %d partitions, %s has %d; Possible solutions: recreate or add partitions so they match", group, group[0], want, t, got)
			}
		}
	}
	return nil
}

// PartitionCount returns the partition count of topic.
func PartitionCount(ctx context.Context, adm *kadm.Client, topic string) (int32, error) {
	td, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("describe topic %s: %w", topic, err)
	}
	d, ok := td[topic]
	if !ok || d.Err != nil {
		return 0, fmt.Errorf("topic %s is missing", topic)
	}
	return int32(len(d.Partitions)), nil
}
