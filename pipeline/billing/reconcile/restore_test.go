package reconcile

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/driftline/driftline/pipeline/contract"
)

// stateSink writes through and keeps, at each write, the state of every
// partition of its reconciler (the member's lock is held while it
// writes): the state the committed offsets stand for once the write's
// commit follows.
type stateSink struct {
	sink  Sink
	r     *Reconciler
	dumps map[int32]string
}

func (s *stateSink) Write(ctx context.Context, b *Batch) error {
	if err := s.sink.Write(ctx, b); err != nil {
		return err
	}
	for p, part := range s.r.parts {
		s.dumps[p] = part.tracker.dump()
	}
	return nil
}

// TestRestoreEqualsTheLiveState runs the reconciler over the billing
// history until it has committed everything, then starts another member
// of the group, which restores the partitions by replaying them: every
// partition's state is the one the first member held, usage for usage,
// mismatch for mismatch, window for window.
func TestRestoreEqualsTheLiveState(t *testing.T) {
	f := newFixture(t)
	f.produceBillingHistory()
	run := func(s *stateSink) (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		r, err := New(ctx, f.options("billing-restore"), s)
		if err != nil {
			t.Fatal(err)
		}
		s.r = r
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		return func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("reconciler run: %v", err)
			}
		}
	}
	live := &stateSink{sink: NewClickHouse(f.ch), dumps: map[int32]string{}}
	stop := run(live)
	f.settled("billing-restore")
	stop()
	if len(live.dumps) != 3 {
		t.Fatalf("states of %d partitions written", len(live.dumps))
	}

	// One more usage, so that the restored member writes (and shows its
	// state); the partition it lands on is not compared.
	f.usage("restore-probe", "m-restore-probe", "gpu_hour", t0.Add(4*time.Hour))
	probe := contract.Partition([]byte("gpu-meter/m-restore-probe"), 3)

	restored := &stateSink{sink: NewClickHouse(f.ch), dumps: map[int32]string{}}
	stop = run(restored)
	f.settled("billing-restore")
	stop()
	for p, want := range live.dumps {
		if p == probe {
			continue
		}
		if n := strings.Count(want, "\nusage "); n < 50 {
			t.Fatalf("partition %d: %d usage states: the test compares too little", p, n)
		}
		got, ok := restored.dumps[p]
		if !ok {
			t.Fatalf("partition %d: no state written after the restore", p)
		}
		if got != want {
			t.Errorf("partition %d: restored state differs:\n%s", p, diff(strings.Split(want, "\n"), strings.Split(got, "\n")))
		}
	}
}
