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

// TestMispartitionedRecordHoldsNothingBack: a record applied on another
// partition than the one it came from (home) passes that partition's
// deadlines whole, whatever the bound of a round's rows: the offsets
// the partition would hold back (applyAll) are those of the one the
// record came from.
func TestMispartitionedRecordHoldsNothingBack(t *testing.T) {
	defer func(n int) { maxRoundRows = n }(maxRoundRows)
	maxRoundRows = 1
	const n = 2
	opts := Options{}
	opts.Brokers, opts.Prices = []string{"127.0.0.1:9"}, testPrices(t)
	if err := opts.defaults(); err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{opts: opts, m: newMetrics(nil), partitions: n,
		decoder: contract.NewDecoder(contract.Validator{Environment: opts.Environment, ZeroCopy: true})}
	r.out = output{current: map[string]int{}, m: r.m, emit: true}
	parts := map[int32]*partition{0: r.newPartition(0, &r.out), 1: r.newPartition(1, &r.out)}
	at := time.Date(2026, 11, 21, 10, 15, 0, 0, time.UTC)
	// Three usages of partition 1, applied there, never rated.
	waiting := 0
	for i := 0; waiting < 3; i++ {
		u := usage(fmt.Sprintf("u-%d", i), fmt.Sprintf("m-%d", i), "gpu_hour")
		u.WindowStart, u.WindowEnd = at.Add(-time.Minute), at
		rec := streamtest.Event(t, opts.Topics, contract.TypeUsageRecorded, "gpu-meter", uint64(i+1), at, u)
		if contract.Partition(rec.Key, n) != 1 {
			continue
		}
		rec.Partition, rec.Timestamp = 1, at
		r.apply(parts, rec)
		waiting++
	}
	// A rated line of partition 1 that came on partition 0 an hour
	// later: its event time passes the rating grace of all three.
	later := at.Add(time.Hour)
	var rec *kgo.Record
	for i := 0; ; i++ {
		rl := rated(fmt.Sprintf("r-%d", i), fmt.Sprintf("m-r-%d", i), "4.90")
		rl.RatedAt = later
		if rec = streamtest.Event(t, opts.Topics, contract.TypeBillingRated, "rater", uint64(i+1), later, rl); contract.Partition(rec.Key, n) == 1 {
			break
		}
	}
	rec.Partition, rec.Timestamp = 0, later
	r.apply(parts, rec)
	if parts[1].tracker.Behind() || parts[0].tracker.Behind() {
		t.Fatal("a record of partition 0 applied on partition 1 left a partition behind")
	}
	notRated := 0
	for _, c := range r.out.batch.Mismatches {
		for _, m := range c {
			if m.Kind == contract.KindUsageNotRated && m.Status == contract.StatusOpen {
				notRated++
			}
		}
	}
	if notRated != waiting {
		t.Fatalf("%d usage_not_rated rows, want %d", notRated, waiting)
	}
}
