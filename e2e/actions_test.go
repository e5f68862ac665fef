package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/driftline/driftline/internal/stack"
	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/readmodel"
)

// operator acts on findings through the query service while a fault
// schedule runs, and after it until the joiners have caught up: it
// acknowledges open findings, one Idempotency-Key each, and retries a key
// whose answer it did not get (the query service was killed, the broker
// or ClickHouse was down) until the service answers. Afterwards every
// action the service accepted must be in drift_history exactly once: none
// lost, none applied twice.
type operator struct {
	t    *testing.T
	base string
	mu   sync.Mutex        // protects accepted and tally
	acc  map[string]string // command_id -> Idempotency-Key
	seen map[string]bool   // evidence ids acted on
	stop chan struct{}
	done chan struct{}
	hc   *http.Client
	// tally counts what the operator got, to say why it had nothing
	// accepted: lists answered, lists that failed, and the actions'
	// answers by status (0: none came).
	tally struct {
		lists, listFailed int
		answers           map[int]int
		// duringSchedule is how many actions were accepted when the
		// fault schedule ended (scheduleDone); -1 before it has.
		duringSchedule int
	}
}

// summary says what the operator got from the query service.
func (o *operator) summary() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return fmt.Sprintf("%d lists of open findings answered, %d failed; %d findings picked; action answers by status (0: none) %v; %d actions accepted while the faults landed",
		o.tally.lists, o.tally.listFailed, len(o.seen), o.tally.answers, o.tally.duringSchedule)
}

// acceptedCount returns how many actions the service accepted so far.
func (o *operator) acceptedCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.acc)
}

// scheduleDone notes how many actions were accepted while the faults
// landed.
func (o *operator) scheduleDone() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.tally.duringSchedule = len(o.acc)
}

// listed counts a list of open findings, answered or not (ok).
func (o *operator) listed(ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if ok {
		o.tally.lists++
	} else {
		o.tally.listFailed++
	}
}

// answered counts an action's answer by status (0: none came).
func (o *operator) answered(status int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.tally.answers == nil {
		o.tally.answers = map[int]int{}
	}
	o.tally.answers[status]++
}

func startOperator(t *testing.T, s *stack.Stack) *operator {
	o := &operator{t: t, base: s.QueryURL(), acc: map[string]string{}, seen: map[string]bool{},
		stop: make(chan struct{}), done: make(chan struct{}), hc: &http.Client{Timeout: 5 * time.Second}}
	o.tally.duringSchedule = -1
	go o.run()
	return o
}

func (o *operator) run() {
	defer close(o.done)
	for n := 0; ; n++ {
		select {
		case <-o.stop:
			return
		case <-time.After(300 * time.Millisecond):
		}
		id := o.pick()
		if id == "" {
			continue
		}
		key := fmt.Sprintf("fault-operator-%d", n)
		for {
			cid, retry := o.act(id, key)
			if cid != "" {
				o.mu.Lock()
				o.acc[cid] = key
				o.mu.Unlock()
			}
			if !retry {
				break
			}
			select {
			case <-o.stop:
				// The last answer never came: the service may still have
				// written the command; the check below finds it either
				// way only if accepted, which we cannot know.
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
}

// pick returns an open finding not acted on yet, or "".
func (o *operator) pick() string {
	req, _ := http.NewRequest(http.MethodGet, o.base+"/v1/drift?limit=50", nil)
	req.Header.Set("Authorization", "Bearer "+testenv.LocalKey)
	resp, err := o.hc.Do(req)
	if err != nil {
		o.listed(false)
		return ""
	}
	defer resp.Body.Close()
	var page apitypes.DriftPage
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&page) != nil {
		o.listed(false)
		return ""
	}
	o.listed(true)
	for _, f := range page.Findings {
		if !o.seen[f.EvidenceID] {
			o.seen[f.EvidenceID] = true
			return f.EvidenceID
		}
	}
	return ""
}

// act posts one acknowledge; retry says the answer did not come (or was
// 5xx) and the same key must be posted again.
func (o *operator) act(id, key string) (commandID string, retry bool) {
	body, _ := json.Marshal(map[string]string{"action": "acknowledge", "reason": "fault schedule"})
	req, _ := http.NewRequest(http.MethodPost, o.base+"/v1/findings/"+url.PathEscape(id)+"/actions", bytes.NewReader(body))
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Authorization", "Bearer "+testenv.LocalKey)
	resp, err := o.hc.Do(req)
	if err != nil {
		o.answered(0)
		return "", true
	}
	defer resp.Body.Close()
	o.answered(resp.StatusCode)
	switch {
	case resp.StatusCode == http.StatusAccepted:
		var a apitypes.ActionAccepted
		if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
			o.t.Errorf("action answer: %v", err)
			return "", false
		}
		return a.CommandID, false
	case resp.StatusCode >= 500:
		return "", true
	}
	return "", false // refused (the finding resolved meanwhile): nothing written
}

// finish stops the operator and returns the accepted commands.
func (o *operator) finish() map[string]string {
	close(o.stop)
	<-o.done
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.acc
}

// checkActions checks that each accepted command is one drift_history row
// of the database db (action or action_refused), and that no command is
// there twice.
func checkActions(t *testing.T, ctx context.Context, s *stack.Stack, op *operator, accepted map[string]string) {
	t.Helper()
	if len(accepted) == 0 {
		t.Fatalf("the operator had no action accepted by the time the joiners caught up: %s", op.summary())
	}
	conn, err := readmodel.Open(ctx, s.ClickHouse())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows, err := conn.Query(ctx, "SELECT action_id, count() FROM drift_history FINAL WHERE action_id != '' GROUP BY action_id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]uint64{}
	for rows.Next() {
		var id string
		var n uint64
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		got[id] = n
	}
	for id, n := range got {
		if n != 1 {
			t.Errorf("command %s is in drift_history %d times, want once", id, n)
		}
	}
	for id, key := range accepted {
		if got[id] == 0 {
			t.Errorf("command %s (Idempotency-Key %s) was accepted but never applied", id, key)
		}
	}
	t.Logf("%d actions accepted, each applied once (%d commands in the history); %s", len(accepted), len(got), op.summary())
}
