package chserver

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/driftline/driftline/internal/debpkg"
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
// Installs of every package and process run one at a time (debpkg).
func Install(ctx context.Context, log io.Writer) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w; Possible solutions: run `sudo sh -c '%s'`", ErrNotRoot, InstallHint)
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return fmt.Errorf("install clickhouse-server: apt-get not found; Possible solutions: install ClickHouse with your system's package manager or from clickhouse.com, then set %s if it is not on PATH", EnvBinary)
	}
	err := debpkg.Install(ctx, log, "clickhouse-server", InstallHint, func() error {
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
