package nodeagent

import "time"

// Options are the event-time thresholds of the tracker. Silence is the
// watermark minus the node's last heartbeat (last_seen_at).
type Options struct {
	// DelayedAfter is the silence after which a node is DELAYED: its
	// heartbeat is overdue. It must exceed the heartbeat cadence plus the
	// watermark's lateness, or healthy nodes flap between heartbeats (the
	// reference fleet beats once per 6 m round, up to 20 s late, which a
	// 30 s lateness makes at most 5 m 50 s of silence). Default 7m.
	DelayedAfter time.Duration
	// AutonomousAfter is the silence after which a node is AUTONOMOUS:
	// the control channel is taken as lost and the node as running on
	// its local policy. A heartbeat arriving at least this long after the
	// one before it makes the node RETURNING. Default 8m.
	AutonomousAfter time.Duration
	// DisconnectedAfter is the silence after which a node is
	// DISCONNECTED and its agent down: the contract's staleness window.
	// Default 10m.
	DisconnectedAfter time.Duration
	// HostWindow is how long a host fingerprint counts towards cloned
	// identity detection after its last heartbeat: two distinct host
	// fingerprints of one node_id within it are a cloned identity. The
	// contract's staleness window. Default 10m.
	HostWindow time.Duration
	// DelayedRTTMs is the round-trip time, in milliseconds, at or above
	// which a reporting node's link makes it DELAYED. Default 250.
	DelayedRTTMs float64
	// DelayedLossPct is the packet loss, in percent, at or above which a
	// reporting node's link makes it DELAYED. Default 2.
	DelayedLossPct float64
	// EdgeCachedBehind is the reported seconds_behind at or above which a
	// node is EDGE_CACHED: it syncs through a cache, not live. Default 60s.
	EdgeCachedBehind time.Duration
	// EdgeCachedBacklog is the reported backlog_messages at or above which
	// a node (not replaying) is EDGE_CACHED. Default 1000.
	EdgeCachedBacklog int64
	// AutonomousBehind is the reported seconds_behind at or above which a
	// reporting node is AUTONOMOUS: it has decided alone for longer than
	// the staleness window. Default 10m.
	AutonomousBehind time.Duration
	// Refresh bounds how stale the link-quality, sync-debt and
	// last_seen_at columns of an unchanged node may get: a heartbeat that
	// changes no derived field still emits a Status once last_seen_at has
	// moved this far past the last emitted one. Smaller is fresher and
	// writes more rows; 0 emits on every applied heartbeat. Default 1m.
	Refresh time.Duration
}

// DefaultOptions returns the default thresholds.
func DefaultOptions() Options {
	return Options{
		DelayedAfter:      7 * time.Minute,
		AutonomousAfter:   8 * time.Minute,
		DisconnectedAfter: 10 * time.Minute,
		HostWindow:        10 * time.Minute,
		DelayedRTTMs:      250,
		DelayedLossPct:    2,
		EdgeCachedBehind:  time.Minute,
		EdgeCachedBacklog: 1000,
		AutonomousBehind:  10 * time.Minute,
		Refresh:           time.Minute,
	}
}

// Validate checks that the thresholds are positive and ordered.
func (o *Options) Validate() error {
	switch {
	case o.DelayedAfter <= 0:
		return &OptionsError{"DelayedAfter", "must be positive"}
	case o.AutonomousAfter <= o.DelayedAfter:
		return &OptionsError{"AutonomousAfter", "must exceed DelayedAfter"}
	case o.DisconnectedAfter <= o.AutonomousAfter:
		return &OptionsError{"DisconnectedAfter", "must exceed AutonomousAfter"}
	case o.HostWindow <= 0:
		return &OptionsError{"HostWindow", "must be positive"}
	case o.DelayedRTTMs <= 0 || o.DelayedLossPct <= 0:
		return &OptionsError{"DelayedRTTMs", "link thresholds must be positive"}
	case o.EdgeCachedBehind <= 0 || o.EdgeCachedBacklog <= 0:
		return &OptionsError{"EdgeCachedBehind", "sync-debt thresholds must be positive"}
	case o.AutonomousBehind <= o.EdgeCachedBehind:
		return &OptionsError{"AutonomousBehind", "must exceed EdgeCachedBehind"}
	case o.Refresh < 0:
		return &OptionsError{"Refresh", "must not be negative"}
	}
	return nil
}
