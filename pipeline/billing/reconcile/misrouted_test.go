package reconcile

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/stream/streamtest"
)

// TestMispartitionedUsage: a usage on a partition its usage key does not
// hash to is applied to the key's partition when this member owns it (the
// rater's copy there is then a redelivery), and left to the owner of the
// key's partition otherwise, where the rater's copy of it is applied: it
// is never applied where it arrived, whose rated lines it would never
// meet.
func TestMispartitionedUsage(t *testing.T) {
	const n = 2
	opts := Options{}
	opts.Brokers, opts.Prices = []string{"127.0.0.1:9"}, testPrices(t)
	if err := opts.defaults(); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 21, 10, 15, 0, 0, time.UTC)
	var rec *kgo.Record
	for i := 0; ; i++ {
		u := usage(fmt.Sprintf("u-%d", i), fmt.Sprintf("m-%d", i), "gpu_hour")
		u.WindowStart, u.WindowEnd = at.Add(-time.Minute), at
		if rec = streamtest.Event(t, opts.Topics, contract.TypeUsageRecorded, "gpu-meter", 1, at, u); contract.Partition(rec.Key, n) == 1 {
			break
		}
	}
	rec.Partition, rec.Timestamp = 0, at
	copied := *rec
	copied.Partition = 1
	for _, owned := range [][]int32{{0, 1}, {0}} {
		r := &Reconciler{opts: opts, m: newMetrics(nil), partitions: n,
			decoder: contract.NewDecoder(contract.Validator{Environment: opts.Environment, ZeroCopy: true})}
		r.out = output{current: map[string]int{}, m: r.m}
		parts := map[int32]*partition{}
		for _, p := range owned {
			parts[p] = r.newPartition(p, &r.out)
		}
		r.apply(parts, rec)
		if p := parts[1]; p != nil {
			r.apply(parts, &copied)
		}
		tracked := map[int32]int{}
		for p, part := range parts {
			tracked[p], _ = part.tracker.Tracked()
		}
		want := map[int32]int{0: 0, 1: 1}
		if len(owned) == 1 {
			want = map[int32]int{0: 0}
		}
		if fmt.Sprint(tracked) != fmt.Sprint(want) {
			t.Errorf("owning %v: usage tracked per partition %v, want %v", owned, tracked, want)
		}
	}
}
