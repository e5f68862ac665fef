package chserver

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// tailLines is how many lines of each log a StartError carries.
const tailLines = 30

// logFiles remembers where this run's output starts in each log, so that
// a failed start shows its own lines, not a previous run's.
type logFiles struct {
	console *os.File
	files   []string // console, error log
	offsets []int64
}

func openLogs(dir string) (*logFiles, error) {
	l := &logFiles{files: []string{
		filepath.Join(dir, logDir, consoleLog),
		filepath.Join(dir, logDir, errorLog),
	}}
	for _, f := range l.files {
		var off int64
		if fi, err := os.Stat(f); err == nil {
			off = fi.Size()
		}
		l.offsets = append(l.offsets, off)
	}
	f, err := os.OpenFile(l.files[0], os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return nil, fmt.Errorf("open server console log: %w", err)
	}
	l.console = f
	return l, nil
}

// tail returns the last lines this run wrote to each log.
func (l *logFiles) tail() string {
	var out bytes.Buffer
	for i, name := range l.files {
		lines := tailOf(name, l.offsets[i], tailLines)
		if len(lines) == 0 {
			continue
		}
		fmt.Fprintf(&out, "==> %s <==\n%s\n", name, lines)
	}
	return string(bytes.TrimRight(out.Bytes(), "\n"))
}

func tailOf(name string, from int64, n int) []byte {
	f, err := os.Open(name)
	if err != nil {
		return nil
	}
	defer f.Close()
	const maxTail = 64 << 10
	if fi, err := f.Stat(); err == nil && fi.Size() < from {
		from = 0 // rotated since
	} else if err == nil && fi.Size()-from > maxTail {
		from = fi.Size() - maxTail
	}
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return nil
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return nil
	}
	b = bytes.TrimRight(b, "\n")
	for i, cut := len(b)-1, 0; i >= 0; i-- {
		if b[i] == '\n' {
			if cut++; cut == n {
				return b[i+1:]
			}
		}
	}
	return b
}
