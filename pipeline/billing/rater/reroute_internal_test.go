package rater

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/contract"
)

// ownerOf returns a rater without a broker (roundRater) of a group over
// partitions partitions that owns those of owned.
func ownerOf(t *testing.T, partitions int32, owned ...int32) *Rater {
	t.Helper()
	r := roundRater(t, partitions)
	for p := range partitions {
		if !slices.Contains(owned, p) {
			delete(r.state.parts, p)
		}
	}
	return r
}

// usageIn returns a usage record (roundUsage) whose usage key hashes to
// partition p of n, written to partition at (its key's when at is
// negative) at offset.
func usageIn(r *Rater, n, p, at int32, offset int64) *kgo.Record {
	for i := 0; ; i++ {
		id := fmt.Sprintf("m-%d", i)
		if contract.Partition([]byte(contract.UsageKey("gw", id)), n) != p {
			continue
		}
		rec := roundUsage(r, "e-1", "u-1", "gw", id, "2026-11-21T10:15:30.123Z")
		if at >= 0 {
			rec.Partition = at
		}
		rec.Offset = offset
		return rec
	}
}

// TestMispartitionedUsageRerouted: a usage on a partition its key does not
// hash to is neither rated nor quarantined there but copied to its key's
// partition, whether this rater owns that partition or another does; the
// owner of the key's partition rates the copy once, restoring that
// partition from its log alone (a rebalance), and a redelivery after it
// is not rated again.
func TestMispartitionedUsageRerouted(t *testing.T) {
	const n = 2
	for _, owned := range [][]int32{{0, 1}, {0}} {
		t.Run(fmt.Sprintf("owns %v", owned), func(t *testing.T) {
			a := ownerOf(t, n, owned...)
			mis := usageIn(a, n, 1, 0, 7)
			out := rateRound(a, mis)
			if len(out) != 1 || out[0].Topic != a.opts.Topics.Usage || string(out[0].Key) != string(mis.Key) ||
				string(out[0].Value) != string(mis.Value) || !out[0].Timestamp.Equal(mis.Timestamp) {
				t.Fatalf("the mis-partitioned usage produced %s, want its copy for partition 1", describe(out))
			}
			if h := out[0].Headers[len(out[0].Headers)-1]; h.Key != contract.HeaderReroutedFrom || string(h.Value) != a.opts.Topics.Usage+"/0/7" {
				t.Errorf("the copy's last header %s=%s", h.Key, h.Value)
			}
			// Partition 1's owner rates the copy.
			b := ownerOf(t, n, 1)
			cp := *out[0]
			cp.Partition, cp.Offset = 1, 0
			rated := rateRound(b, &cp)
			if len(rated) != 1 || rated[0].Topic != b.opts.Topics.Rated {
				t.Fatalf("the copy produced %s, want its rated line", describe(rated))
			}
			// Its owner after a rebalance restores partition 1 from its
			// log alone: the copy.
			c := ownerOf(t, n, 1)
			c.decoder = contract.NewDecoder(contract.Validator{Environment: c.opts.Environment, ZeroCopy: true})
			c.m = newMetrics(nil)
			c.replay(&cp)
			c.state.commit()
			for name, r := range map[string]*Rater{"its owner": b, "its next owner": c} {
				if again := rateRound(r, usageIn(r, n, 1, -1, 1)); len(again) != 0 {
					t.Errorf("%s rated a redelivery to the right partition: %s %s", name, again[0].Topic, again[0].Value)
				}
			}
		})
	}
}

// describe names the topic and value of each record.
func describe(recs []*kgo.Record) string {
	s := fmt.Sprintf("%d records", len(recs))
	for _, r := range recs {
		s += fmt.Sprintf("; %s: %s", r.Topic, r.Value)
	}
	return s
}
