package stream

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/stream/logmerge"
	"github.com/driftline/driftline/pipeline/stream/retry"
	"github.com/driftline/driftline/pipeline/stream/topics"
)

// Member is one member of a consumer group, running a Processor over the
// partitions the group gives it (see the package documentation).
type Member struct {
	opts       Options
	adm        *kadm.Client
	cl         *kgo.Client               // the group consumer (the session's client)
	sess       *kgo.GroupTransactSession // nil without Options.TransactionalID
	partitions int32

	// mu serialises the processor's calls: the poll loop holds it while
	// it applies and flushes, the group callbacks while they restore or
	// release partitions. It protects p's state, owned and left.
	mu sync.Mutex
	p  Processor
	// owned are the partitions restored and not released since.
	owned map[int32]bool
	// pending are the partitions assigned and not restored yet, their
	// fetching paused: they wait for the group to settle
	// (Options.SettleTime). Ascending.
	pending []int32
	// rebalanced is when a group callback last changed the member's
	// partitions; described when restorePending last asked the broker
	// whether the group is stable.
	rebalanced, described time.Time
	// left is why the member left the group on its own (a restore that
	// kept failing); Run returns it.
	left error
	// backlog is the processor's backlog as of the last round (the poll
	// loop's own).
	backlog int64
}

// NewMember connects to the brokers and checks the topics. The member
// joins the group with Join.
func NewMember(ctx context.Context, opts Options) (*Member, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	m := &Member{opts: opts, owned: map[int32]bool{}}
	admCl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(opts.Brokers...)}, opts.ClientOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("%s: admin client: %w", opts.Name, err)
	}
	m.adm = kadm.NewClient(admCl)
	if err := topics.CheckCopartitioned(ctx, m.adm, opts.Names); err != nil {
		m.adm.Close()
		return nil, fmt.Errorf("%s: %w", opts.Name, err)
	}
	if m.partitions, err = topics.PartitionCount(ctx, m.adm, opts.Topics[0]); err != nil {
		m.adm.Close()
		return nil, fmt.Errorf("%s: %w", opts.Name, err)
	}
	return m, nil
}

// Partitions returns the partition count of the consumed topics.
func (m *Member) Partitions() int32 { return m.partitions }

// Join creates the group consumer, which joins the group: from then on
// the group's callbacks may call p, before Run too. A transactional
// member first initialises its transactional id, which fences and aborts
// the open transaction of a crashed predecessor. When Join fails the
// member is closed.
func (m *Member) Join(ctx context.Context, p Processor) error {
	if m.p != nil {
		panic("BUG: stream: Member.Join called twice")
	}
	m.p = p
	if err := m.join(ctx); err != nil {
		m.adm.Close()
		return fmt.Errorf("%s: %w", m.opts.Name, err)
	}
	return nil
}

// join creates the group consumer (and a transactional member's session)
// and sets m.cl and m.sess.
func (m *Member) join(ctx context.Context) error {
	o := m.opts
	copts := []kgo.Opt{
		kgo.SeedBrokers(o.Brokers...),
		kgo.ConsumerGroup(o.Group),
		kgo.ConsumeTopics(o.Topics...),
		kgo.Balancers(o.Balancer),
		kgo.SessionTimeout(o.SessionTimeout),
		kgo.RebalanceTimeout(o.RebalanceTimeout),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxBytes(FetchMaxBytes),
		kgo.FetchMaxWait(logmerge.FetchMaxWait),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(m.assigned),
		kgo.OnPartitionsRevoked(m.revoked),
		kgo.OnPartitionsLost(m.lost),
	}
	if o.KeepControlRecords {
		copts = append(copts, kgo.KeepControlRecords())
	}
	if o.InstanceID != "" {
		copts = append(copts, kgo.InstanceID(o.InstanceID))
	}
	if o.SettleTime > 0 {
		// A heartbeat is how a member learns that another joined: often
		// enough that a join within the settle time stops the restore.
		copts = append(copts, kgo.HeartbeatInterval(min(max(o.SettleTime/2, 100*time.Millisecond), 3*time.Second)))
	}
	copts = append(append(copts, o.ConsumerOpts...), o.ClientOpts...)
	if o.TransactionalID == "" {
		cl, err := kgo.NewClient(copts...)
		if err != nil {
			return fmt.Errorf("consumer: %w", err)
		}
		m.cl = cl
		return nil
	}
	copts = append(copts, kgo.TransactionalID(o.TransactionalID), kgo.TransactionTimeout(o.TransactionTimeout))
	sess, err := kgo.NewGroupTransactSession(copts...)
	if err != nil {
		return fmt.Errorf("transact session: %w", err)
	}
	if _, _, err := sess.Client().ProducerID(ctx); err != nil {
		sess.Close()
		return fmt.Errorf("init transactional id %q: %w", o.TransactionalID, err)
	}
	m.sess, m.cl = sess, sess.Client()
	return nil
}

