package rater

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/billing/pricebook"
	"github.com/driftline/driftline/pipeline/contract"
)

// ownerOf returns a rater of a group over partitions partitions that owns
// those of owned, with its per-record steps run by decideAll (no Kafka).
func ownerOf(t *testing.T, partitions int32, owned ...int32) *Rater {
	t.Helper()
	b, err := pricebook.Parse([]byte(`{"units":[{"unit_id":"gpu_hour","version":1,"precision":2,"unit_price":"2.450000","currency":"USD","rating_category":"compute","lifecycle":"active"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	o := DefaultOptions()
	o.Prices = pricebook.NewStatic(b)
	o.Now = func() time.Time { return time.Date(2026, 11, 21, 11, 0, 0, 0, time.UTC) }
	r := &Rater{opts: o, state: newKeyState(o.Horizon), partitions: partitions}
	for _, p := range owned {
		r.state.parts[p] = r.state.newPart()
	}
	return r
}

// decideAll runs one committed round of recs through r and returns what
// it produced.
func decideAll(r *Rater, recs ...*kgo.Record) []*kgo.Record {
	ps := make([]prepared, len(recs))
	r.ratedAt = r.opts.Now().UTC().AppendFormat(nil, ratedAtLayout)
	r.prepare(recs, ps, r.opts.Prices.Book())
	rd := &round{out: outcome{quarantined: map[contract.Reason]int{}}, recs: make([]kgo.Record, 0, len(recs))}
	var out []*kgo.Record
	for i := range ps {
		if o := r.decide(&ps[i], rd); o != nil {
			out = append(out, o)
		}
	}
	r.state.commit()
	return out
}

// usageIn returns a usage record whose usage key hashes to partition p of
// n, written to partition at (its key's when at is negative), with the
// broker's fields a fetch fills in.
func usageIn(t *testing.T, topics contract.Topics, n, p, at int32, offset int64) *kgo.Record {
	t.Helper()
	for i := 0; ; i++ {
		id := fmt.Sprintf("m-%d", i)
		key := []byte(contract.UsageKey("gw", id))
		if contract.Partition(key, n) != p {
			continue
		}
		if at < 0 {
			at = p
		}
		v := fmt.Appendf(nil, `{"event_id":"e-1","event_type":"usage.recorded","schema_version":1,"producer":"gw-test",`+
			`"occurred_at":"2026-11-21T10:15:30.123Z","environment":"local_parity","payload":{`+
			`"usage_id":"u-1","metering_source":"gw","metering_id":%q,"unit_id":"gpu_hour","quantity":"10",`+
			`"product_id":"gpuaas","tenant_id":"t-1","project_id":"p-1","window_start":"2026-11-21T10:00:00Z","window_end":"2026-11-21T10:15:00Z"}}`, id)
		return &kgo.Record{Topic: topics.Usage, Partition: at, Offset: offset, Key: key, Value: v,
			Timestamp: time.Date(2026, 11, 21, 10, 15, 31, 0, time.UTC)}
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
			mis := usageIn(t, a.opts.Topics, n, 1, 0, 7)
			out := decideAll(a, mis)
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
			rated := decideAll(b, &cp)
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
				if again := decideAll(r, usageIn(t, r.opts.Topics, n, 1, -1, 1)); len(again) != 0 {
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
