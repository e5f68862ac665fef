package rater

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/billing/pricebook"
	"github.com/driftline/driftline/pipeline/contract"
)

// The tests here run rounds through prepare and decide, without a broker.

// roundRater returns a Rater without a broker that owns partitions
// partitions of the usage topic.
func roundRater(t *testing.T, partitions int32) *Rater {
	t.Helper()
	b, err := pricebook.Parse([]byte(roundBook))
	if err != nil {
		t.Fatal(err)
	}
	o := DefaultOptions()
	o.Prices = pricebook.NewStatic(b)
	o.Now = func() time.Time { return time.Date(2026, 11, 21, 11, 0, 0, 0, time.UTC) }
	r := &Rater{opts: o, state: newKeyState(o.Horizon), partitions: partitions}
	for p := int32(0); p < partitions; p++ {
		r.state.parts[p] = r.state.newPart()
	}
	return r
}

const roundBook = `{"units":[{"unit_id":"gpu_hour","version":1,"precision":2,"unit_price":"2.450000","currency":"USD","rating_category":"compute","lifecycle":"active"}]}`

// roundUsage is a usage record as a gateway writes it, in the partition
// its key hashes to, that occurred at occurredAt (RFC 3339) and reached
// the broker on 2026-11-21.
func roundUsage(r *Rater, eventID, usageID, source, meteringID, occurredAt string) *kgo.Record {
	key := []byte(contract.UsageKey(source, meteringID))
	v := fmt.Appendf(nil, `{"event_id":%q,"event_type":"usage.recorded","schema_version":1,"producer":"gw-test",`+
		`"occurred_at":%q,"environment":"local_parity","payload":{`+
		`"usage_id":%q,"metering_source":%q,"metering_id":%q,"unit_id":"gpu_hour","quantity":"10",`+
		`"product_id":"gpuaas","tenant_id":"t-1","project_id":"p-1","window_start":"2026-11-21T10:00:00Z","window_end":"2026-11-21T10:15:00Z"}}`,
		eventID, occurredAt, usageID, source, meteringID)
	return &kgo.Record{Topic: r.opts.Topics.Usage, Key: key, Value: v, Partition: contract.Partition(key, r.partitions),
		Timestamp: time.Date(2026, 11, 21, 10, 15, 31, 0, time.UTC)}
}

