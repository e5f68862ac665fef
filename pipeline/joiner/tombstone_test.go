package joiner

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/stream"
	"github.com/driftline/driftline/pipeline/stream/streamtest"
)

// The tests here apply records to one partition of an in-memory joiner
// (benchJoiner), no broker.

// eventAt returns the record of a valid event that occurred at at and
// reached the broker at ts.
func eventAt(t *testing.T, typ, producer string, seq uint64, at, ts time.Time, payload any) *kgo.Record {
	t.Helper()
	r := streamtest.Event(t, contract.DefaultTopics(), typ, producer, seq, at, payload)
	r.Timestamp = ts
	return r
}

// tombstoneAt returns a tombstone of key on platform.records at ts.
func tombstoneAt(key string, ts time.Time) *kgo.Record {
	return &kgo.Record{Topic: contract.DefaultTopics().PlatformRecords, Key: []byte(key), Timestamp: ts}
}

// rejectedReasons returns the reasons of the partition's quarantined
// records.
func rejectedReasons(part *partition) []contract.Reason {
	var out []contract.Reason
	for _, r := range part.rejected {
		out = append(out, r.verr.Reason)
	}
	return out
}

// TestTombstoneMovesLateCutOff: a tombstone that moves the watermark
// moves the late-event cut-off with it, as an event does: an event older
// than the watermark less the dedupe horizon is then late_event.
func TestTombstoneMovesLateCutOff(t *testing.T) {
	for name, mover := range map[string]*kgo.Record{
		"an observation": eventAt(t, contract.TypeProviderObservation, "other", 1, t0.Add(48*time.Hour), t0.Add(48*time.Hour+time.Second), observation("b", "running")),
		"a tombstone":    tombstoneAt("app_runtime/zzz", t0.Add(48*time.Hour)),
	} {
		j, part := benchJoiner(t)
		j.apply(part, eventAt(t, contract.TypePlatformRecord, "platform", 1, t0, t0.Add(time.Second), record("a", "running")))
		j.apply(part, mover)
		j.apply(part, eventAt(t, contract.TypeProviderObservation, "scanner", 1, t0.Add(time.Hour), t0.Add(48*time.Hour+2*time.Second), observation("a", "running")))
		if got := rejectedReasons(part); len(got) != 1 || got[0] != contract.ReasonLate {
			t.Errorf("%s moved the watermark to %s; an event of %s was rejected for %v, want [late_event]",
				name, part.engine.Watermark(), t0.Add(time.Hour), got)
		}
	}
}

// TestTombstonePassesRequestDeadline: a tombstone that moves the
// watermark past a pending request's deadline sends it to
// operator_review, as an event does, before a later observation would
// resolve the finding.
func TestTombstonePassesRequestDeadline(t *testing.T) {
	const evidence = "stale_lifecycle_state:app_runtime/a"
	for name, mover := range map[string]*kgo.Record{
		"an observation": eventAt(t, contract.TypeProviderObservation, "other", 1, t0.Add(20*time.Minute), t0.Add(20*time.Minute+time.Second), observation("b", "stopped")),
		"a tombstone":    tombstoneAt("app_runtime/zzz", t0.Add(20*time.Minute)),
	} {
		j, part := benchJoiner(t)
		j.apply(part, eventAt(t, contract.TypePlatformRecord, "platform", 1, t0, t0.Add(time.Second), record("a", "running")))
		j.apply(part, eventAt(t, contract.TypeProviderObservation, "scanner", 1, t0.Add(time.Minute), t0.Add(time.Minute+time.Second), observation("a", "stopped")))
		cmd := contract.Command{CommandID: "cmd-1", EvidenceID: evidence, Provider: contract.ProviderAppRuntime, ProviderID: "a",
			Action: string(contract.ActionRetry), Reason: "try again", ActorID: "HUMAN::op"}
		j.apply(part, eventAt(t, contract.TypeCommand, "query", 1, t0.Add(2*time.Minute), t0.Add(2*time.Minute+time.Second), cmd))
		if fa := part.acts.findings[evidence]; fa == nil || fa.state != contract.ActionPending {
			t.Fatalf("%s: the retry was not applied: %+v", name, fa)
		}
		j.apply(part, mover) // the watermark to t0+19m30s, past the deadline
		j.apply(part, eventAt(t, contract.TypeProviderObservation, "scanner", 2, t0.Add(21*time.Minute), t0.Add(21*time.Minute+time.Second), observation("a", "running")))
		if got := part.acts.findings[evidence].state; got != contract.ActionOperatorReview {
			t.Errorf("%s moved the watermark past the request's deadline; then its finding resolved with the request %q, want operator_review", name, got)
		}
	}
}

