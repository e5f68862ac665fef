package deploy_test

// The Prometheus alert rules parse and name only metrics the pipeline
// exports.

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

const rules = "prometheus/alerts.yml"

// promtool returns the path of promtool, installing Debian's prometheus
// package (which ships it) when it is missing and the test runs as root,
// as the local stack installs clickhouse-server.
func promtool(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	if _, err := exec.LookPath("apt-get"); err != nil || os.Geteuid() != 0 {
		t.Fatal("promtool not found; Possible solutions: apt-get install prometheus (it ships promtool), or put promtool on PATH")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, args := range [][]string{{"update"}, {"install", "-y", "--no-install-recommends", "prometheus"}} {
		cmd := exec.CommandContext(ctx, "apt-get", append([]string{"-o", "DPkg::Lock::Timeout=600"}, args...)...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("apt-get %s: %v\n%s", args[0], err, out)
		}
	}
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool still not found after installing prometheus: %v", err)
	}
	return p
}

// TestAlertRules runs promtool check rules over the alert rules.
func TestAlertRules(t *testing.T) {
	out, err := exec.Command(promtool(t), "check", "rules", rules).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules %s: %v\n%s", rules, err, out)
	}
	if !bytes.Contains(out, []byte("SUCCESS")) {
		t.Fatalf("promtool check rules %s:\n%s", rules, out)
	}
}

// TestAlertRulesNameExportedMetrics: every driftline_ metric a rule reads
// is registered somewhere in the pipeline (a renamed metric would leave a
// rule that never fires).
func TestAlertRulesNameExportedMetrics(t *testing.T) {
	b, err := os.ReadFile(rules)
	if err != nil {
		t.Fatal(err)
	}
	var src strings.Builder
	err = filepath.WalkDir("../pipeline", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		s, err := os.ReadFile(path)
		src.Write(s)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	code := src.String()
	for _, m := range regexp.MustCompile(`driftline_[a-z_]+`).FindAllString(string(b), -1) {
		if strings.Contains(code, `"`+m+`"`) {
			continue
		}
		// Stage metrics are named by prefix (stream.NewStageMetrics).
		if name, ok := strings.CutPrefix(m, "driftline_joiner_"); ok && strings.Contains(code, `p + "`+name+`"`) {
			continue
		}
		t.Errorf("%s reads %s, which no package registers", rules, m)
	}
}
