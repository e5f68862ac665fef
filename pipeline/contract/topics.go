package contract

import "flag"

// Topic defaults (CONTRACT section 1). Deployments may rename topics; see
// Topics.
const (
	TopicPlatformRecords = "platform.records"
	TopicObservations    = "provider.observations"
	TopicTelemetry       = "nodeagent.telemetry"
	TopicUsage           = "usage.events"
	TopicRated           = "billing.rated"
	TopicLedger          = "billing.ledger"
	TopicQuarantine      = "ingest.quarantine"
	TopicCommands        = "ops.commands"
	TopicRequests        = "reconcile.requests"
)

// TopicOf returns the default topic of an event type, or "" if the type is
// unknown.
func TopicOf(eventType string) string { return defaultTopics.ForType(eventType) }

var defaultTopics = DefaultTopics()

// Topics holds the topic name of each stream: names are configuration
// (CONTRACT section 1), the streams and their grouping are not.
type Topics struct {
	PlatformRecords string
	Observations    string
	Telemetry       string
	Usage           string
	Rated           string
	Ledger          string
	Quarantine      string
	// Commands holds operator actions (ops.command), co-partitioned with
	// the joined topics; Requests the joiner's requests to the platform's
	// controllers (CONTRACT section 9.2).
	Commands string
	Requests string
}

// DefaultTopics returns the contract's default topic names.
func DefaultTopics() Topics {
	return Topics{
		PlatformRecords: TopicPlatformRecords,
		Observations:    TopicObservations,
		Telemetry:       TopicTelemetry,
		Usage:           TopicUsage,
		Rated:           TopicRated,
		Ledger:          TopicLedger,
		Quarantine:      TopicQuarantine,
		Commands:        TopicCommands,
		Requests:        TopicRequests,
	}
}

// RegisterFlags registers one -topic.<stream> flag per topic on fs, with
// t's names as defaults.
func (t *Topics) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&t.PlatformRecords, "topic.records", t.PlatformRecords, "platform records topic (compacted)")
	fs.StringVar(&t.Observations, "topic.observations", t.Observations, "provider observations topic")
	fs.StringVar(&t.Telemetry, "topic.telemetry", t.Telemetry, "node-agent telemetry topic")
	fs.StringVar(&t.Usage, "topic.usage", t.Usage, "usage events topic")
	fs.StringVar(&t.Rated, "topic.rated", t.Rated, "rated usage topic")
	fs.StringVar(&t.Ledger, "topic.ledger", t.Ledger, "ledger entries topic")
	fs.StringVar(&t.Quarantine, "topic.quarantine", t.Quarantine, "quarantine topic for rejected input")
	fs.StringVar(&t.Commands, "topic.commands", t.Commands, "operator commands topic (co-partitioned with the joined topics)")
	fs.StringVar(&t.Requests, "topic.requests", t.Requests, "topic of the joiner's requests to the platform's controllers")
}

// ForType returns the topic an event type is written to, or "" if unknown.
func (t Topics) ForType(eventType string) string {
	switch eventType {
	case TypePlatformRecord, TypeArtifact, TypePolicyBundle:
		return t.PlatformRecords
	case TypeProviderObservation, TypeScanCompleted:
		return t.Observations
	case TypeHeartbeat:
		return t.Telemetry
	case TypeUsageRecorded:
		return t.Usage
	case TypeBillingRated:
		return t.Rated
	case TypeLedgerEntry:
		return t.Ledger
	case TypeCommand:
		return t.Commands
	}
	return ""
}

// Broadcast reports whether events of eventType are facts every
// partition needs, written to every partition of their topic rather than
// to the partition of their key: scan markers and the fleet registry's
// artifacts and policy bundles (CONTRACT 8.2).
func Broadcast(eventType string) bool {
	switch eventType {
	case TypeScanCompleted, TypeArtifact, TypePolicyBundle:
		return true
	}
	return false
}

// Joined returns the co-partitioned topics the joiner consumes: the three
// streams of the fleet and the operators' commands.
func (t Topics) Joined() []string {
	return []string{t.PlatformRecords, t.Observations, t.Telemetry, t.Commands}
}

// Billing returns the co-partitioned billing topics.
func (t Topics) Billing() []string { return []string{t.Usage, t.Rated, t.Ledger} }

// All returns every topic: the joined ones, the billing ones, the
// requests, then the quarantine.
func (t Topics) All() []string {
	return append(append(t.Joined(), t.Billing()...), t.Requests, t.Quarantine)
}
