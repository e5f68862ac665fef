package main

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func line(id, typ string, seq int, at time.Time, payload string) []byte {
	return fmt.Appendf(nil, `{"event_id":%q,"event_type":%q,"schema_version":1,"producer":"p","seq":%d,"occurred_at":%q,"environment":"local_parity","payload":%s}`,
		id, typ, seq, at.Format(time.RFC3339Nano), payload)
}

func TestNaiveClassifiesSimpleCases(t *testing.T) {
	n := newNaive(3, time.Hour)
	var got []string
	var sizes []int
	n.insert = func(_ context.Context, rows []row) error {
		sizes = append(sizes, len(rows))
		for _, r := range rows {
			got = append(got, r.eid+" "+r.status)
		}
		return nil
	}
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	rec := func(id, pid, state string) string {
		return fmt.Sprintf(`{"record_id":%q,"record_version":1,"provider":"app_runtime","provider_id":%q,"expected_state":%q,"expected_version":"v1","deleted":false}`, id, pid, state)
	}
	obs := func(pid, state string) string {
		return fmt.Sprintf(`{"provider":"app_runtime","provider_id":%q,"observed_state":%q,"observed_version":"v1","owner_ref":"rec-%s"}`, pid, state, pid)
	}
	recs := []*kgo.Record{
		// An observation before its record: judged when the record comes.
		{Partition: 0, Value: line("e1", "provider.observation", 1, t0, obs("a", "stopped"))},
		{Partition: 0, Value: line("e2", "platform.record", 1, t0.Add(-time.Minute), rec("rec-a", "a", "running"))},
		// The same event again: skipped.
		{Partition: 0, Value: line("e2", "platform.record", 1, t0.Add(-time.Minute), rec("rec-a", "a", "running"))},
		{Partition: 0, Value: line("e3", "platform.record", 2, t0.Add(-time.Minute), rec("rec-b", "b", "running"))},
		{Partition: 0, Value: line("e4", "platform.record", 3, t0.Add(-time.Minute), rec("rec-c", "c", "running"))},
		{Partition: 0, Value: line("e5", "provider.observation", 2, t0.Add(time.Second), obs("c", "running"))},
		// Seen live with no record.
		{Partition: 0, Value: line("e6", "provider.observation", 3, t0.Add(2*time.Second), obs("x", "running"))},
		// a agrees again: its stale finding resolves.
		{Partition: 0, Value: line("e7", "provider.observation", 4, t0.Add(3*time.Second), obs("a", "running"))},
		// The scan marker of partition 0: b was never observed, x is an orphan.
		{Partition: 0, Value: line("e8", "provider.scan_completed", 1, t0.Add(6*time.Minute), `{"provider":"app_runtime","scan_id":"s","scan_started_at":"2026-11-21T10:00:00Z"}`)},
		// Its copy on partition 1 covers only partition 1's identities.
		{Partition: 1, Value: line("e8", "provider.scan_completed", 1, t0.Add(6*time.Minute), `{"provider":"app_runtime","scan_id":"s","scan_started_at":"2026-11-21T10:00:00Z"}`)},
	}
	for _, r := range recs {
		if err := n.apply(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(sizes) != "[3]" {
		t.Fatalf("inserts of %v rows before the flush, want one full batch of 3", sizes)
	}
	if err := n.flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(sizes) != "[3 1]" {
		t.Fatalf("inserts of %v rows, want a batch of 3 and the rest at the flush", sizes)
	}
	sort.Strings(got)
	want := []string{
		"missing_provider_resource/app_runtime/b open",
		"orphan_provider_resource/app_runtime/x open",
		"stale_lifecycle_state/app_runtime/a open",
		"stale_lifecycle_state/app_runtime/a resolved",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("writes:\n%v\nwant:\n%v", got, want)
	}
}
