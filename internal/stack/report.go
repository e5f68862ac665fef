package stack

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"syscall"
	"time"
)

// WriteAddresses writes where each component of st listens, and where the
// logs are, one per line.
func (st State) WriteAddresses(w io.Writer) {
	fmt.Fprintf(w, "  state dir    %s\n", st.Dir)
	fmt.Fprintf(w, "  broker       %s\n", st.Broker)
	fmt.Fprintf(w, "  clickhouse   %s (native), http://%s (http), database %s\n", st.ClickHouse, st.HTTP, st.Database)
	for _, u := range []struct{ name, url string }{
		{NameIngest, st.Ingest}, {NameJoiner, st.Joiner}, {NameRater, st.Rater}, {NameQuery, st.Query},
	} {
		if u.url != "" {
			fmt.Fprintf(w, "  %-12s %s\n", u.name, u.url)
		}
	}
	fmt.Fprintf(w, "  logs         %s\n", filepath.Join(st.Dir, "log"))
}

// WriteStatus writes the state of a running supervisor: its addresses, and
// each child with whether it still runs and, for a service, what its
// /healthz answers.
func (st State) WriteStatus(w io.Writer) {
	fmt.Fprintf(w, "stack %s (supervisor pid %d, up %s)\n", st.Status, st.Pid, time.Since(st.StartedAt).Round(time.Second))
	st.WriteAddresses(w)
	fmt.Fprintln(w, "children:")
	client := &http.Client{Timeout: time.Second}
	urls := map[string]string{NameIngest: st.Ingest, NameJoiner: st.Joiner, NameRater: st.Rater, NameQuery: st.Query}
	for _, ch := range st.Children {
		state := "running"
		if syscall.Kill(ch.Pid, 0) != nil {
			state = "EXITED"
		} else if u := urls[ch.Name]; u != "" {
			state = "running, /healthz " + health(client, u+"/healthz")
		}
		fmt.Fprintf(w, "  %-11s pid %-7d %s  (log %s)\n", ch.Name, ch.Pid, state, ch.Log)
	}
}

func health(client *http.Client, url string) string {
	resp, err := client.Get(url)
	if err != nil {
		return "unreachable"
	}
	resp.Body.Close()
	return resp.Status
}
