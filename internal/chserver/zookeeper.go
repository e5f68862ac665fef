package chserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/driftline/driftline/internal/debpkg"
)

// Debian's zookeeper package: the server's jar (its manifest names the
// jars it needs) and the JVM that runs it.
const (
	ZooKeeperJar = "/usr/share/java/zookeeper.jar"
	javaBinary   = "java"
	zkMain       = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
	zkConfigFile = "zoo.cfg"
	zkPIDFile    = "zookeeper.pid"
	zkDataDir    = "data"
	zkLog        = "zookeeper.log"
)

// ZooKeeperInstallHint is the command that installs ZooKeeper on Debian
// and Ubuntu.
const ZooKeeperInstallHint = "apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y zookeeper"

// ErrZooKeeperNotFound means Debian's zookeeper package (or a JVM) is
// missing. The error returned by FindZooKeeper wraps it and says how to
// install it.
var ErrZooKeeperNotFound = errors.New("zookeeper not found")

// FindZooKeeper returns the JVM that runs ZooKeeperJar, or an error
// wrapping ErrZooKeeperNotFound.
func FindZooKeeper() (java string, err error) {
	if _, err := os.Stat(ZooKeeperJar); err != nil {
		return "", fmt.Errorf("%w: %s is missing; Possible solutions: install it as root with `%s`", ErrZooKeeperNotFound, ZooKeeperJar, ZooKeeperInstallHint)
	}
	java, err = exec.LookPath(javaBinary)
	if err != nil {
		return "", fmt.Errorf("%w: no java on PATH; Possible solutions: install it as root with `%s` (it depends on a JVM)", ErrZooKeeperNotFound, ZooKeeperInstallHint)
	}
	return java, nil
}

// InstallZooKeeper installs Debian's zookeeper package with apt-get, as
// Install does clickhouse-server: root only, one installer per machine at
// a time, apt's output to log.
func InstallZooKeeper(ctx context.Context, log io.Writer) error {
	findZK := func() error {
		_, err := FindZooKeeper()
		return err
	}
	if err := debpkg.Install(ctx, log, "zookeeper", ZooKeeperInstallHint, findZK); err != nil {
		return err
	}
	return findZK()
}

// ZooKeeperOptions configures StartZooKeeper.
type ZooKeeperOptions struct {
	// Dir holds the config, the data and the log. Required.
	Dir string
	// Port is the client port on 127.0.0.1. Required.
	Port int
	// Java is the JVM. Default: the result of FindZooKeeper.
	Java string
	// HeapMB caps the JVM's heap. Default: 128, ample for a test cluster's
	// replication log and DDL queue.
	HeapMB int
	// DieWithParent: as in Options.
	DieWithParent bool
	// StartTimeout bounds the wait for it to serve. Default: 60s.
	StartTimeout time.Duration
}

// ZooKeeper is a standalone ZooKeeper server, the coordinator of a local
// cluster's replicas and of its distributed DDL.
type ZooKeeper struct {
	dir  string
	addr string
	pid  int

	done     chan struct{}
	exitErr  error
	stopOnce sync.Once
}

const zkConfig = `# Written by chserver.StartZooKeeper on every start.
tickTime=500
initLimit=10
syncLimit=5
dataDir=%s
clientPort=%d
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr
autopurge.snapRetainCount=3
autopurge.purgeInterval=1
`

