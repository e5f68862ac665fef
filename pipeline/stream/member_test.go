package stream_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/stream"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// counter is a Processor that counts the records of each partition: its
// state is the number of records below the committed offset, rebuilt by
// a restore's replay.
type counter struct {
	t       *testing.T
	m       *stream.Member
	topic   string
	counts  map[int32]int
	next    map[string]map[int32]kgo.EpochOffset // since the last flush
	failing bool                                 // every restore fails
	rejoin  bool                                 // the next flush with records says ErrRejoin
	// applied and restored count the records applied live and replayed
	// by restores; calls records the order of the calls that change
	// partitions.
	applied, restored int
	calls             []string
	stopped           int
}

func (c *counter) Apply(_ context.Context, fetches kgo.Fetches) (int, int64) {
	n := 0
	fetches.EachRecord(func(r *kgo.Record) {
		if _, ok := c.counts[r.Partition]; !ok {
			c.t.Errorf("record of partition %d, not owned", r.Partition)
		}
		c.counts[r.Partition]++
		c.applied++
		if c.next == nil {
			c.next = map[string]map[int32]kgo.EpochOffset{r.Topic: {}}
		}
		c.next[r.Topic][r.Partition] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
		n++
	})
	return n, 0
}

func (c *counter) Flush(ctx context.Context, _ stream.Round) error {
	if c.rejoin && c.next != nil {
		c.rejoin, c.next = false, nil
		return fmt.Errorf("end transaction: %w: unable to dial", stream.ErrRejoin)
	}
	_, err := c.m.WriteThenCommit(ctx, c.next, stream.Write{What: "write", Do: func(context.Context) error { return nil }})
	c.next = nil
	return err
}

func (c *counter) Settle() { c.calls = append(c.calls, "settle") }

func (c *counter) Restore(ctx context.Context, r *stream.Restore) error {
	c.calls = append(c.calls, fmt.Sprint("restore ", r.Partitions))
	if len(r.Partitions) == 0 {
		return nil
	}
	if c.failing {
		return errors.New("broken")
	}
	from, to := map[int32]kgo.Offset{}, map[int32]int64{}
	counts := map[int32]int{}
	for _, p := range r.Partitions {
		counts[p] = 0
		if at := r.Committed(c.topic, p); at > 0 {
			from[p], to[p] = kgo.NewOffset().AtStart(), at
		}
	}
	if len(to) > 0 {
		err := r.Replay(ctx, map[string]map[int32]kgo.Offset{c.topic: from}, map[string]map[int32]int64{c.topic: to},
			func(_ string, p int32, recs []*kgo.Record, _ int64) { counts[p] += len(recs) }, nil)
		if err != nil {
			return err
		}
	}
	for p, n := range counts {
		c.counts[p] = n
		c.restored += n
	}
	return nil
}

func (c *counter) Release(ps []int32, lost bool) {
	c.calls = append(c.calls, fmt.Sprint("release ", ps, lost))
	for _, p := range ps {
		delete(c.counts, p)
	}
}

func (c *counter) Stop() { c.stopped++ }

// start joins a member running c over topic and returns a function that
// stops it, and Run's error.
func start(t *testing.T, brokers []string, topic string, c *counter, rebalance time.Duration) (stop func(), done <-chan error) {
	t.Helper()
	return startWith(t, brokers, topic, c, stream.Options{RebalanceTimeout: rebalance})
}

// startWith is start with the options of o set beside the test's.
func startWith(t *testing.T, brokers []string, topic string, c *counter, o stream.Options) (stop func(), done <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	o.Name, o.Brokers, o.Group, o.Topics, o.Logger = "test", brokers, "member-test", []string{topic}, slog.New(slog.DiscardHandler)
	m, err := stream.NewMember(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	c.m, c.t, c.topic, c.counts = m, t, topic, map[int32]int{}
	if err := m.Join(ctx, c); err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- m.Run(ctx) }()
	return cancel, ran
}

