package rater

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/stream"
)

// restore replays usage partitions rs.Partitions from their start up to
// the group's committed offsets (read_committed), claiming keys and moving
// watermarks through the live path's own check, record by record in the
// same order, and then owns them. Everything below a committed offset was
// rated or quarantined in a committed transaction, so the state is the
// one the live path had committed. The member's lock is held, and no
// round is in progress.
//
// A mis-partitioned usage record was rerouted (Rater.reroute): its copy in
// the partition its key hashes to is replayed there and claims the key.
// The original claims it too when that partition is restored with it (as
// rater releases before rerouting rated it under the key's partition):
// the copy is then its redelivery, and the state is the same.
func (r *Rater) restore(ctx context.Context, rs *stream.Restore) error {
	consume := map[int32]kgo.Offset{}
	ends := map[int32]int64{}
	for _, p := range rs.Partitions {
		r.state.drop(p)
		r.state.parts[p] = r.state.newPart()
		if at := rs.Committed(r.opts.Topics.Usage, p); at > 0 {
			consume[p] = kgo.NewOffset().AtStart()
			ends[p] = at
		}
	}
	if len(ends) > 0 {
		// Read to the committed offsets exactly: a restore that stopped
		// short (a broker down for a while) would forget claimed keys and
		// rate a usage twice.
		err := rs.Replay(ctx, map[string]map[int32]kgo.Offset{r.opts.Topics.Usage: consume}, map[string]map[int32]int64{r.opts.Topics.Usage: ends},
			func(_ string, _ int32, recs []*kgo.Record, _ int64) {
				for _, rec := range recs {
					r.replay(rec)
				}
				r.state.commit()
			}, nil)
		if err != nil {
			for _, p := range rs.Partitions {
				r.state.drop(p)
			}
			return err
		}
	}
	return nil
}

// replay claims the key of one already processed usage record, as the
// live path did (process).
func (r *Rater) replay(rec *kgo.Record) {
	env, payload, digest, verr := r.decoder.DecodeEventPayloadDigest(rec.Value)
	if verr != nil {
		return
	}
	u, ok := payload.(*contract.Usage)
	if !ok {
		return
	}
	r.keyBuf = append(append(append(r.keyBuf[:0], u.MeteringSource...), '/'), u.MeteringID...)
	e := usageEvent{part: contract.Partition(r.keyBuf, r.partitions), key: r.keyBuf, hash: hashKey(r.keyBuf), usageID: u.UsageID,
		digest: digest, at: env.OccurredAt.UnixNano()}
	r.keyBuf = e.setClaim(r.keyBuf, u.MeteringSource, u.MeteringID)
	if !rec.Timestamp.IsZero() {
		e.ts = rec.Timestamp.UnixNano()
	}
	r.state.check(&e)
	r.m.RestoreEvents.Inc()
}
