package rater

import (
	"flag"
	"strings"
	"unicode"

	"github.com/driftline/driftline/pipeline/contract"
)

// RegisterFlags registers the flags of o's rating options on fs, under
// -rater., with o's values as their defaults. -rater.transactions and
// -rater.currencies are written in the command line's terms (transactions
// on, a comma-separated list): the returned finish sets
// DisableTransactions and Currencies from them once fs is parsed.
func (o *Options) RegisterFlags(fs *flag.FlagSet) (finish func()) {
	fs.StringVar(&o.TransactionalID, "rater.transactionalID", o.TransactionalID, "transactional id of this instance (env DRIFTLINE_RATER_TRANSACTIONAL_ID): stable across its restarts, distinct between instances running at once")
	fs.StringVar(&o.InstanceID, "rater.instanceID", o.InstanceID, "static group membership id (default: the transactional id): a restart takes over the partitions at once instead of after the session timeout; \"-\" for dynamic membership")
	txns := fs.Bool("rater.transactions", !o.DisableTransactions, "rate exactly-once in Kafka transactions; false is at-least-once and only for measuring the transactions' overhead")
	fs.DurationVar(&o.TransactionTimeout, "rater.transactionTimeout", o.TransactionTimeout, "how long a crashed rater's open transaction may hold back read_committed consumers if no restart fences it")
	fs.IntVar(&o.MaxBatch, "rater.maxBatch", o.MaxBatch, "records per transaction; larger amortises commits, smaller redoes less after a crash")
	fs.DurationVar(&o.Horizon, "rater.horizon", o.Horizon, "event time a usage key is remembered for after its usage occurred (bounds memory, 64-93 bytes a key); usage that occurred longer before its partition's watermark is quarantined as "+string(contract.ReasonLate)+", never rated")
	fs.StringVar(&o.Compression, "rater.compression", o.Compression, "codec of the batches the rater produces (env DRIFTLINE_RATER_COMPRESSION): snappy, lz4, zstd, gzip or none (no CPU spent compressing here or decompressing in the billing reconciler, about six times the bytes on the wire and on the brokers' disks)")
	currencies := fs.String("rater.currencies", strings.Join(o.Currencies, ","), "comma-separated currencies this rater may bill (empty: any the price book names); other usage is quarantined")
	return func() {
		o.DisableTransactions = !*txns
		o.Currencies = strings.FieldsFunc(*currencies, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
	}
}