// producedUsage starts a broker whose topics have two partitions, writes
// n records to its usage topic and returns it with a client of it.
func producedUsage(t *testing.T, n int) ([]string, contract.Topics, *kgo.Client) {
	t.Helper()
	brokers, names := testenv.Kafka(t, 2)
	cl := testenv.KafkaClient(t, brokers)
	produce(t, cl, names.Usage, n)
	return brokers, names, cl
}

func produce(t *testing.T, cl *kgo.Client, topic string, n int) {
	t.Helper()
	for i := range n {
		r := &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", i), Value: []byte("v")}
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// committed waits until the group has committed want records of topic.
func committed(t *testing.T, cl *kgo.Client, topic string, want int64) {
	t.Helper()
	testenv.CheckFor(t, 30*time.Second, func() error {
		offsets, err := kadm.NewClient(cl).FetchOffsets(context.Background(), "member-test")
		if err != nil {
			return err
		}
		var n int64
		offsets.Each(func(o kadm.OffsetResponse) {
			if o.Topic == topic {
				n += o.At
			}
		})
		if n != want {
			return fmt.Errorf("%d records committed, want %d", n, want)
		}
		return nil
	})
}

// runUntilCommitted runs a member with c over topic until the group has
// committed want records of it, stops it and returns Run's error.
func runUntilCommitted(t *testing.T, brokers []string, cl *kgo.Client, topic string, c *counter, want int64) error {
	t.Helper()
	stop, done := start(t, brokers, topic, c, 0)
	committed(t, cl, topic, want)
	stop()
	return <-done
}

// TestMemberRestoresTheCommittedState: a member commits what it applied;
// its successor restores exactly that by replaying up to the committed
// offsets, then applies the rest; each group callback settles first, and
// Stop is called once.
func TestMemberRestoresTheCommittedState(t *testing.T) {
	brokers, names, cl := producedUsage(t, 100)
	first := &counter{}
	if err := runUntilCommitted(t, brokers, cl, names.Usage, first, 100); err != nil {
		t.Fatalf("first run: %v", err)
	}
	if first.restored != 0 || first.applied != 100 || first.stopped != 1 {
		t.Fatalf("first member restored %d, applied %d, stopped %d times; want 0, 100, once", first.restored, first.applied, first.stopped)
	}

	produce(t, cl, names.Usage, 50)
	second := &counter{}
	if err := runUntilCommitted(t, brokers, cl, names.Usage, second, 150); err != nil {
		t.Fatalf("second run: %v", err)
	}
	if second.restored != 100 || second.applied != 50 {
		t.Fatalf("second member restored %d, applied %d; want 100, 50", second.restored, second.applied)
	}
	// Leaving the group revokes everything: the partitions are released.
	want := "settle,restore [0 1],settle,release [0 1] false"
	if got := strings.Join(second.calls, ","); got != want {
		t.Fatalf("calls %s, want %s", got, want)
	}
}

// TestMemberLeavesWhenRestoreFails: a member whose restore keeps failing
// retries it within the rebalance timeout, then leaves the group, and Run
// says why.
func TestMemberLeavesWhenRestoreFails(t *testing.T) {
	brokers, names := testenv.Kafka(t, 2)
	c := &counter{failing: true}
	began := time.Now()
	stop, done := start(t, brokers, names.Usage, c, 2*time.Second)
	defer stop()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the member did not leave the group")
	}
	if want := "test: left the group: partitions [0 1] not restored: "; err == nil || !strings.HasPrefix(err.Error(), want) || !strings.HasSuffix(err.Error(), "broken") {
		t.Fatalf("Run = %v, want %q and the restore's error", err, want)
	}
	if d := time.Since(began); d < 2*time.Second {
		t.Fatalf("left after %v, before the rebalance timeout", d)
	}
	if c.stopped != 1 {
		t.Fatalf("Stop called %d times, want once", c.stopped)
	}
}

// TestMemberRejoins: a flush that says ErrRejoin (a transaction whose end
// did not reach the broker) makes the member start over as a restarted
// process would: its partitions are released, the group joined again with
// a new client, the partitions restored from what was committed (nothing
// of the failed round), and Run goes on.
func TestMemberRejoins(t *testing.T) {
	brokers, names, cl := producedUsage(t, 100)
	c := &counter{rejoin: true}
	if err := runUntilCommitted(t, brokers, cl, names.Usage, c, 100); err != nil {
		t.Fatalf("Run = %v, want nil after rejoining", err)
	}
	if c.rejoin {
		t.Fatal("no flush said ErrRejoin")
	}
	if n := c.counts[0] + c.counts[1]; n != 0 || c.applied <= 100 || c.stopped != 1 {
		// The member left the group at the stop: counts were released.
		t.Fatalf("counts %v, applied %d (the failed round's records again), stopped %d times", c.counts, c.applied, c.stopped)
	}
	calls := strings.Join(c.calls, ",")
	if want := "settle,restore [0 1],settle,release [0 1] false,settle,restore [0 1],settle,release [0 1] false"; calls != want {
		t.Fatalf("calls %s, want %s", calls, want)
	}
}

// TestMemberSettlesBeforeRestoring: two members with a settle time start
// together, as on a deploy. The first is given both partitions before
// the second joins; it restores neither (nor applies a record of them)
// until the group has settled, so that each partition is restored once,
// by the member that keeps it, with the committed state.
func TestMemberSettlesBeforeRestoring(t *testing.T) {
	brokers, names, cl := producedUsage(t, 100)
	if err := runUntilCommitted(t, brokers, cl, names.Usage, &counter{}, 100); err != nil {
		t.Fatalf("first run: %v", err)
	}

	produce(t, cl, names.Usage, 50)
	const settle = 2 * time.Second // B joins well within it, even on a loaded machine
	a, b := &counter{}, &counter{}
	began := time.Now()
	stopA, doneA := startWith(t, brokers, names.Usage, a, stream.Options{SettleTime: settle})
	stopB, doneB := startWith(t, brokers, names.Usage, b, stream.Options{SettleTime: settle})
	committed(t, cl, names.Usage, 150)
	took := time.Since(began)
	stopA()
	stopB()
	if err := <-doneA; err != nil {
		t.Fatalf("member a: %v", err)
	}
	if err := <-doneB; err != nil {
		t.Fatalf("member b: %v", err)
	}
	if took < settle {
		t.Fatalf("committed everything %v after the start, before the settle time %v", took, settle)
	}
	for name, c := range map[string]*counter{"a": a, "b": b} {
		var restores []string
		for _, call := range c.calls {
			if strings.HasPrefix(call, "restore [") && call != "restore []" {
				restores = append(restores, call)
			}
			if strings.HasPrefix(call, "release [") && !strings.HasSuffix(call, "false") {
				t.Errorf("member %s: %s: a partition lost", name, call)
			}
		}
		if len(restores) != 1 || strings.Count(restores[0], " ") != 1 {
			t.Errorf("member %s restored %v (calls %v), want one partition once", name, restores, c.calls)
		}
	}
	if a.restored+b.restored != 100 || a.applied+b.applied != 50 {
		t.Fatalf("restored %d+%d, applied %d+%d; want 100 restored, 50 applied", a.restored, b.restored, a.applied, b.applied)
	}
}

// TestMemberSettlesAlone: a lone member with a settle time restores its
// assignment once the settle time has passed, then applies everything.
func TestMemberSettlesAlone(t *testing.T) {
	brokers, names, cl := producedUsage(t, 100)
	c := &counter{}
	began := time.Now()
	stop, done := startWith(t, brokers, names.Usage, c, stream.Options{SettleTime: 500 * time.Millisecond})
	committed(t, cl, names.Usage, 100)
	took := time.Since(began)
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	if took < 500*time.Millisecond || c.applied != 100 {
		t.Fatalf("applied %d, all committed after %v; want 100, after the settle time", c.applied, took)
	}
	if want := "settle,restore [0 1],settle,release [0 1] false"; strings.Join(c.calls, ",") != want {
		t.Fatalf("calls %v, want %s", c.calls, want)
	}
}
