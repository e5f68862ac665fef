package joiner

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// MemoryOptions set the Go collector of a joiner process. They are the
// process's, not a Joiner's: the main applies them once with TuneMemory.
type MemoryOptions struct {
	// GCPercent is the collector's target: a collection starts once the
	// heap has grown by this percentage of what the last one left live.
	// The joiner's heap is mostly its partitions' state, and Go's
	// default of 100 let RSS run at about twice that; 50 holds it near
	// 1.5 times for a few percent more CPU (bench/joiner/README.md,
	// memory). Negative leaves the GOGC environment variable, or Go's
	// default, in force. Default 50, unless GOGC is set.
	GCPercent int
	// Limit is a soft limit on the memory the Go runtime holds
	// (debug.SetMemoryLimit, as GOMEMLIMIT): near it the collector runs
	// more often whatever GCPercent says and returns freed pages to the
	// kernel sooner, so a joiner under a container's limit slows down
	// before the kernel kills it. It bounds the collector's headroom
	// only: state larger than the limit is still kept (the runtime caps
	// the collector at about half the CPU rather than stall). 0 takes
	// LimitFraction of the cgroup's memory limit when the process has
	// one, and no limit otherwise; negative sets none. Default 0, unless
	// GOMEMLIMIT is set.
	Limit int64
	// LimitFraction is the share of the cgroup's memory limit that
	// Limit 0 takes: the rest is for what the runtime does not count
	// (the kernel's page tables, thread stacks, cgo). Default 0.9.
	LimitFraction float64
}

// DefaultMemoryOptions returns the default MemoryOptions.
func DefaultMemoryOptions() MemoryOptions {
	return MemoryOptions{GCPercent: 50, LimitFraction: 0.9}
}

// TuneMemory applies o to the Go runtime and returns the memory limit it
// set (0: none). GOGC and GOMEMLIMIT, when set, win over o.
func TuneMemory(o MemoryOptions) int64 {
	return tuneMemory(o, os.Getenv, cgroupMemoryLimit)
}

func tuneMemory(o MemoryOptions, getenv func(string) string, cgroup func() int64) int64 {
	if o.GCPercent >= 0 && getenv("GOGC") == "" {
		debug.SetGCPercent(o.GCPercent)
	}
	if getenv("GOMEMLIMIT") != "" {
		if l := debug.SetMemoryLimit(-1); l < math.MaxInt64 {
			return l
		}
		return 0
	}
	limit := o.Limit
	if limit == 0 {
		if c := cgroup(); c > 0 {
			f := o.LimitFraction
			if f <= 0 || f > 1 {
				f = DefaultMemoryOptions().LimitFraction
			}
			limit = int64(float64(c) * f)
		}
	}
	if limit <= 0 {
		return 0
	}
	debug.SetMemoryLimit(limit)
	return limit
}

// noCgroupLimit is what cgroup v1 reports for a group without a limit
// (the largest page-aligned int64); anything at or above it is none.
const noCgroupLimit = 1 << 62

// cgroupMemoryLimit returns the memory limit of the process's cgroup
// (v2 memory.max, else v1 memory.limit_in_bytes), or 0 when it has none
// or none can be read.
func cgroupMemoryLimit() int64 {
	for _, path := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		return parseCgroupLimit(string(b))
	}
	return 0
}

// parseCgroupLimit reads a cgroup memory limit file's content: bytes, or
// "max" for none.
func parseCgroupLimit(s string) int64 {
	s = strings.TrimSpace(s)
	if s == "max" {
		return 0
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n >= noCgroupLimit {
		return 0
	}
	return n
}

// ParseBytes reads a size in bytes with an optional suffix: KiB, MiB,
// GiB, TiB (powers of 1024) or KB, MB, GB, TB (powers of 1000), e.g.
// "1536MiB"; a negative size stays negative.
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: want bytes with an optional KiB, MiB, GiB, KB, MB or GB suffix", s)
	}
	if n > 0 && n > (1<<63-1)/mult || n < 0 && n < -(1<<63-1)/mult {
		return 0, fmt.Errorf("size %q: too large", s)
	}
	return n * mult, nil
}
