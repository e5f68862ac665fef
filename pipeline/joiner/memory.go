package joiner

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/driftline/driftline/pipeline/service"
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
	// GCHeadroom, when positive, lowers GCPercent as the live heap grows:
	// after each round the target is set so that the heap may grow about
	// this many bytes past the live heap, between PacedGCPercent and
	// GCPercent (service.GCPacer). A small joiner keeps GCPercent, where
	// a collection's CPU buys little memory; at fleet scale, where RSS is
	// what runs out, the collector runs at PacedGCPercent (at 10M events
	// and 1.33M identities: peak RSS 14% lower for about 4% more CPU;
	// bench/joiner/README.md, memory). 0 or a GCPercent at or below
	// PacedGCPercent: GCPercent throughout. Default 256 MiB.
	GCHeadroom int64
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

// PacedGCPercent is the least target MemoryOptions.GCHeadroom lowers the
// collector's to. Below it a collection's CPU rises faster than RSS falls:
// at 10M events, the collector took 2.3 CPU s at 50%, 3.6 at 25%, 6.7 at
// 15% and 10.1 at 10%, for a peak RSS of 2,188, 1,824, 1,687 and 1,617
// MiB (bench/joiner/README.md, memory).
const PacedGCPercent = 25

// DefaultMemoryOptions returns the default MemoryOptions.
func DefaultMemoryOptions() MemoryOptions {
	return MemoryOptions{GCPercent: 50, GCHeadroom: 256 << 20, LimitFraction: 0.9}
}

// TuneMemory applies o to the Go runtime. It returns the memory limit it
// set (0: none) and the pacer of MemoryOptions.GCHeadroom, to be called
// after each round (Options.GC; nil when the collector is not paced).
// GOGC and GOMEMLIMIT, when set, win over o.
func TuneMemory(o MemoryOptions) (limit int64, gc *service.GCPacer) {
	return tuneMemory(o, os.Getenv, cgroupMemoryLimit)
}

func tuneMemory(o MemoryOptions, getenv func(string) string, cgroup func() int64) (int64, *service.GCPacer) {
	var gc *service.GCPacer
	if o.GCPercent >= 0 && getenv("GOGC") == "" {
		debug.SetGCPercent(o.GCPercent)
		if o.GCHeadroom > 0 && o.GCPercent > PacedGCPercent {
			gc = &service.GCPacer{Headroom: uint64(o.GCHeadroom), Min: PacedGCPercent, Max: o.GCPercent}
		}
	}
	return memoryLimit(o, getenv, cgroup), gc
}

// memoryLimit applies o's memory limit and returns it (0: none).
func memoryLimit(o MemoryOptions, getenv func(string) string, cgroup func() int64) int64 {
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
