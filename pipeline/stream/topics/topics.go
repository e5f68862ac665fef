// Package topics names the Kafka topics of the pipeline and creates them.
// Names, partition counts and replication are configuration; the defaults
// are those of CONTRACT section 1.
package topics

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/driftline/driftline/pipeline/contract"
)

// Names holds the topic name of each stream.
type Names struct {
	PlatformRecords string
	Observations    string
	Telemetry       string
	Usage           string
	Rated           string
	Ledger          string
	Quarantine      string
}

// Defaults returns the contract's default topic names.
func Defaults() Names {
	return Names{
		PlatformRecords: contract.TopicPlatformRecords,
		Observations:    contract.TopicObservations,
		Telemetry:       contract.TopicTelemetry,
		Usage:           contract.TopicUsage,
		Rated:           contract.TopicRated,
		Ledger:          contract.TopicLedger,
		Quarantine:      contract.TopicQuarantine,
	}
}

// RegisterFlags registers one -topic.<stream> flag per topic on fs.
func (n *Names) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&n.PlatformRecords, "topic.records", n.PlatformRecords, "platform records topic (compacted)")
	fs.StringVar(&n.Observations, "topic.observations", n.Observations, "provider observations topic")
	fs.StringVar(&n.Telemetry, "topic.telemetry", n.Telemetry, "node-agent telemetry topic")
	fs.StringVar(&n.Usage, "topic.usage", n.Usage, "usage events topic")
	fs.StringVar(&n.Rated, "topic.rated", n.Rated, "rated usage topic")
	fs.StringVar(&n.Ledger, "topic.ledger", n.Ledger, "ledger entries topic")
	fs.StringVar(&n.Quarantine, "topic.quarantine", n.Quarantine, "quarantine topic for rejected input")
}

// ForType returns the topic an event type is written to, or "" if unknown.
func (n Names) ForType(eventType string) string {
	switch eventType {
	case contract.TypePlatformRecord:
		return n.PlatformRecords
	case contract.TypeProviderObservation, contract.TypeScanCompleted:
		return n.Observations
	case contract.TypeHeartbeat:
		return n.Telemetry
	case contract.TypeUsageRecorded:
		return n.Usage
	case contract.TypeBillingRated:
		return n.Rated
	case contract.TypeLedgerEntry:
		return n.Ledger
	}
	return ""
}

// Joined returns the co-partitioned topics the joiner consumes.
func (n Names) Joined() []string { return []string{n.PlatformRecords, n.Observations, n.Telemetry} }

// Billing returns the co-partitioned billing topics.
func (n Names) Billing() []string { return []string{n.Usage, n.Rated, n.Ledger} }

// Spec says how to create one topic.
type Spec struct {
	Name       string
	Partitions int32
	Compacted  bool
}

// Specs returns the creation spec of every topic. Co-partitioned topics
// share the partition count.
func (n Names) Specs(partitions int32) []Spec {
	return []Spec{
		{n.PlatformRecords, partitions, true},
		{n.Observations, partitions, false},
		{n.Telemetry, partitions, false},
		{n.Usage, partitions, false},
		{n.Rated, partitions, false},
		{n.Ledger, partitions, false},
		{n.Quarantine, partitions, false},
	}
}

// Ensure creates the topics that do not exist yet and checks that existing
// co-partitioned topics agree on their partition count: a joiner cannot
// join streams partitioned differently.
func Ensure(ctx context.Context, adm *kadm.Client, n Names, partitions int32, replication int16) error {
	specs := n.Specs(partitions)
	for _, s := range specs {
		cfg := map[string]*string{}
		if s.Compacted {
			compact := "compact"
			cfg["cleanup.policy"] = &compact
		}
		resp, err := adm.CreateTopic(ctx, s.Partitions, replication, cfg, s.Name)
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
func CheckCopartitioned(ctx context.Context, adm *kadm.Client, n Names) error {
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
