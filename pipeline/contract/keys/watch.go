package keys

import (
	"bytes"
	"context"
	"crypto/sha256"
	"os"
	"time"
)

// Watch rereads the keys file at path whenever its contents change
// (checked every interval; 0 disables polling) or a value arrives on hup
// (wire it to SIGHUP; it rereads even an unchanged file), until ctx ends.
// A file that parses is handed to apply; one that cannot be read or
// parsed is handed to refused (the caller logs and counts it and keeps
// the keys in force). Revoking a key is therefore: set "revoked": true in
// the file, then wait one interval or send SIGHUP.
func Watch(ctx context.Context, path string, interval time.Duration, hup <-chan os.Signal,
	apply func(*Keyring), refused func(err error, unreadable bool)) {
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
			refused(err, true)
			continue
		}
		sum := sha256.Sum256(data)
		if !forced && bytes.Equal(sum[:], last[:]) {
			continue
		}
		last = sum
		kr, err := ParseKeyring(data)
		if err != nil {
			refused(err, false)
			continue
		}
		apply(kr)
	}
}
