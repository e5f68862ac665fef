package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/driftline/driftline/pipeline/api/apitypes"
)

// A node's observations timeline (CONTRACT 8.3, docs/fleet-core.md): the
// joiner keeps, per node, the Kafka coordinates topic/partition/offset of
// the last events that touched it (node_agent_status.recent_events); the
// node page reads those exact records from the topics. Records are read
// with one Fetch request per coordinate at its exact offset, sent to the
// partition's leader: no consumer group, no offsets committed, nothing
// read beyond the one record.

// MaxObservations bounds the recent events a node page reads.
const MaxObservations = 8

// maxSummary bounds an observation's payload summary.
const maxSummary = 240

// EventReader reads the records at Kafka coordinates; *KafkaEvents is
// one. It never fails as a whole: a record it cannot read carries its
// status (expired, unavailable, invalid) instead.
type EventReader interface {
	Events(ctx context.Context, coordinates []string) []apitypes.Observation
}

// KafkaEvents reads records by coordinate through a Kafka client.
type KafkaEvents struct {
	cl      *kgo.Client
	timeout time.Duration
}

// NewKafkaEvents returns an EventReader over cl whose reads give up after
// timeout (default 2s): Kafka being slow or down costs a node page that
// long at most, and leaves the coordinates shown as unavailable.
func NewKafkaEvents(cl *kgo.Client, timeout time.Duration) *KafkaEvents {
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	return &KafkaEvents{cl: cl, timeout: timeout}
}

// parseCoordinate reads topic/partition/offset; Kafka topic names hold
// no '/', so the last two fields are the numbers.
func parseCoordinate(c string) (apitypes.Observation, bool) {
	o := apitypes.Observation{Coordinate: c}
	i := strings.LastIndexByte(c, '/')
	j := -1
	if i > 0 {
		j = strings.LastIndexByte(c[:i], '/')
	}
	if j <= 0 {
		o.Status, o.Error = apitypes.ObservationInvalid, "not topic/partition/offset"
		return o, false
	}
	p, err1 := strconv.ParseInt(c[j+1:i], 10, 32)
	off, err2 := strconv.ParseInt(c[i+1:], 10, 64)
	if err1 != nil || err2 != nil || p < 0 || off < 0 {
		o.Status, o.Error = apitypes.ObservationInvalid, "not topic/partition/offset"
		return o, false
	}
	o.Topic, o.Partition, o.Offset = c[:j], int32(p), off
	return o, true
}

// unreadObservations returns the coordinates as observations of status
// st (with the reason why), for when nothing can be read.
func unreadObservations(coords []string, st, why string) []apitypes.Observation {
	out := make([]apitypes.Observation, len(coords))
	for i, c := range coords {
		o, ok := parseCoordinate(c)
		if ok {
			o.Status, o.Error = st, why
		}
		out[i] = o
	}
	return out
}

// Events reads the records at coords, in their order, at most
// MaxObservations.
func (k *KafkaEvents) Events(ctx context.Context, coords []string) []apitypes.Observation {
	coords = coords[:min(len(coords), MaxObservations)]
	out := make([]apitypes.Observation, len(coords))
	var topics []string
	for i, c := range coords {
		o, ok := parseCoordinate(c)
		out[i] = o
		if ok && !strings.Contains(strings.Join(topics, "\x00")+"\x00", o.Topic+"\x00") {
			topics = append(topics, o.Topic)
		}
	}
	if len(topics) == 0 {
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, k.timeout)
	defer cancel()
	// kadm's Close would close the shared client: this one is never closed.
	meta, err := kadm.NewClient(k.cl).Metadata(ctx, topics...)
	if err != nil {
		for i := range out {
			if out[i].Status == "" {
				out[i].Status, out[i].Error = apitypes.ObservationUnavailable, "kafka metadata: "+err.Error()
			}
		}
		return out
	}
	var wg sync.WaitGroup
	for i := range out {
		if out[i].Status != "" {
			continue
		}
		wg.Add(1)
		go func(o *apitypes.Observation) {
			defer wg.Done()
			if err := k.fetch(ctx, meta, o); err != nil {
				o.Status, o.Error = apitypes.ObservationUnavailable, err.Error()
			}
		}(&out[i])
	}
	wg.Wait()
	return out
}

