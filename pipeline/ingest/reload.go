package ingest

import (
	"context"
	"os"
	"time"

	"github.com/driftline/driftline/pipeline/contract/keys"
)

// WatchKeys reloads the keys file at path whenever its contents change
// (checked every interval; 0 disables polling) or a value arrives on hup
// (wire it to SIGHUP), until ctx ends. A file that does not parse, or that
// the environment refuses, leaves the keys in force and is logged and
// counted (driftline_ingest_policy_reloads_total{result="refused"}); a
// valid change starts a new policy_rev (see SetKeys). Revoking a key is
// therefore: set "revoked": true in the file, then wait one interval or
// send SIGHUP.
func (g *Gateway) WatchKeys(ctx context.Context, path string, interval time.Duration, hup <-chan os.Signal) {
	keys.Watch(ctx, path, interval, hup, func(kr *keys.Keyring) {
		_, _ = g.SetKeys(kr) // logs and counts its own outcome
	}, func(err error, unreadable bool) {
		g.m.reloads.WithLabelValues("refused").Inc()
		what := "keys file refused"
		if unreadable {
			what = "keys file unreadable"
		}
		g.audit.Error(what+"; the previous policy stays in force", "event", "policy_reload_refused", "path", path, "err", err)
	})
}
