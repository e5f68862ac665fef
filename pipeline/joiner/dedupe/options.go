package dedupe

import "time"

// Options bound what a Set remembers.
type Options struct {
	// Horizon is how far behind the watermark an event may occur and
	// still be checked: an event whose occurred_at is before
	// watermark - Horizon is Late (dropped, never applied), and what the
	// set remembers of such events is forgotten. Longer keeps more
	// memory and accepts later events. Default 24h.
	Horizon time.Duration
	// Bucket is the event-time granularity at which memory is released:
	// identities are grouped by occurred_at into buckets of this width,
	// and a bucket is dropped whole once it lies entirely before
	// watermark - Horizon, so the set holds at most Horizon + Bucket of
	// event time. Smaller releases memory sooner and costs a little more
	// per bucket. It must not exceed Horizon. Default 1h.
	Bucket time.Duration
}

// DefaultOptions returns the default horizon (24h) and bucket (1h).
func DefaultOptions() Options {
	return Options{Horizon: 24 * time.Hour, Bucket: time.Hour}
}

// Validate checks the options.
func (o *Options) Validate() error {
	switch {
	case o.Horizon <= 0:
		return &OptionsError{"Horizon", "must be positive"}
	case o.Bucket <= 0:
		return &OptionsError{"Bucket", "must be positive"}
	case o.Bucket > o.Horizon:
		return &OptionsError{"Bucket", "must not exceed Horizon"}
	}
	return nil
}
