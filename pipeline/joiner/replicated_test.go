package joiner

import (
	"testing"

	"github.com/driftline/driftline/internal/testenv"
)

// TestAcrossBrokerLoss runs the restart scenario on three brokers whose
// topics have replication 3 and min.insync.replicas 2, and stops one
// broker after each of the first two rounds while the joiner runs: the
// group's coordinator once the joiner committed the first round, then
// the leader of an observations partition while the second is applied.
// The findings are exactly those of one broker.
func TestAcrossBrokerLoss(t *testing.T) {
	c, names := testenv.KafkaReplicated(t, 4, 3)
	brokers := c.ListenAddrs()
	conn, cfg := testenv.ClickHouseConn(t)
	f := &fixture{t: t, cl: testenv.KafkaClient(t, brokers), names: names, seq: map[string]uint64{},
		brokers: brokers, ch: conn, db: cfg.Database}
	sc := scenario{f}
	const group = "joiner-brokers"
	sc.records()
	stop := f.start(group)
	defer func() { stop() }()
	sc.round(0)
	f.caughtUp(group) // offsets committed with the coordinator about to go
	node := c.CoordinatorFor(group)
	if err := c.RemoveNode(node); err != nil {
		t.Fatal(err)
	}
	t.Logf("stopped broker %d, the group's coordinator", node)
	sc.round(1)
	node = c.LeaderFor(names.Observations, 0)
	if err := c.RemoveNode(node); err != nil {
		t.Fatal(err)
	}
	t.Logf("stopped broker %d, the leader of %s[0]", node, names.Observations)
	sc.round(2)
	f.caughtUp(group)
	f.wantFindings(scenarioWant)
}
