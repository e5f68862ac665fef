package checkpoint

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// reader reads offset ranges of one partition of the checkpoint topic with
// plain Fetch requests to the partition's leader: no consumer, no
// prefetching, so a load reads exactly the ranges it asks for.
type reader struct {
	s         *Store
	partition int32
	leader    int32
	topicID   [16]byte
	dec       kgo.Decompressor
}

func (s *Store) newReader(ctx context.Context, p int32) (*reader, error) {
	r := &reader{s: s, partition: p, dec: kgo.DefaultDecompressor()}
	if err := r.refresh(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *reader) err(op string, offset int64, err error) error {
	return &PartitionError{Op: op, Topic: r.s.opts.Topic, Partition: r.partition, Offset: offset, Err: err}
}

// refresh looks up the partition's leader and the topic's id.
func (r *reader) refresh(ctx context.Context) error {
	t := r.s.opts.Topic
	md, err := r.s.adm.Metadata(ctx, t)
	if err != nil {
		return r.err("metadata", -1, err)
	}
	td, ok := md.Topics[t]
	if !ok || td.Err != nil {
		return r.err("metadata", -1, fmt.Errorf("topic missing: %v", td.Err))
	}
	pd, ok := td.Partitions[r.partition]
	if !ok || pd.Leader < 0 {
		return r.err("metadata", -1, errors.New("partition has no leader"))
	}
	r.leader, r.topicID = pd.Leader, td.ID
	return nil
}

// bounds returns the log start and end offsets of the partition.
func (r *reader) bounds(ctx context.Context) (start, end int64, err error) {
	t := r.s.opts.Topic
	starts, err := r.s.adm.ListStartOffsets(ctx, t)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return 0, 0, r.err("list offsets", -1, err)
	}
	ends, err := r.s.adm.ListEndOffsets(ctx, t)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return 0, 0, r.err("list offsets", -1, err)
	}
	so, ok1 := starts.Lookup(t, r.partition)
	eo, ok2 := ends.Lookup(t, r.partition)
	if !ok1 || !ok2 {
		return 0, 0, r.err("list offsets", -1, errors.New("partition missing from the answer"))
	}
	return so.Offset, eo.Offset, nil
}

// fetch reads records from offset on, about maxBytes of them (at least one
// batch). It returns the records at or after offset and the offset to
// fetch next.
func (r *reader) fetch(ctx context.Context, offset int64, maxBytes int32) ([]*kgo.Record, int64, error) {
	for attempt := 0; ; attempt++ {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxWaitMillis = 0
		req.MinBytes = 0
		req.MaxBytes = maxBytes
		req.IsolationLevel = 0
		req.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = r.s.opts.Topic, r.topicID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = r.partition, offset, maxBytes
		rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = -1, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)

		kresp, err := r.s.cl.Broker(int(r.leader)).Request(ctx, req)
		if err != nil {
			return nil, 0, r.err("fetch", offset, err)
		}
		resp := kresp.(*kmsg.FetchResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return nil, 0, r.err("fetch", offset, err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return nil, 0, r.err("fetch", offset, errors.New("fetch answer without the partition"))
		}
		// ProcessFetchPartition answers the offset after the last one
		// it processed (records, control and compacted-away offsets).
		fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
			Offset:         offset,
			IsolationLevel: kgo.ReadUncommitted(),
			Topic:          r.s.opts.Topic,
			Partition:      r.partition,
		}, &resp.Topics[0].Partitions[0], r.dec, nil)
		if fp.Err != nil {
			var ke *kerr.Error
			if errors.As(fp.Err, &ke) && ke.Retriable && attempt < 3 {
				// Leadership moved: look the leader up again.
				if err := r.refresh(ctx); err != nil {
					return nil, 0, err
				}
				continue
			}
			return nil, 0, r.err("fetch", offset, fp.Err)
		}
		var n float64
		for _, rec := range fp.Records {
			n += float64(len(rec.Value))
		}
		r.s.m.fetchRecords.Add(float64(len(fp.Records)))
		r.s.m.fetchBytes.Add(n)
		return fp.Records, next, nil
	}
}

// readRange returns the records with offsets in [lo, hi), in offset order.
// Offsets with no record (compacted away, control records) are absent.
func (r *reader) readRange(ctx context.Context, lo, hi int64, maxBytes int32) ([]*kgo.Record, error) {
	var out []*kgo.Record
	for cur := lo; cur < hi; {
		recs, next, err := r.fetch(ctx, cur, maxBytes)
		if err != nil {
			return nil, err
		}
		if next <= cur {
			return nil, r.err("fetch", cur, fmt.Errorf("no records below the range end %d", hi))
		}
		for _, rec := range recs {
			if rec.Offset >= hi {
				break
			}
			out = append(out, rec)
		}
		cur = next
	}
	return out, nil
}
