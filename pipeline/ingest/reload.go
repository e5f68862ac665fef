package ingest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"os"
	"time"
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
	var last [sha256.Size]byte
	if data, err := os.ReadFile(path); err == nil {
		last = sha256.Sum256(data)
	}
	var tick <-chan time.Time
	if interval > 0 {
		t := time.NewTicker(interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		forced := false
		select {
		case <-ctx.Done():
			return
		case <-tick:
		case <-hup:
			forced = true
		}
		data, err := os.ReadFile(path)
		if err != nil {
			g.m.reloads.WithLabelValues("refused").Inc()
			g.audit.Error("keys file unreadable; the previous policy stays in force", "event", "policy_reload_refused", "path", path, "err", err)
			continue
		}
		sum := sha256.Sum256(data)
		if !forced && bytes.Equal(sum[:], last[:]) {
			continue
		}
		last = sum
		kr, err := ParseKeyring(data)
		if err != nil {
			g.m.reloads.WithLabelValues("refused").Inc()
			g.audit.Error("keys file refused; the previous policy stays in force", "event", "policy_reload_refused", "path", path, "err", err)
			continue
		}
		_, _ = g.SetKeys(kr) // logs and counts its own outcome
	}
}