// TestNullValueQuarantined: a null value that is no tombstone of a
// record's identity is quarantined, not dropped.
func TestNullValueQuarantined(t *testing.T) {
	j, part := benchJoiner(t)
	names := contract.DefaultTopics()
	j.apply(part, &kgo.Record{Topic: names.Observations, Key: []byte("app_runtime/a"), Timestamp: t0})
	j.apply(part, &kgo.Record{Topic: names.PlatformRecords, Timestamp: t0})
	j.apply(part, tombstoneAt("app_runtime/a", t0)) // a tombstone: applied
	if got := rejectedReasons(part); len(got) != 2 || got[0] != contract.ReasonBadJSON || got[1] != contract.ReasonBadJSON {
		t.Fatalf("two null values without a meaning quarantined for %v, want bad_json twice", got)
	}
	if part.events != 1 {
		t.Fatalf("%d events applied, want the tombstone's", part.events)
	}
}

// TestKeylessRecordRerouted: a record without a key, or keyed as another
// identity, on a partition its payload's identity does not hash to is
// moved to that identity's partition, keyed by its identity, as a record
// with a wrong key is; one keyed as another identity that hashes here
// while its payload's identity does too is applied here.
func TestKeylessRecordRerouted(t *testing.T) {
	const n = 4
	home := contract.Partition([]byte("app_runtime/a"), n)
	for name, key := range map[string][]byte{"no key": nil, "another identity's key": []byte("app_runtime/elsewhere")} {
		j, _ := benchJoiner(t)
		j.partitions = n
		cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		j.opts.Reroute = cl
		for _, p := range []int32{home, (home + 1) % n} {
			part := j.newPartition(p, nil)
			part.out = &part.live
			r := eventAt(t, contract.TypeProviderObservation, "scanner", 1, t0, t0.Add(time.Second), observation("a", "running"))
			r.Key, r.Partition = key, p
			j.apply(part, r)
			switch moved := len(part.rerouted) == 1; {
			case p == home && (moved || part.events != 1):
				t.Errorf("%s, on its identity's partition: moved %v, %d events applied, want applied", name, moved, part.events)
			case p != home && (!moved || part.events != 0 || string(part.rerouted[0].Key) != "app_runtime/a"):
				t.Errorf("%s, on partition %d of an identity of %d: moved %v, %d events applied, want moved keyed app_runtime/a", name, p, home, moved, part.events)
			}
		}
	}
}

// TestQuietPartitionProgress: a partition nothing changed writes its
// progress row again once progressRefresh has passed since its last, so
// retention never takes an owned partition for one that went away.
func TestQuietPartitionProgress(t *testing.T) {
	j, part := benchJoiner(t)
	j.parts[0] = part
	j.apply(part, eventAt(t, contract.TypePlatformRecord, "platform", 1, t0, t0.Add(time.Second), record("a", "running")))
	rows := func() int {
		b := j.seal(stream.Round{})
		defer func() { j.freeParts = b.reset(j.freeParts) }()
		n := 0
		for _, out := range b.parts {
			n += len(out.Progress)
		}
		return n
	}
	if n := rows(); n != 1 {
		t.Fatalf("the seal after an event wrote %d progress rows, want 1", n)
	}
	if n := rows(); n != 0 {
		t.Fatalf("a seal with nothing changed, right after, wrote %d progress rows, want 0", n)
	}
	part.progressAt = part.progressAt.Add(-progressRefresh)
	if n := rows(); n != 1 {
		t.Fatalf("a seal with nothing changed, %s after the last row, wrote %d progress rows, want 1", progressRefresh, n)
	}
}
