package rater

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/stream/logmerge"
	"github.com/driftline/driftline/pipeline/stream/retry"
)

// assigned rebuilds the usage-key state of newly assigned partitions.
func (r *Rater) assigned(ctx context.Context, _ *kgo.Client, assigned map[string][]int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var fresh []int32
	for _, p := range assigned[r.opts.Topics.Usage] {
		if _, ok := r.state.parts[p]; !ok {
			fresh = append(fresh, p)
		}
	}
	if len(fresh) == 0 {
		return
	}
	start := time.Now()
	err := retry.Restore(ctx, retry.RestoreTimeout, r.opts.Logger, "restore partitions", func() error {
		return r.restore(ctx, fresh)
	})
	if err != nil {
		// Without its state the rater could rate a redelivered usage
		// twice: leave the group loudly rather than guess.
		for _, p := range fresh {
			delete(r.state.parts, p)
		}
		r.opts.Logger.Error("restore failed; leaving the group", "partitions", fresh, "err", err)
		r.left = fmt.Errorf("rater: left the group: partitions %v not restored: %w", fresh, err)
		go r.consumer.Close()
		return
	}
	r.m.assigned.Set(float64(len(r.state.parts)))
	r.m.keys.Set(float64(r.state.keys()))
	r.m.restoreSeconds.Observe(time.Since(start).Seconds())
	r.opts.Logger.Info("partitions assigned", "partitions", fresh, "restore", time.Since(start).Round(time.Millisecond), "keys", r.state.keys())
}

// revoked drops the state of revoked or lost partitions. A round in
// progress is aborted by the transact session.
func (r *Rater) revoked(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range revoked[r.opts.Topics.Usage] {
		delete(r.state.parts, p)
	}
	r.m.assigned.Set(float64(len(r.state.parts)))
	r.m.keys.Set(float64(r.state.keys()))
}

// restore replays usage partitions ps from their start up to the group's
// committed offsets (read_committed), claiming keys exactly as the live
// path did. Everything below a committed offset was rated or quarantined
// in a committed transaction. mu is held.
//
// A mis-partitioned usage record is remembered under the partition its
// key hashes to; one that sits in a partition another rater owns is not
// seen here (its rater quarantined it as misrouted_not_owned, or, with a
// single rater, owned both partitions).
func (r *Rater) restore(ctx context.Context, ps []int32) error {
	for _, p := range ps {
		r.state.parts[p] = map[string]string{}
	}
	committed, err := r.committedOffsets(ctx)
	if err != nil {
		return err
	}
	consume := map[int32]kgo.Offset{}
	ends := map[int32]int64{}
	for _, p := range ps {
		if o, ok := committed.Lookup(r.opts.Topics.Usage, p); ok && o.At > 0 {
			consume[p] = kgo.NewOffset().AtStart()
			ends[p] = o.At
		}
	}
	if len(ends) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(append(append([]kgo.Opt{
		kgo.SeedBrokers(r.opts.Brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{r.opts.Topics.Usage: consume}),
	}, logmerge.ReplayOpts()...), r.opts.ClientOpts...)...)
	if err != nil {
		return fmt.Errorf("restore client: %w", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	// Read to the committed offsets exactly: a restore that stopped short
	// (a broker down for a while) would forget claimed keys and rate a
	// usage twice.
	return logmerge.ReadTo(ctx, cl, map[string]map[int32]int64{r.opts.Topics.Usage: ends},
		func(_ string, _ int32, recs []*kgo.Record, _ int64) {
			for _, rec := range recs {
				r.replay(rec)
			}
		},
		func() {})
}

// replay claims the key of one already processed usage record.
func (r *Rater) replay(rec *kgo.Record) {
	_, payload, verr := r.validator.DecodeEvent(rec.Value)
	if verr != nil {
		return
	}
	u, ok := payload.(*contract.Usage)
	if !ok {
		return
	}
	key := contract.UsageKey(u.MeteringSource, u.MeteringID)
	part := contract.Partition([]byte(key), r.partitions)
	if m, ok := r.state.parts[part]; ok {
		if _, seen := m[key]; !seen {
			m[key] = u.UsageID
		}
	}
	r.m.restoreEvents.Inc()
}

// committedOffsets fetches the group's committed offsets, waiting while a
// transaction that commits offsets is still pending (a predecessor's,
// until the fencing abort or its timeout lands).
func (r *Rater) committedOffsets(ctx context.Context) (kadm.OffsetResponses, error) {
	deadline := time.Now().Add(2*r.opts.TransactionTimeout + 30*time.Second)
	for backoff := 50 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		resp, err := r.adm.FetchOffsets(kadm.RequireStable(ctx), r.opts.Group)
		if err == nil {
			unstable := false
			resp.Each(func(o kadm.OffsetResponse) {
				if errors.Is(o.Err, kerr.UnstableOffsetCommit) {
					unstable = true
				}
			})
			if !unstable {
				if err := resp.Error(); err != nil {
					return nil, fmt.Errorf("fetch committed offsets: %w", err)
				}
				return resp, nil
			}
		} else if !errors.Is(err, kerr.UnstableOffsetCommit) {
			return nil, fmt.Errorf("fetch committed offsets: %w", err)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("fetch committed offsets: a transaction is still pending after %s", time.Until(deadline))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(backoff):
		}
	}
}
