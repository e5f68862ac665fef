package stack

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/stream/topics"
)

// startBroker runs bin/broker with its data under Dir/broker and waits until
// it answers and the contract topics exist.
func (s *Stack) startBroker(ctx context.Context) error {
	path, err := s.binary(NameBroker)
	if err != nil {
		return err
	}
	args := []string{
		"-broker.addr=" + s.opts.BrokerAddr,
		"-broker.dataDir=" + filepath.Join(s.opts.Dir, NameBroker),
		"-kafka.partitions=" + strconv.Itoa(s.opts.Partitions),
	}
	if s.opts.BrokerSync {
		args = append(args, "-broker.sync")
	}
	s.logf("starting broker on %s, data in %s", s.opts.BrokerAddr, filepath.Join(s.opts.Dir, NameBroker))
	p, err := s.spawn(procSpec{name: NameBroker, path: path, args: args, env: s.childEnv(), log: s.logPath(NameBroker)})
	if err != nil {
		return err
	}
	return s.waitBroker(ctx, p)
}

// waitBroker polls the broker until the contract topics are listed with
// matching partition counts, failing early if p (when not nil) exits. An
// external broker (p nil) gets the topics created, as the services would.
func (s *Stack) waitBroker(ctx context.Context, p *process) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.opts.BrokerAddr), kgo.RetryTimeout(time.Second))
	if err != nil {
		return fmt.Errorf("broker client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	names := contract.DefaultTopics()
	ctx, cancel := context.WithTimeout(ctx, s.opts.StartTimeout)
	defer cancel()
	for {
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		if p == nil {
			err = topics.Ensure(rctx, adm, names, int32(s.opts.Partitions), 1)
		} else {
			err = topics.CheckCopartitioned(rctx, adm, names)
		}
		rcancel()
		if err == nil {
			return nil
		}
		if p != nil && p.exited() {
			return withTail(fmt.Errorf("broker exited at start: %s", exitStatus(p.waitErr)), p.spec.log)
		}
		select {
		case <-ctx.Done():
			err = fmt.Errorf("broker at %s not ready within %s: %w", s.opts.BrokerAddr, s.opts.StartTimeout, err)
			if p != nil {
				return withTail(err, p.spec.log)
			}
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}
