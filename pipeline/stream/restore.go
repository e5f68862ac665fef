package stream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/stream/logmerge"
	"github.com/driftline/driftline/pipeline/stream/retry"
)

// A Restore is one attempt at restoring newly assigned partitions, handed
// to Processor.Restore: the group's committed offsets and the end offsets
// of the consumed topics as of the attempt, and the means to replay the
// logs up to them.
type Restore struct {
	// Partitions are the partition numbers new to the member, ascending.
	Partitions []int32
	// Began is when the member began restoring them (before the first
	// attempt).
	Began time.Time

	committed kadm.OffsetResponses
	ends      kadm.ListedOffsets
	m         *Member
}

// restore makes one attempt at restoring r.Partitions.
func (m *Member) restore(ctx context.Context, r *Restore) error {
	var err error
	if r.committed, err = m.committedOffsets(ctx); err != nil {
		return err
	}
	if r.ends, err = m.adm.ListEndOffsets(ctx, m.opts.Topics...); err != nil {
		return fmt.Errorf("list end offsets: %w", err)
	}
	return m.p.Restore(ctx, r)
}

// Committed returns the group's committed offset of topic's partition p:
// a restore's state includes exactly the records below it. 0 when nothing
// is committed.
func (r *Restore) Committed(topic string, p int32) int64 {
	if o, ok := r.committed.Lookup(topic, p); ok && o.Err == nil && o.At > 0 {
		return o.At
	}
	return 0
}

// More reports whether topic's partition p has records at or past its
// committed offset: a live merge waits for the first of them, so that the
// first fetch of another stream does not run ahead of it.
func (r *Restore) More(topic string, p int32) bool {
	o, ok := r.ends.Lookup(topic, p)
	return ok && o.Err == nil && o.Offset > r.Committed(topic, p)
}

// Replay reads the partitions of to, each from its offset in from up to
// (not including) its offset in to, read committed with the markers kept
// and with the member's fetch limit and client options, for at most
// ReplayTimeout. It calls deliver and drained (nil: nothing to do once
// per poll) as logmerge.ReadTo does, and like it never takes a silent
// partition as done: it waits for the broker, so a restore never ends
// with part of its state missing. With nothing in to it does nothing.
func (r *Restore) Replay(ctx context.Context, from map[string]map[int32]kgo.Offset, to map[string]map[int32]int64,
	deliver func(topic string, partition int32, recs []*kgo.Record, unfetched int64), drained func()) error {
	if len(to) == 0 {
		return nil
	}
	if drained == nil {
		drained = func() {}
	}
	o := r.m.opts
	cl, err := kgo.NewClient(append(append([]kgo.Opt{
		kgo.SeedBrokers(o.Brokers...),
		kgo.ConsumePartitions(from),
		kgo.FetchMaxBytes(FetchMaxBytes),
	}, logmerge.ReplayOpts()...), o.ClientOpts...)...)
	if err != nil {
		return fmt.Errorf("restore client: %w", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, ReplayTimeout)
	defer cancel()
	return logmerge.ReadTo(ctx, cl, to, deliver, drained)
}

// stableBackoff spaces the requests for committed offsets while a
// transaction that commits some is pending.
var stableBackoff = retry.Backoff{First: 50 * time.Millisecond, Max: time.Second}

// errUnstable is a fetch of committed offsets that a pending transaction
// holds back.
var errUnstable = errors.New("a transaction is still pending")

// committedOffsets fetches the group's committed offsets, waiting while a
// transaction that commits offsets is still pending (a predecessor's,
// until the fencing abort or its timeout lands). An error of any
// partition fails it: a partition taken as uncommitted would be restored
// empty.
func (m *Member) committedOffsets(ctx context.Context) (kadm.OffsetResponses, error) {
	wait := 2*m.opts.TransactionTimeout + 30*time.Second
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var resp kadm.OffsetResponses
	err := retry.Do(wctx.Done(), stableBackoff, func() error {
		var err error
		resp, err = m.adm.FetchOffsets(kadm.RequireStable(ctx), m.opts.Group)
		if errors.Is(err, kerr.UnstableOffsetCommit) {
			return errUnstable
		}
		if err != nil {
			return retry.Permanent(fmt.Errorf("fetch committed offsets: %w", err))
		}
		unstable := false
		resp.Each(func(o kadm.OffsetResponse) {
			unstable = unstable || errors.Is(o.Err, kerr.UnstableOffsetCommit)
		})
		if unstable {
			return errUnstable
		}
		if err := resp.Error(); err != nil {
			return retry.Permanent(fmt.Errorf("fetch committed offsets: %w", err))
		}
		return nil
	}, nil)
	if errors.Is(err, errUnstable) {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("fetch committed offsets: %w after %s", errUnstable, wait)
	}
	return resp, err
}