// StartZooKeeper runs ZooKeeper on 127.0.0.1:o.Port with its data in
// o.Dir and returns once it serves clients. Data from a previous run in
// o.Dir is kept.
func StartZooKeeper(ctx context.Context, o ZooKeeperOptions) (*ZooKeeper, error) {
	if o.Dir == "" || o.Port == 0 {
		return nil, errors.New("zookeeper: Dir and Port are required")
	}
	if o.Java == "" {
		java, err := FindZooKeeper()
		if err != nil {
			return nil, err
		}
		o.Java = java
	}
	if o.HeapMB <= 0 {
		o.HeapMB = 128
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, zkDataDir), dirFileMode); err != nil {
		return nil, fmt.Errorf("zookeeper directory: %w", err)
	}
	z := &ZooKeeper{dir: dir, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(o.Port)), done: make(chan struct{})}
	if pid, ok := runningZooKeeper(dir); ok && serving(z.addr) == nil {
		// Left running by a previous start (a detached cluster): attach.
		z.pid = pid
		go func() {
			for alive(pid) {
				time.Sleep(100 * time.Millisecond)
			}
			close(z.done)
		}()
		return z, nil
	}
	if listening(z.addr) {
		return nil, &PortInUseError{Addr: z.addr, Hint: "choose another ZooKeeper port"}
	}
	if err := writeFile(filepath.Join(dir, zkConfigFile), fmt.Appendf(nil, zkConfig, filepath.Join(dir, zkDataDir), o.Port)); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(filepath.Join(dir, zkLog), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return nil, fmt.Errorf("zookeeper log: %w", err)
	}
	cmd := exec.Command(o.Java, "-Xmx"+strconv.Itoa(o.HeapMB)+"m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dzookeeper.log.dir="+dir, "-cp", ZooKeeperJar, zkMain, filepath.Join(dir, zkConfigFile))
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr(o.DieWithParent)
	started := make(chan error, 1)
	go func() {
		defer logf.Close()
		if o.DieWithParent {
			runtime.LockOSThread() // see Server.launch
		}
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		z.exitErr = cmd.Wait()
		close(z.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("run zookeeper: %w", err)
	}
	z.pid = cmd.Process.Pid
	if err := os.WriteFile(filepath.Join(dir, zkPIDFile), []byte(strconv.Itoa(z.pid)+"\n"), 0o640); err != nil {
		_ = z.Stop()
		return nil, fmt.Errorf("write zookeeper pid file: %w", err)
	}
	if err := z.waitReady(ctx, o.StartTimeout); err != nil {
		_ = z.Stop()
		return nil, fmt.Errorf("start zookeeper in %s: %w (its log: %s)", dir, err, filepath.Join(dir, zkLog))
	}
	return z, nil
}

func (z *ZooKeeper) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		if last = serving(z.addr); last == nil {
			return nil
		}
		select {
		case <-z.done:
			return fmt.Errorf("zookeeper exited before it answered: %v", z.exitErr)
		case <-ctx.Done():
			return fmt.Errorf("zookeeper did not answer within %s (last error: %v)", timeout, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// serving asks the server at addr whether it serves clients: "srvr"
// answers with its mode once it does ("ruok" answers imok before, while it
// still loads its data).
func serving(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("srvr")); err != nil {
		return err
	}
	b, err := io.ReadAll(c)
	if err != nil {
		return err
	}
	if !strings.Contains(string(b), "Mode: ") {
		return fmt.Errorf("srvr: answered %q", b)
	}
	return nil
}

// Addr returns the client address, host:port.
func (z *ZooKeeper) Addr() string { return z.addr }

// Stop ends ZooKeeper (SIGTERM, then SIGKILL after DefaultStopTimeout).
func (z *ZooKeeper) Stop() error {
	z.stopOnce.Do(func() {
		_ = syscall.Kill(-z.pid, syscall.SIGTERM)
		select {
		case <-z.done:
		case <-time.After(DefaultStopTimeout):
			_ = syscall.Kill(-z.pid, syscall.SIGKILL)
			<-z.done
		}
		_ = os.Remove(filepath.Join(z.dir, zkPIDFile))
	})
	return nil
}

// runningZooKeeper returns the pid of the ZooKeeper a previous start left
// running in dir, if any.
func runningZooKeeper(dir string) (int, bool) {
	pid, err := readPID(filepath.Join(dir, zkPIDFile))
	if err != nil || !alive(pid) {
		return 0, false
	}
	return pid, true
}

// stopZooKeeperDir stops the ZooKeeper a previous StartZooKeeper left
// running in dir, if any.
func stopZooKeeperDir(dir string) error {
	pid, ok := runningZooKeeper(dir)
	if !ok {
		_ = os.Remove(filepath.Join(dir, zkPIDFile))
		return nil
	}
	return stopPID(pid, filepath.Join(dir, zkPIDFile))
}

// stopPID sends SIGTERM to pid's group and waits for it to go, then
// SIGKILL after DefaultStopTimeout; it removes pidFile.
func stopPID(pid int, pidFile string) error {
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	deadline := time.Now().Add(DefaultStopTimeout)
	for alive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			deadline = time.Now().Add(DefaultStopTimeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = os.Remove(pidFile)
	return nil
}