// ErrRejoin, wrapped in the error of a Flush, says that the member must
// start over as a restarted process would: a transaction whose end did
// not reach the broker (one restarting, say) has an unknown outcome, and
// the session cannot begin another. Run then leaves the group, releasing
// every partition, and joins again with a new client: a new session
// fences the old one (its open transaction is aborted), and the
// partitions are restored from what was committed.
var ErrRejoin = errors.New("the member must leave the group and join again")

// rejoin leaves the group and joins it again (ErrRejoin), trying until
// it succeeds or ctx ends.
func (m *Member) rejoin(ctx context.Context, why error) error {
	m.opts.Logger.Warn("leaving the group and joining again with a new client, as a restarted process would",
		"group", m.opts.Group, "err", why)
	m.cl.CloseAllowingRebalance() // the group's callbacks release what they can
	m.mu.Lock()
	m.pending = nil // the new client fetches nothing paused
	if len(m.owned) > 0 {
		ps := slices.Sorted(maps.Keys(m.owned))
		clear(m.owned)
		m.p.Release(ps, true)
	}
	m.mu.Unlock()
	err := retry.Do(ctx.Done(), retry.Writes, func() error { return m.join(ctx) }, func(err error, wait time.Duration) {
		m.opts.Logger.Warn("joining the group again failed; retrying", "group", m.opts.Group, "err", err, "backoff", wait)
	})
	if err != nil {
		return fmt.Errorf("%s: join the group again: %w", m.opts.Name, err)
	}
	return nil
}

// Client returns the group consumer, for what a processor does with it
// in Apply and Flush: pause and resume fetching, produce.
func (m *Member) Client() *kgo.Client { return m.cl }

// Session returns the transact session of a transactional member (nil
// otherwise): Flush begins and ends its transactions.
func (m *Member) Session() *kgo.GroupTransactSession { return m.sess }

// Run consumes in rounds until ctx is done or the client is closed (see
// the package documentation). When ctx ends, the last round is flushed
// (Round.Final) before Run returns. It returns the error of a Flush, or
// why the member left the group on its own; nil when ctx ended.
func (m *Member) Run(ctx context.Context) error {
	if m.cl == nil {
		panic("BUG: stream: Member.Run before Join")
	}
	defer m.adm.Close()
	// A member that leaves on its own (go cl.Close in assigned) ends its
	// last poll without AllowRebalance, and leaving waits for one.
	defer func() { m.cl.CloseAllowingRebalance() }() // the client of the last join
	defer func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.p.Stop()
	}()
	for ctx.Err() == nil {
		catchUp, closed := m.round(ctx)
		if closed {
			m.mu.Lock()
			defer m.mu.Unlock()
			return m.left
		}
		m.mu.Lock()
		err := m.p.Flush(ctx, Round{CatchUp: catchUp, Behind: m.backlog > 0, Final: ctx.Err() != nil})
		m.mu.Unlock()
		m.cl.AllowRebalance()
		if errors.Is(err, ErrRejoin) && ctx.Err() == nil {
			err = m.rejoin(ctx, err)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// round polls and applies one round's records. closed reports that the
// client was closed (the last poll is not applied).
func (m *Member) round(ctx context.Context) (catchUp, closed bool) {
	apply := func(fetches kgo.Fetches) (int, int64) {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.restorePending(ctx)
		fetches.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				m.opts.Logger.Warn("fetch error", "topic", t, "partition", p, "err", err)
			}
		})
		return m.p.Apply(ctx, fetches)
	}
	if m.opts.Rounds.Interval > 0 {
		var backlog int64
		catchUp, backlog, closed = m.opts.Rounds.Round(ctx, m.cl, m.backlog, apply)
		if !closed {
			m.backlog = backlog
		}
		return catchUp, closed
	}
	pctx := ctx
	if m.opts.SettleTime > 0 {
		// A poll of paused partitions only (pending ones, assigned maybe
		// while it waits) would wait for ctx: come back to see whether
		// the group has settled.
		var cancel context.CancelFunc
		pctx, cancel = context.WithTimeout(ctx, max(m.opts.SettleTime/2, 10*time.Millisecond))
		defer cancel()
	}
	fetches := m.cl.PollRecords(pctx, m.opts.PollRecords)
	if fetches.IsClientClosed() {
		return false, true
	}
	apply(fetches)
	return false, false
}

