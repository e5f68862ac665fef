package chserver

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// EnvBinary names an environment variable that, when set, is the path of
// the server binary Find returns (either clickhouse-server or the
// multi-call clickhouse binary).
const EnvBinary = "DRIFTLINE_CLICKHOUSE_SERVER"

// searchDirs are searched after PATH: sbin is often missing from the PATH
// of non-root users, and Debian installs clickhouse-server there.
var searchDirs = []string{"/usr/sbin", "/usr/bin", "/usr/local/bin"}

// Binary is a ClickHouse server executable.
type Binary struct {
	// Path is the executable's absolute path.
	Path string
	// MultiCall is true for the single clickhouse binary of current
	// releases, which runs the server as "clickhouse server"; false for a
	// dedicated clickhouse-server executable (Debian's package, or the
	// clickhouse-server symlink of official packages).
	MultiCall bool
}

// Args returns the arguments that run the server with configFile.
func (b Binary) Args(configFile string) []string {
	args := []string{"--config-file=" + configFile}
	if b.MultiCall {
		args = append([]string{"server"}, args...)
	}
	return args
}

// Find locates the server binary: $DRIFTLINE_CLICKHOUSE_SERVER if set,
// else clickhouse-server, else the multi-call clickhouse, each looked up on
// PATH and then in /usr/sbin, /usr/bin and /usr/local/bin. The error when
// none is found wraps ErrNotFound and says how to install one.
func Find() (Binary, error) {
	if p := os.Getenv(EnvBinary); p != "" {
		abs, err := exec.LookPath(p)
		if err != nil {
			return Binary{}, fmt.Errorf("%s=%s: %w; Possible solutions: point it at clickhouse-server or clickhouse, or unset it", EnvBinary, p, err)
		}
		return binaryAt(abs), nil
	}
	for _, name := range []string{"clickhouse-server", "clickhouse"} {
		if p, err := exec.LookPath(name); err == nil {
			return binaryAt(p), nil
		}
		for _, dir := range searchDirs {
			p := filepath.Join(dir, name)
			if isExecutable(p) {
				return binaryAt(p), nil
			}
		}
	}
	return Binary{}, fmt.Errorf("%w on PATH or in %v; Possible solutions: install it as root with `%s` "+
		"(or install a current release from clickhouse.com), or set %s to its path",
		ErrNotFound, searchDirs, InstallHint, EnvBinary)
}

func binaryAt(p string) Binary {
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	return Binary{Path: p, MultiCall: filepath.Base(p) == "clickhouse"}
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// Install installs Debian's clickhouse-server package with apt-get,
// writing apt's output to log (nil discards it). It needs root; otherwise
// it returns an error wrapping ErrNotRoot that names the command to run.
func Install(ctx context.Context, log io.Writer) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w; Possible solutions: run `sudo sh -c '%s'`", ErrNotRoot, InstallHint)
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return fmt.Errorf("install clickhouse-server: apt-get not found; Possible solutions: install ClickHouse with your system's package manager or from clickhouse.com, then set %s if it is not on PATH", EnvBinary)
	}
	err := aptInstall(ctx, log, "clickhouse-server", "driftline-clickhouse-install.lock", InstallHint, func() error {
		_, err := Find()
		return err
	})
	if err != nil {
		return err
	}
	if _, err := Find(); err != nil {
		return fmt.Errorf("after installing clickhouse-server: %w", err)
	}
	return nil
}

// aptInstall installs Debian's package pkg with apt-get, writing apt's
// output to log (nil discards it), unless installed finds it once the
// machine-wide lock named lockFile is held: test binaries of several
// packages may find it missing at the same moment, and then one installs
// while the others wait and find it. hint is the command an operator can
// run by hand.
func aptInstall(ctx context.Context, log io.Writer, pkg, lockFile, hint string, installed func() error) error {
	if log == nil {
		log = io.Discard
	}
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), lockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("install %s: %w", pkg, err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("install %s: lock: %w", pkg, err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if installed() == nil {
		return nil // installed while we waited
	}
	for _, step := range []string{"update", "install"} {
		// Wait for another apt (unattended upgrades) rather than fail.
		args := []string{"-o", "DPkg::Lock::Timeout=600", step}
		if step == "install" {
			args = append(args, "-y", pkg)
		}
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("apt-get %s: %w; Possible solutions: run `%s` by hand and read its output", step, err, hint)
		}
	}
	return nil
}
