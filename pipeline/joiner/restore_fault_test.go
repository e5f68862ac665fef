package joiner

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/readmodel/sink"
)

// TestRestoreSurvivesBrokerErrors: the broker fails the restore's first
// requests for the group's committed offsets, as a broker restarting under
// a rebalance does (the fault test saw EOF). The member retries the
// restore and catches up, instead of leaving the group and ending Run
// with no error, as if it had been stopped.
func TestRestoreSurvivesBrokerErrors(t *testing.T) {
	c, names := testenv.KafkaCluster(t, 4)
	brokers := c.ListenAddrs()
	cl := testenv.KafkaClient(t, brokers)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, cfg := testenv.ClickHouseConn(t)
	f := &fixture{t: t, cl: cl, names: names, seq: map[string]uint64{}, brokers: brokers, ch: conn, db: cfg.Database}

	f.send(contract.TypePlatformRecord, "platform", t0, record("ok", "running"), -1)
	opts := f.options("restore-fault")
	opts.RebalanceTimeout = 20 * time.Second
	j, err := New(ctx, opts, sink.NewClickHouse(f.ch))
	if err != nil {
		t.Fatal(err)
	}
	// The first two requests for committed offsets fail, as they can
	// against a broker that is restarting: the first is the restore's.
	var failed atomic.Int32
	c.ControlKey(int16(kmsg.OffsetFetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		if failed.Add(1) > 2 {
			return nil, nil, false
		}
		c.KeepControl()
		req := kreq.(*kmsg.OffsetFetchRequest)
		resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
		resp.ErrorCode = kerr.UnknownServerError.Code
		for _, g := range req.Groups {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group = g.Group
			rg.ErrorCode = kerr.UnknownServerError.Code
			resp.Groups = append(resp.Groups, rg)
		}
		return resp, nil, true
	})
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- j.Run(runCtx) }()
	f.caughtUp("restore-fault")
	stop()
	if err := <-done; err != nil {
		t.Fatalf("joiner run: %v", err)
	}
	if failed.Load() < 3 {
		t.Fatalf("%d requests for committed offsets, want the 2 failed ones retried", failed.Load())
	}
}
