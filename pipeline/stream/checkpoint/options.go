package checkpoint

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultTopic is the default name of the checkpoint topic.
const DefaultTopic = "driftline.checkpoints"

// DefaultChunkBytes is the default size of one chunk record: half the
// default broker max.message.bytes (1 MiB), so a chunk with its key,
// headers and batch overhead always fits.
const DefaultChunkBytes = 512 << 10

// DefaultRetention is the default retention.ms of a created topic.
const DefaultRetention = 7 * 24 * time.Hour

// Options configure a Store.
type Options struct {
	// Brokers are the Kafka seed brokers. Required.
	Brokers []string
	// Topic is the checkpoint topic. Default DefaultTopic.
	Topic string
	// Partitions is the partition count the topic must have at least: the
	// partition count of the streams whose state is checkpointed
	// (checkpoints of partition p go to partition p). With Create, a
	// missing topic is created with this many partitions. Required when
	// Create is set; 0 skips the check otherwise.
	Partitions int32
	// Create creates the topic when it is missing. Default false.
	Create bool
	// Replication is the replication factor of a created topic. Default
	// -1: the broker's default.
	Replication int16
	// TopicConfig overrides the configuration of a created topic. The
	// defaults are cleanup.policy=compact,delete and
	// retention.ms=DefaultRetention; see the package documentation for
	// why.
	TopicConfig map[string]string
	// ChunkBytes is the size of one chunk record. It must stay below the
	// topic's max.message.bytes (broker message.max.bytes). Default
	// DefaultChunkBytes.
	ChunkBytes int
	// FetchBytes bounds the bytes one fetch request reads while loading.
	// Larger fetches fewer round trips, more memory per fetch. Default 8
	// MiB.
	FetchBytes int32
	// Registerer receives the store's metrics. Default none.
	Registerer prometheus.Registerer
	// Logger receives warnings about damaged checkpoints. Default
	// slog.Default().
	Logger *slog.Logger
	// ClientOpts are extra franz-go options (TLS, SASL, compression).
	ClientOpts []kgo.Opt
}

func (o *Options) setDefaults() error {
	if len(o.Brokers) == 0 {
		return errors.New("checkpoint: no brokers")
	}
	if o.Topic == "" {
		o.Topic = DefaultTopic
	}
	if o.Replication == 0 {
		o.Replication = -1
	}
	if o.Create && o.Partitions <= 0 {
		return errors.New("checkpoint: Create needs Partitions (the partition count of the checkpointed streams)")
	}
	if o.ChunkBytes == 0 {
		o.ChunkBytes = DefaultChunkBytes
	}
	if o.ChunkBytes < 1 || o.ChunkBytes > maxChunkBytes {
		return fmt.Errorf("checkpoint: ChunkBytes %d out of range [1, 64 MiB]", o.ChunkBytes)
	}
	if o.FetchBytes == 0 {
		o.FetchBytes = 8 << 20
	}
	if o.FetchBytes < 1 {
		return fmt.Errorf("checkpoint: FetchBytes %d must be positive", o.FetchBytes)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return nil
}

// topicConfig returns the configuration of a created topic.
func (o *Options) topicConfig() map[string]*string {
	cfg := map[string]string{
		"cleanup.policy": "compact,delete",
		"retention.ms":   strconv.FormatInt(DefaultRetention.Milliseconds(), 10),
	}
	for k, v := range o.TopicConfig {
		cfg[k] = v
	}
	out := make(map[string]*string, len(cfg))
	for k, v := range cfg {
		out[k] = &v
	}
	return out
}
