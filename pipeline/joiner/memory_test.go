package joiner

import (
	"math"
	"runtime/debug"
	"testing"
)

func TestParseBytes(t *testing.T) {
	f := func(in string, want int64, ok bool) {
		t.Helper()
		got, err := ParseBytes(in)
		if (err == nil) != ok || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d, ok %v", in, got, err, want, ok)
		}
	}
	f("0", 0, true)
	f("-1", -1, true)
	f("1536MiB", 1536<<20, true)
	f("2 GiB", 2<<30, true)
	f("3GB", 3e9, true)
	f("10KiB", 10<<10, true)
	f("512B", 512, true)
	f("1.5GiB", 0, false)
	f("GiB", 0, false)
	f("9000000TiB", 0, false)
}

func TestParseCgroupLimit(t *testing.T) {
	for in, want := range map[string]int64{
		"max\n":                 0,
		"9223372036854771712\n": 0, // cgroup v1 without a limit
		"2147483648\n":          2 << 30,
		"junk":                  0,
	} {
		if got := parseCgroupLimit(in); got != want {
			t.Errorf("parseCgroupLimit(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestTuneMemory(t *testing.T) {
	oldGC, oldLimit := debug.SetGCPercent(100), debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetGCPercent(oldGC); debug.SetMemoryLimit(oldLimit) })
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	cgroup := func(n int64) func() int64 { return func() int64 { return n } }
	reset := func() { debug.SetGCPercent(100); debug.SetMemoryLimit(math.MaxInt64) }

	reset()
	if got, _ := tuneMemory(DefaultMemoryOptions(), env(nil), cgroup(0)); got != 0 {
		t.Errorf("no cgroup limit: set %d, want none", got)
	}
	if gc := debug.SetGCPercent(100); gc != 50 {
		t.Errorf("GC percent %d, want 50", gc)
	}
	if l := debug.SetMemoryLimit(-1); l != math.MaxInt64 {
		t.Errorf("memory limit %d, want none", l)
	}

	reset()
	c := int64(4 << 30)
	want := int64(float64(c) * 0.9)
	if got, _ := tuneMemory(DefaultMemoryOptions(), env(nil), cgroup(c)); got != want {
		t.Errorf("cgroup of 4 GiB: limit %d, want 90%%", got)
	}
	if l := debug.SetMemoryLimit(-1); l != want {
		t.Errorf("memory limit %d, want 90%% of 4 GiB", l)
	}

	reset()
	o := DefaultMemoryOptions()
	o.Limit = 1 << 30
	if got, _ := tuneMemory(o, env(nil), cgroup(4<<30)); got != 1<<30 {
		t.Errorf("explicit limit: set %d, want 1 GiB", got)
	}

	reset()
	o.Limit = -1
	if got, _ := tuneMemory(o, env(nil), cgroup(4<<30)); got != 0 {
		t.Errorf("negative limit: set %d, want none", got)
	}

	reset()
	if got, _ := tuneMemory(DefaultMemoryOptions(), env(map[string]string{"GOGC": "200", "GOMEMLIMIT": "off"}), cgroup(4<<30)); got != 0 {
		t.Errorf("GOMEMLIMIT set: %d, want the environment's (none)", got)
	}
	if gc := debug.SetGCPercent(100); gc != 100 {
		t.Errorf("GOGC set: GC percent %d, want it left alone", gc)
	}
}

// The collector is paced between PacedGCPercent and GCPercent by
// GCHeadroom, unless GOGC is set or there is nothing to pace between.
func TestTuneMemoryPacesTheCollector(t *testing.T) {
	oldGC, oldLimit := debug.SetGCPercent(100), debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetGCPercent(oldGC); debug.SetMemoryLimit(oldLimit) })
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	none := func() int64 { return 0 }

	_, gc := tuneMemory(DefaultMemoryOptions(), env(nil), none)
	if gc == nil || gc.Headroom != 256<<20 || gc.Min != PacedGCPercent || gc.Max != 50 {
		t.Fatalf("default options: pacer %+v, want 256 MiB between %d and 50", gc, PacedGCPercent)
	}
	for name, c := range map[string]struct {
		mod func(*MemoryOptions)
		env map[string]string
	}{
		"GOGC set":             {func(*MemoryOptions) {}, map[string]string{"GOGC": "80"}},
		"no headroom":          {func(o *MemoryOptions) { o.GCHeadroom = 0 }, nil},
		"percent at the least": {func(o *MemoryOptions) { o.GCPercent = PacedGCPercent }, nil},
		"percent left alone":   {func(o *MemoryOptions) { o.GCPercent = -1 }, nil},
	} {
		o := DefaultMemoryOptions()
		c.mod(&o)
		if _, gc := tuneMemory(o, env(c.env), none); gc != nil {
			t.Errorf("%s: pacer %+v, want none", name, gc)
		}
	}
}
