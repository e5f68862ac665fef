package main

import (
	"bufio"
	"context"
	"os"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// machine describes where a run happened.
type machine struct {
	CPUs       int    `json:"cpus"`
	CPUModel   string `json:"cpu_model"`
	MemTotal   int64  `json:"mem_total_bytes"`
	Kernel     string `json:"kernel"`
	GoVersion  string `json:"go_version"`
	ClickHouse string `json:"clickhouse_version"`
	LoadBefore string `json:"load_before"` // /proc/loadavg when the run started
	LoadAfter  string `json:"load_after"`
}

func describeMachine() machine {
	m := machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if mem, err := statusFieldFile("/proc/meminfo", "MemTotal:"); err == nil {
		m.MemTotal = mem
	}
	if raw, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(raw))
	}
	m.LoadBefore = loadavg()
	return m
}

// quiesce writes the page cache's dirty data to disk (sync(2)) before a
// phase starts its processes: the broker's log of the produce phase and
// the parts of the previous phases are otherwise written back while the
// next phase is measured, and the kernel's writeback takes CPU time and
// disk from it.
func quiesce(logf func(string, ...any)) {
	start := time.Now()
	syscall.Sync()
	if d := time.Since(start); d > 100*time.Millisecond {
		logf("wrote back the page cache's dirty data in %.1fs before the phase", d.Seconds())
	}
}

func loadavg() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func statusFieldFile(path, name string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), name); ok {
			var kb int64
			for _, c := range strings.TrimSpace(rest) {
				if c < '0' || c > '9' {
					break
				}
				kb = kb*10 + int64(c-'0')
			}
			return kb << 10, nil
		}
	}
	return 0, os.ErrNotExist
}

func clickHouseVersion(ctx context.Context, conn driver.Conn) string {
	var v string
	if err := conn.QueryRow(ctx, "SELECT version()").Scan(&v); err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return v
}
