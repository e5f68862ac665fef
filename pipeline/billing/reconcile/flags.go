package reconcile

import (
	"flag"

	"github.com/driftline/driftline/pipeline/contract"
)

// RegisterFlags registers the flags of o's event-time rules and clock
// skew bound on fs, under -billing., with o's values as their defaults.
// The flags of its StageOptions and RoundOptions are the stage's
// (package service/stage).
func (o *Options) RegisterFlags(fs *flag.FlagSet) {
	fs.DurationVar(&o.Rules.RatingGrace, "billing.ratingGrace", o.Rules.RatingGrace, "event time accepted usage may wait for its rated line before it is usage_not_rated; shorter flags a slow rater sooner but raises findings that resolve when it catches up")
	fs.DurationVar(&o.Rules.LedgerGrace, "billing.ledgerGrace", o.Rules.LedgerGrace, "event time a rated line may wait for its ledger entry before it is rated_not_ledgered; must exceed the ledger's normal posting delay")
	fs.DurationVar(&o.MaxClockSkew, "billing.maxClockSkew", o.MaxClockSkew, "how far an event's occurred_at may lie ahead of its record's broker timestamp; later events are counted (clock_skew) and not applied, and accepted ones move event time no further than their broker timestamp. Negative disables the check")
	fs.DurationVar(&o.Rules.AllowedLateness, "billing.allowedLateness", o.Rules.AllowedLateness, "how far the billing watermark trails the newest event time; larger tolerates more disorder but delays grace-based findings")
	fs.Int64Var(&o.StateMemory, "billing.stateMemory", o.StateMemory, "bytes of usage states and their strings kept in memory, over all partitions; beyond it the least recently used go to scratch files in -billing.spillDir and are read back when used (negative: all in memory). Bounds memory when the reconciler holds millions of usage_ids, as while it catches up after a rater outage")
	fs.StringVar(&o.SpillDir, "billing.spillDir", o.SpillDir, "directory of the scratch files of -billing.stateMemory (unlinked as soon as created; empty: the system's temporary directory)")
	fs.DurationVar(&o.Rules.Horizon, "billing.horizon", o.Rules.Horizon, "event time after a conservation window's end at which its settled usage is dropped from memory, and for which a usage key is remembered after its usage occurred (bounds memory; a later change for dropped usage is not counted in its window, and usage that occurred longer before the partition's watermark is quarantined as "+string(contract.ReasonLate)+", never applied)")
}
