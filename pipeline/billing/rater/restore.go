package rater

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/stream"
)

// restore replays usage partitions rs.Partitions from their start up to
// the group's committed offsets (read_committed), claiming keys exactly
// as the live path did, and then owns them. Everything below a committed
// offset was rated or quarantined in a committed transaction. The
// member's lock is held.
//
// A mis-partitioned usage record is remembered under the partition its
// key hashes to; one that sits in a partition another rater owns is not
// seen here (its rater quarantined it as misrouted_not_owned, or, with a
// single rater, owned both partitions).
func (r *Rater) restore(ctx context.Context, rs *stream.Restore) error {
	fresh := make(map[int32]map[string]claim, len(rs.Partitions))
	consume := map[int32]kgo.Offset{}
	ends := map[int32]int64{}
	for _, p := range rs.Partitions {
		fresh[p] = map[string]claim{}
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
					r.replay(rec, fresh)
				}
			}, nil)
		if err != nil {
			return err
		}
	}
	for p, keys := range fresh {
		r.state.parts[p] = keys
	}
	return nil
}

// replay claims the key of one already processed usage record, in the
// partitions being restored (fresh) or those owned already.
func (r *Rater) replay(rec *kgo.Record, fresh map[int32]map[string]claim) {
	env, payload, verr := r.validator.DecodeEvent(rec.Value)
	if verr != nil {
		return
	}
	u, ok := payload.(*contract.Usage)
	if !ok {
		return
	}
	key := contract.UsageKey(u.MeteringSource, u.MeteringID)
	part := contract.Partition([]byte(key), r.partitions)
	m, ok := fresh[part]
	if !ok {
		m, ok = r.state.parts[part]
	}
	if ok {
		if _, seen := m[key]; !seen {
			m[key] = claim{u.UsageID, contract.PayloadDigest(env.Payload)}
		}
	}
	r.m.RestoreEvents.Inc()
}