// fetch reads the record at o's coordinate from the partition's leader
// and fills o; an error leaves o unavailable.
func (k *KafkaEvents) fetch(ctx context.Context, meta kadm.Metadata, o *apitypes.Observation) error {
	td, ok := meta.Topics[o.Topic]
	if !ok || td.Err != nil {
		if errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
			o.Status = apitypes.ObservationExpired
			return nil
		}
		return fmt.Errorf("topic %s: %v", o.Topic, td.Err)
	}
	pd, ok := td.Partitions[o.Partition]
	if !ok {
		return fmt.Errorf("topic %s has no partition %d", o.Topic, o.Partition)
	}
	if pd.Err != nil || pd.Leader < 0 {
		return fmt.Errorf("partition %d of %s has no leader: %v", o.Partition, o.Topic, pd.Err)
	}
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 0 // answer at once with what is there
	req.MinBytes = 0
	req.MaxBytes = 1 << 20
	req.IsolationLevel = 1 // read_committed, as the pipeline's consumers read
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = o.Topic, td.ID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = o.Partition, o.Offset, 1<<20
	rp.CurrentLeaderEpoch, rp.LogStartOffset = -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, k.cl.Broker(int(pd.Leader)))
	if err != nil {
		return fmt.Errorf("fetch: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("fetch: %w", err)
	}
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			p := &resp.Topics[i].Partitions[j]
			if p.Partition != o.Partition {
				continue
			}
			return k.take(p, o)
		}
	}
	return errors.New("fetch: the broker answered without the partition")
}

// take fills o from the fetched partition p.
func (k *KafkaEvents) take(p *kmsg.FetchResponseTopicPartition, o *apitypes.Observation) error {
	switch err := kerr.ErrorForCode(p.ErrorCode); {
	case errors.Is(err, kerr.OffsetOutOfRange):
		if p.LogStartOffset >= 0 && o.Offset < p.LogStartOffset || p.HighWatermark > 0 && o.Offset < p.HighWatermark {
			o.Status = apitypes.ObservationExpired
			return nil
		}
		return fmt.Errorf("offset %d is past the end of the log (%d)", o.Offset, p.HighWatermark)
	case err != nil:
		return fmt.Errorf("fetch: %w", err)
	}
	fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Offset: o.Offset, Topic: o.Topic, Partition: o.Partition},
		p, kgo.DefaultDecompressor(), nil)
	for _, r := range fp.Records {
		if r.Offset < o.Offset {
			continue
		}
		if r.Offset > o.Offset {
			break // compacted away, or an aborted transaction's
		}
		o.Status = apitypes.ObservationFetched
		describe(r.Value, o)
		return nil
	}
	if o.Offset < p.LogStartOffset || len(fp.Records) > 0 || o.Offset < p.HighWatermark {
		o.Status = apitypes.ObservationExpired
		return nil
	}
	return fmt.Errorf("offset %d is past the end of the log (%d)", o.Offset, p.HighWatermark)
}

// describe fills o's envelope fields and payload summary from a record
// value; a value that is not an envelope is summarised as such.
func describe(value []byte, o *apitypes.Observation) {
	var env struct {
		EventID    string                     `json:"event_id"`
		EventType  string                     `json:"event_type"`
		Producer   string                     `json:"producer"`
		OccurredAt time.Time                  `json:"occurred_at"`
		Payload    map[string]json.RawMessage `json:"payload"`
	}
	if err := json.Unmarshal(value, &env); err != nil {
		o.Summary = fmt.Sprintf("not a JSON envelope (%d bytes)", len(value))
		return
	}
	o.EventID, o.EventType, o.Producer = env.EventID, env.EventType, env.Producer
	if !env.OccurredAt.IsZero() {
		t := env.OccurredAt.UTC()
		o.OccurredAt = &t
	}
	o.Summary = summarize(env.Payload)
}

// summarize renders a payload's scalar fields as name=value, sorted by
// name, cut to maxSummary bytes; objects and arrays show as {...} and
// [n].
func summarize(p map[string]json.RawMessage) string {
	names := make([]string, 0, len(p))
	for n := range p {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		v := strings.TrimSpace(string(p[n]))
		switch {
		case v == "" || v == "null" || v == `""`:
			continue
		case v[0] == '{':
			v = "{...}"
		case v[0] == '[':
			var a []json.RawMessage
			_ = json.Unmarshal(p[n], &a)
			v = "[" + strconv.Itoa(len(a)) + "]"
		case v[0] == '"':
			var s string
			_ = json.Unmarshal(p[n], &s)
			v = s
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(n + "=" + v)
		if b.Len() > maxSummary {
			return strings.ToValidUTF8(b.String()[:maxSummary], "") + "…"
		}
	}
	return b.String()
}