// rateRound runs one round's prepare and decide over recs and commits
// it; it returns the records the round produces.
func rateRound(r *Rater, recs ...*kgo.Record) []*kgo.Record {
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

// wantRated fails unless out holds only rated lines, n of them.
func wantRated(t *testing.T, r *Rater, what string, out []*kgo.Record, n int) {
	t.Helper()
	rated := 0
	for _, o := range out {
		if o.Topic == r.opts.Topics.Rated {
			rated++
		}
	}
	if rated != n || len(out) != n {
		for _, o := range out {
			t.Logf("%s: %s", o.Topic, o.Value)
		}
		t.Fatalf("%s: %d records, %d of them rated lines; want %d rated lines", what, len(out), rated, n)
	}
}

// TestRedeliveryAtTheEndsOfTime: usage that occurred near either end of
// the times the validator accepts (contract.MinTime, contract.MaxTime) is
// rated once, and its redelivery changes nothing, on a partition whose
// watermark is in 2026 and on a fresh one. Near the end, the generation
// of its claim ends beyond the largest int64; near the start, the
// watermark less the horizon lies before the earliest one.
func TestRedeliveryAtTheEndsOfTime(t *testing.T) {
	for _, at := range []string{
		"2262-04-11T23:00:00Z",
		"2262-04-11T23:47:16.854775807Z", // contract.MaxTime
		"1677-09-21T01:00:00Z",
		"1677-09-21T00:12:43.145224192Z", // contract.MinTime
	} {
		for _, fresh := range []bool{false, true} {
			r := roundRater(t, 1)
			name := at + " on a fresh partition"
			if !fresh {
				name = at + " after usage of 2026"
				wantRated(t, r, name+": usage of 2026", rateRound(r, roundUsage(r, "e-0", "u-0", "gw", "m-0", "2026-11-21T10:15:30Z")), 1)
				if strings.HasPrefix(at, "1677") {
					continue // late: before the watermark less the horizon
				}
			}
			wantRated(t, r, name, rateRound(r, roundUsage(r, "e-1", "u-1", "gw", "m-1", at)), 1)
			wantRated(t, r, name+": the redelivery", rateRound(r, roundUsage(r, "e-1", "u-1", "gw", "m-1", at)), 0)
		}
	}
}

// TestRedeliveryBefore1970: on a fresh partition, usage that occurred
// before 1970 is rated once; its redelivery changes nothing, and another
// usage_id on its key is duplicate_usage.
func TestRedeliveryBefore1970(t *testing.T) {
	r := roundRater(t, 1)
	const at = "1969-06-01T00:00:00Z"
	wantRated(t, r, "usage of 1969", rateRound(r, roundUsage(r, "e-1", "u-1", "gw", "m-1", at)), 1)
	wantRated(t, r, "its redelivery", rateRound(r, roundUsage(r, "e-1", "u-1", "gw", "m-1", at)), 0)
	out := rateRound(r, roundUsage(r, "e-2", "u-2", "gw", "m-1", "1969-06-01T00:00:01Z"))
	if len(out) != 1 || out[0].Topic != r.opts.Topics.Quarantine || string(headerOf(out[0], contract.HeaderReason)) != string(contract.ReasonDuplicateUsage) {
		t.Fatalf("another usage_id on the key: %v", out)
	}
}

// headerOf returns the value of record header key.
func headerOf(rec *kgo.Record, key string) []byte {
	for _, h := range rec.Headers {
		if h.Key == key {
			return h.Value
		}
	}
	return nil
}

// TestSlashInMeteringSource: duplicate_usage is judged on the pair of
// metering_source and metering_id (CONTRACT 5), which either may hold a
// slash in: ("gw/eu", "m-1") and ("gw", "eu/m-1") share the usage key
// gw/eu/m-1, and both are rated, under that Kafka key. A redelivery of
// either changes nothing and a second usage_id of either is
// duplicate_usage, in the rater that rated them and in one that restored
// its state by replaying their records.
func TestSlashInMeteringSource(t *testing.T) {
	const n = 4
	live := roundRater(t, n)
	const at = "2026-11-21T10:15:30Z"
	pairs := [][2]string{{"gw/eu", "m-1"}, {"gw", "eu/m-1"}}
	var first []*kgo.Record
	for i, p := range pairs {
		first = append(first, roundUsage(live, fmt.Sprintf("e-%d", i), fmt.Sprintf("u-%d", i), p[0], p[1], at))
	}
	out := rateRound(live, first...)
	wantRated(t, live, "two pairs of one usage key", out, len(pairs))
	for _, o := range out {
		if string(o.Key) != "gw/eu/m-1" {
			t.Fatalf("rated line keyed %q", o.Key)
		}
	}
	restored := roundRater(t, n)
	restored.decoder = contract.NewDecoder(contract.Validator{Environment: contract.EnvLocalParity, ZeroCopy: true})
	restored.m = newMetrics(nil)
	for _, rec := range first {
		restored.replay(rec)
	}
	restored.state.commit()
	for name, r := range map[string]*Rater{"live": live, "restored": restored} {
		wantRated(t, r, name+": the redeliveries", rateRound(r, first...), 0)
		for i, p := range pairs {
			out := rateRound(r, roundUsage(r, fmt.Sprintf("e-dup-%d", i), fmt.Sprintf("u-dup-%d", i), p[0], p[1], at))
			if len(out) != 1 || string(headerOf(out[0], contract.HeaderReason)) != string(contract.ReasonDuplicateUsage) ||
				!bytes.Contains(out[0].Value, fmt.Appendf(nil, "by usage_id u-%d", i)) {
				t.Fatalf("%s: a second usage_id of (%q, %q): %v", name, p[0], p[1], out)
			}
		}
	}
}
