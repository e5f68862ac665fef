package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat.
// It is 100 on every Linux architecture Go supports.
const clockTicks = 100

// cpuSeconds returns the user+system CPU time a process has used so far
// (/proc/<pid>/stat fields 14 and 15).
func cpuSeconds(pid int) (float64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; fields count from the
	// last ')'.
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	// f[0] is field 3 (state), so field 14 is f[11] and 15 is f[12].
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return float64(ut+st) / clockTicks, nil
}

// peakRSS returns VmHWM, the peak resident set size, in bytes.
func peakRSS(pid int) (int64, error) {
	return statusField(pid, "VmHWM:")
}

func statusField(pid int, name string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, name); ok {
			fs := strings.Fields(rest)
			if len(fs) == 0 {
				break
			}
			kb, err := strconv.ParseInt(fs[0], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/status %s: %w", pid, name, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no %s", pid, name)
}

// usage is what one process used during a phase.
type usage struct {
	Name       string  `json:"name"`
	CPUSeconds float64 `json:"cpu_seconds"`
	PeakRSS    int64   `json:"peak_rss_bytes"` // VmHWM; for long-lived processes, since they started
}

// cpuMark remembers the CPU time of long-lived processes (broker,
// ClickHouse) at the start of a phase, so the phase can be charged with
// their share.
type cpuMark map[string]struct {
	pid int
	cpu float64
}

func markCPU(pids map[string]int) cpuMark {
	m := cpuMark{}
	for name, pid := range pids {
		c, _ := cpuSeconds(pid)
		m[name] = struct {
			pid int
			cpu float64
		}{pid, c}
	}
	return m
}

// since returns each process's CPU time since the mark, and its VmHWM.
func (m cpuMark) since() []usage {
	var out []usage
	for name, v := range m {
		c, err := cpuSeconds(v.pid)
		if err != nil {
			continue
		}
		hwm, _ := peakRSS(v.pid)
		out = append(out, usage{Name: name, CPUSeconds: c - v.cpu, PeakRSS: hwm})
	}
	return out
}

// child is a pipeline process the harness started.
type child struct {
	name    string
	cmd     *exec.Cmd
	log     string
	started time.Time
	done    chan struct{}
	err     error
	metrics string // base URL of /metrics, if any
}

// startChild runs path with args and env, output to logDir/name.log.
func startChild(name, path string, args, env []string, logDir, metricsAddr string) (*child, error) {
	logPath := filepath.Join(logDir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c := &child{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	if metricsAddr != "" {
		c.metrics = "http://" + metricsAddr + "/metrics"
	}
	c.started = time.Now()
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		c.err = cmd.Wait()
		f.Close()
		close(c.done)
	}()
	return c, nil
}

func (c *child) pid() int { return c.cmd.Process.Pid }

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// usage reads the child's CPU time and peak RSS; call it before stop.
func (c *child) usage() usage {
	cpu, _ := cpuSeconds(c.pid())
	hwm, _ := peakRSS(c.pid())
	return usage{Name: c.name, CPUSeconds: cpu, PeakRSS: hwm}
}

// stop sends SIGTERM and waits up to grace before SIGKILL.
func (c *child) stop(grace time.Duration) {
	if c.exited() {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(grace):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// tail returns the last n bytes of the child's log.
func (c *child) tail(n int64) string {
	f, err := os.Open(c.log)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > n {
		_, _ = f.Seek(fi.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// scrape returns the value of each named Prometheus series (summed over
// labels) from the child's /metrics.
func (c *child) scrape(ctx context.Context, names ...string) (map[string]float64, error) {
	if c.metrics == "" {
		return nil, errors.New(c.name + ": no metrics address")
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.metrics, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", c.metrics, resp.Status)
	}
	out := make(map[string]float64, len(names))
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		for _, n := range names {
			if !strings.HasPrefix(line, n) {
				continue
			}
			rest := line[len(n):]
			if rest == "" || (rest[0] != ' ' && rest[0] != '{') {
				continue
			}
			i := strings.LastIndexByte(rest, ' ')
			v, err := strconv.ParseFloat(rest[i+1:], 64)
			if err == nil {
				out[n] += v
			}
		}
	}
	return out, sc.Err()
}

// profileSelf writes a CPU profile of the harness to path until the
// returned function is called.
func profileSelf(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