// A Write is one of the writes of a batch (WriteThenCommit).
type Write struct {
	// What names it in logs and errors ("write findings to ClickHouse").
	What string
	// Do writes; it is called again until it succeeds, so it must be
	// idempotent.
	Do func(ctx context.Context) error
}

// WriteThenCommit runs writes in order, each retried with backoff until
// it succeeds (retry.Until), and then commits offsets through the group
// session, synchronously. Once ctx is done the writes get
// retry.ShutdownGrace more; a write that gives up ends it with an error
// and nothing committed. committed is false when the commit failed too,
// which is logged and not an error: the batch is replayed, idempotently.
// It runs without the member's lock (a processor may call it in the
// background).
func (m *Member) WriteThenCommit(ctx context.Context, offsets map[string]map[int32]kgo.EpochOffset, writes ...Write) (committed bool, err error) {
	wctx, giveUp, cancel := retry.FlushContext(ctx)
	defer cancel()
	for _, w := range writes {
		if err := retry.Until(giveUp, m.opts.Logger, w.What, func() error { return w.Do(wctx) }); err != nil {
			return false, err
		}
	}
	if len(offsets) == 0 {
		return true, nil
	}
	if err := logmerge.Commit(wctx, m.cl, offsets); err != nil {
		m.opts.Logger.Warn("offset commit failed; the batch will be replayed idempotently", "group", m.opts.Group, "err", err)
		return false, nil
	}
	return true, nil
}

// assigned restores the partitions new to the member, or with
// Options.SettleTime pauses them until the group has settled
// (restorePending).
func (m *Member) assigned(ctx context.Context, cl *kgo.Client, assigned map[string][]int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	fresh := partitions(assigned, func(p int32) bool { return !m.owned[p] && !slices.Contains(m.pending, p) })
	if m.opts.SettleTime > 0 && len(fresh) > 0 {
		// Paused before the callback returns: no poll hands over a
		// record of them before they are restored.
		cl.PauseFetchPartitions(m.topicPartitions(fresh))
		m.pending = slices.Sorted(slices.Values(append(m.pending, fresh...)))
		m.rebalanced = time.Now()
		m.opts.Logger.Info("partitions assigned; restoring them once the group has settled", "group", m.opts.Group,
			"partitions", fresh, "settle", m.opts.SettleTime)
		return
	}
	m.rebalanced = time.Now()
	m.p.Settle()
	if len(fresh) == 0 {
		r := &Restore{Began: time.Now(), m: m}
		if err := m.p.Restore(ctx, r); err != nil {
			panic("BUG: stream: a restore of no partitions failed: " + err.Error())
		}
		return
	}
	if err := m.restoreFresh(ctx, fresh, time.Now()); err != nil {
		m.leave(cl, fresh, err)
	}
}

// restoreFresh restores fresh, partitions new to the member assigned at
// assignedAt, retrying within the rebalance timeout, and owns them. The
// lock is held and the group cannot rebalance.
func (m *Member) restoreFresh(ctx context.Context, fresh []int32, assignedAt time.Time) error {
	r := &Restore{Partitions: fresh, Began: time.Now(), m: m}
	err := retry.Restore(ctx, m.opts.RebalanceTimeout, m.opts.Logger, "restore partitions", func() error {
		return m.restore(ctx, r)
	})
	if err != nil {
		return err
	}
	for _, p := range fresh {
		m.owned[p] = true
	}
	m.opts.Logger.Info("partitions assigned", "group", m.opts.Group, "partitions", fresh,
		"settle", r.Began.Sub(assignedAt).Round(time.Millisecond), "restore", time.Since(r.Began).Round(time.Millisecond))
	return nil
}

