package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/driftline/driftline/pipeline/api/client"
)

// cmdAct takes an operator action (docs/actions.md):
//
//	driftctl act <action> <evidence_id> reason=... [assignee=...] [until=RFC3339] [key=...]
//	driftctl act <action> batch reason=... [preview=true] [key=...] [drift filters ...]
//
// Without key= a new Idempotency-Key is made and printed, so that the
// command can be repeated safely with it.
func cmdAct(ctx context.Context, c *client.Client, q url.Values, pos []string) (table, any, error) {
	t := table{head: []string{"evidence_id", "action", "status", "command_id", "reason"}}
	if len(pos) != 2 {
		return t, nil, fmt.Errorf("act: want an action and an evidence_id (or \"batch\"), got %q; e.g. driftctl act acknowledge %s reason=\"on it\"", pos, "orphan_provider_resource:maas/n-1")
	}
	a := client.ActionRequest{Action: pos[0], Reason: take(q, "reason"), Assignee: take(q, "assignee")}
	if u := take(q, "until"); u != "" {
		until, err := time.Parse(time.RFC3339, u)
		if err != nil {
			return t, nil, fmt.Errorf("act: until=%q: want an RFC 3339 time", u)
		}
		a.Until = until
	}
	if p := take(q, "preview"); p != "" {
		var err error
		if a.Preview, err = strconv.ParseBool(p); err != nil {
			return t, nil, fmt.Errorf("act: preview=%q: want true or false", p)
		}
	}
	key := take(q, "key")
	if key == "" && !a.Preview {
		var b [16]byte
		_, _ = rand.Read(b[:])
		key = "driftctl-" + hex.EncodeToString(b[:])
	}
	if key != "" {
		t.foot = append(t.foot, "Idempotency-Key: "+key+" (repeat with key="+key+" to retry safely)")
	}
	if pos[1] != "batch" {
		if len(q) != 0 {
			return t, nil, fmt.Errorf("act: unknown arguments %v for one finding (reason=, assignee=, until=, key=)", q)
		}
		ans, err := c.Act(ctx, pos[1], key, a)
		if err != nil {
			return t, nil, err
		}
		t.rows = append(t.rows, []string{ans.EvidenceID, ans.Action, ans.Status, ans.CommandID, ""})
		return t, ans, nil
	}
	ans, err := c.ActBatch(ctx, q, key, a)
	if err != nil {
		return t, nil, err
	}
	for _, r := range ans.AppliedTo {
		t.rows = append(t.rows, []string{r.EvidenceID, r.Action, r.Status, r.CommandID, ""})
	}
	for _, r := range ans.Refused {
		t.rows = append(t.rows, []string{r.EvidenceID, ans.Action, "refused", "", r.Reason})
	}
	t.foot = append(t.foot, fmt.Sprintf("%d applied, %d refused", ans.Count, len(ans.Refused)))
	return t, ans, nil
}

// take removes the parameter name from q and returns its value.
func take(q url.Values, name string) string {
	v := q.Get(name)
	q.Del(name)
	return v
}
