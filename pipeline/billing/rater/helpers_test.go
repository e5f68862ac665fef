package rater_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	json "github.com/segmentio/encoding/json"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/contract"
)

// usage describes one usage event the tests send.
type usage struct {
	eventID, usageID, source, meteringID, unit, quantity, tenant, env string
}

func (u usage) key() string { return contract.UsageKey(u.source, u.meteringID) }

func (u usage) encode() []byte {
	env := u.env
	if env == "" {
		env = contract.EnvLocalParity
	}
	return fmt.Appendf(nil, `{"event_id":%q,"event_type":"usage.recorded","schema_version":1,"producer":"gw-test",`+
		`"occurred_at":"2026-11-21T10:15:30.123Z","correlation_id":"c-%s","environment":%q,"payload":{`+
		`"usage_id":%q,"metering_source":%q,"metering_id":%q,"unit_id":%q,"quantity":%q,`+
		`"product_id":"gpuaas","tenant_id":%q,"project_id":"p-1","window_start":"2026-11-21T10:00:00Z","window_end":"2026-11-21T10:15:00Z"}}`,
		u.eventID, u.usageID, env, u.usageID, u.source, u.meteringID, u.unit, u.quantity, u.tenant)
}

func produce(t testing.TB, brokers []string, topic string, us ...usage) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rs := make([]*kgo.Record, len(us))
	for i, u := range us {
		rs[i] = &kgo.Record{Topic: topic, Key: []byte(u.key()), Value: u.encode()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// readAll returns every record of topic a read_committed consumer sees,
// read until no new record arrives for idle (testenv.ReadTopics).
func readAll(t testing.TB, brokers []string, topic string, idle time.Duration) []*kgo.Record {
	t.Helper()
	return testenv.ReadTopics(t, context.Background(), brokers, idle, topic)[topic]
}

type ratedLine struct {
	EventID  string         `json:"event_id"`
	Producer string         `json:"producer"`
	Payload  contract.Rated `json:"payload"`
}

func decodeRated(t testing.TB, r *kgo.Record) ratedLine {
	t.Helper()
	var l ratedLine
	if err := json.Unmarshal(r.Value, &l); err != nil {
		t.Fatalf("rated line %s: %v", r.Value, err)
	}
	if _, _, verr := (contract.Validator{Environment: contract.EnvLocalParity}).DecodeEvent(r.Value); verr != nil {
		t.Fatalf("rated line is not a valid contract event: %v\n%s", verr, r.Value)
	}
	return l
}

func decodeQuarantine(t testing.TB, r *kgo.Record) contract.Quarantined {
	t.Helper()
	var q contract.Quarantined
	if err := json.Unmarshal(r.Value, &q); err != nil {
		t.Fatalf("quarantine value %s: %v", r.Value, err)
	}
	return q
}

// raterBinary is cmd/rater built for a test, with the shipped price book
// (deploy/pricebook.json). The processes it starts write to one log,
// shown when the test fails or RATER_TEST_LOG is set; one still running
// when the test ends is killed.
type raterBinary struct {
	t    *testing.T
	bin  string
	book string
	log  *os.File
}

// buildRater builds cmd/rater into a temporary folder; a -short run skips
// the test instead.
func buildRater(t *testing.T) *raterBinary {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the rater binary")
	}
	dir := t.TempDir()
	r := &raterBinary{t: t, bin: filepath.Join(dir, "rater")}
	if out, err := exec.Command("go", "build", "-o", r.bin, "github.com/driftline/driftline/cmd/rater").CombinedOutput(); err != nil {
		t.Fatalf("build rater: %v\n%s", err, out)
	}
	var err error
	if r.book, err = filepath.Abs(filepath.Join("..", "..", "..", "deploy", "pricebook.json")); err != nil {
		t.Fatal(err)
	}
	if r.log, err = os.Create(filepath.Join(dir, "rater.log")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("RATER_TEST_LOG") != "" {
			out, _ := os.ReadFile(r.log.Name())
			t.Logf("rater output:\n%s", out)
		}
		r.log.Close()
	})
	return r
}

// start starts the binary with args; it dies with the test process.
func (r *raterBinary) start(args ...string) *exec.Cmd {
	r.t.Helper()
	cmd := exec.Command(r.bin, args...)
	cmd.Stdout, cmd.Stderr = r.log, r.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd
}

// stop stops cmd with SIGTERM; the test fails unless it exits cleanly.
func (r *raterBinary) stop(cmd *exec.Cmd) {
	r.t.Helper()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		r.t.Errorf("rater did not stop cleanly: %v", err)
	}
}