// leave makes the member leave the group because fresh could not be
// restored: without their state the processor would write wrong rows,
// so it leaves loudly rather than guess, and Run returns why.
func (m *Member) leave(cl *kgo.Client, fresh []int32, err error) {
	m.opts.Logger.Error("restore failed; leaving the group", "group", m.opts.Group, "partitions", fresh, "err", err)
	m.left = fmt.Errorf("%s: left the group: partitions %v not restored: %w", m.opts.Name, fresh, err)
	go cl.Close()
}

// restorePending restores the partitions waiting for the group to settle
// once it has: no rebalance changed the member's partitions for
// Options.SettleTime, and the broker reports the group stable (a member
// that joined meanwhile makes it rebalance, which the member's next
// heartbeat learns). The lock is held and the group cannot rebalance: a
// poll's records are being applied.
func (m *Member) restorePending(ctx context.Context) {
	if len(m.pending) == 0 || ctx.Err() != nil || time.Since(m.rebalanced) < m.opts.SettleTime ||
		time.Since(m.described) < m.opts.SettleTime/4 {
		return
	}
	if m.described = time.Now(); !m.groupStable(ctx) {
		return
	}
	fresh := m.pending
	m.pending = nil
	m.p.Settle()
	switch err := m.restoreFresh(ctx, fresh, m.rebalanced); {
	case err == nil:
		m.cl.ResumeFetchPartitions(m.topicPartitions(fresh))
	case ctx.Err() != nil:
		// Stopping: the partitions stay paused and are never applied.
	default:
		m.leave(m.cl, fresh, err)
	}
}

// groupStable reports whether the broker has the group stable: no
// rebalance under way. When the broker does not answer it reports true:
// waiting on an unanswered question would stall the partitions, and the
// restore goes on as without Options.SettleTime.
func (m *Member) groupStable(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	gs, err := m.adm.DescribeGroups(ctx, m.opts.Group)
	if err == nil {
		err = gs.Error()
	}
	if err != nil {
		m.opts.Logger.Warn("describe the group before restoring; restoring without waiting for it to settle", "group", m.opts.Group, "err", err)
		return true
	}
	return gs[m.opts.Group].State == groupStable
}

// groupStable is the state of a group that is not rebalancing (Kafka's
// DescribeGroups).
const groupStable = "Stable"

// topicPartitions names ps in every consumed topic.
func (m *Member) topicPartitions(ps []int32) map[string][]int32 {
	tps := make(map[string][]int32, len(m.opts.Topics))
	for _, t := range m.opts.Topics {
		tps[t] = slices.Clone(ps)
	}
	return tps
}

// revoked releases revoked partitions.
func (m *Member) revoked(_ context.Context, cl *kgo.Client, revoked map[string][]int32) {
	m.release(cl, revoked, false)
}

// lost releases partitions the group gave away without a clean revoke.
func (m *Member) lost(_ context.Context, cl *kgo.Client, lost map[string][]int32) {
	m.release(cl, lost, true)
}

func (m *Member) release(cl *kgo.Client, gone map[string][]int32, lost bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rebalanced = time.Now()
	if len(m.pending) > 0 {
		// Never restored: nothing of them to release.
		all := partitions(gone, func(int32) bool { return true })
		m.pending = slices.DeleteFunc(m.pending, func(p int32) bool { return slices.Contains(all, p) })
	}
	m.p.Settle()
	if ps := partitions(gone, func(p int32) bool { return m.owned[p] }); len(ps) > 0 {
		for _, p := range ps {
			delete(m.owned, p)
		}
		m.p.Release(ps, lost)
	}
	// A client keeps paused partitions paused across rebalances, and the
	// merges that paused these (logmerge.Throttle) are gone.
	cl.ResumeFetchPartitions(gone)
}

// partitions returns the partition numbers of tps that keep accepts,
// each once, in order: the topics are co-partitioned, so a number names
// one partition of each.
func partitions(tps map[string][]int32, keep func(int32) bool) []int32 {
	var out []int32
	for _, ps := range tps {
		for _, p := range ps {
			if keep(p) && !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	slices.Sort(out)
	return out
}
