package deploy_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// invocation is one container command the deployment files run.
type invocation struct {
	where string   // file and service or workload
	bin   string   // the binary
	args  []string // its arguments
}

// image is the name of the image deploy/Dockerfile builds in the files.
const image = "driftline:dev"

func TestDeployFiles(t *testing.T) {
	built := dockerfileBinaries(t)
	var runs []invocation
	envs := map[string][]string{} // DRIFTLINE_ variable -> where it is set

	for _, f := range []string{"compose/docker-compose.yml", "redpanda/docker-compose.yml"} {
		var doc struct {
			Services map[string]struct {
				Image       string         `yaml:"image"`
				Command     any            `yaml:"command"`
				Entrypoint  any            `yaml:"entrypoint"`
				Environment map[string]any `yaml:"environment"`
			} `yaml:"services"`
		}
		decodeAll(t, f, func(d *yaml.Decoder) error { return d.Decode(&doc) })
		if len(doc.Services) == 0 {
			t.Errorf("%s: no services", f)
		}
		for name, s := range doc.Services {
			for k := range s.Environment {
				envs[k] = append(envs[k], f+" "+name)
			}
			if s.Image != image {
				continue
			}
			if s.Entrypoint != nil {
				t.Errorf("%s %s: the image has no entry point; name the binary in command", f, name)
			}
			cmd := stringList(t, f+" "+name, s.Command)
			if len(cmd) == 0 {
				t.Errorf("%s %s: no command", f, name)
				continue
			}
			runs = append(runs, invocation{f + " " + name, cmd[0], cmd[1:]})
		}
	}

	manifests, _ := filepath.Glob("kubernetes/*.yaml")
	if len(manifests) == 0 {
		t.Fatal("no Kubernetes manifests")
	}
	for _, f := range manifests {
		decodeAll(t, f, func(d *yaml.Decoder) error {
			var obj struct {
				APIVersion string `yaml:"apiVersion"`
				Kind       string `yaml:"kind"`
				Metadata   struct {
					Name string `yaml:"name"`
				} `yaml:"metadata"`
				Data map[string]string `yaml:"data"`
				Spec struct {
					Template struct {
						Spec struct {
							Containers []struct {
								Image   string   `yaml:"image"`
								Command []string `yaml:"command"`
								Args    []string `yaml:"args"`
								Env     []struct {
									Name string `yaml:"name"`
								} `yaml:"env"`
							} `yaml:"containers"`
						} `yaml:"spec"`
					} `yaml:"template"`
				} `yaml:"spec"`
			}
			if err := d.Decode(&obj); err != nil {
				return err
			}
			where := f + " " + obj.Kind + "/" + obj.Metadata.Name
			if obj.APIVersion == "" || obj.Kind == "" || obj.Metadata.Name == "" {
				t.Errorf("%s: apiVersion, kind and metadata.name are required", where)
			}
			if obj.Kind == "ConfigMap" {
				for k := range obj.Data {
					envs[k] = append(envs[k], where)
				}
			}
			for _, c := range obj.Spec.Template.Spec.Containers {
				for _, e := range c.Env {
					envs[e.Name] = append(envs[e.Name], where)
				}
				if c.Image != image {
					continue
				}
				if len(c.Command) != 1 {
					t.Errorf("%s: command must name one binary, got %q", where, c.Command)
					continue
				}
				runs = append(runs, invocation{where, c.Command[0], c.Args})
			}
			return nil
		})
	}
	if len(runs) == 0 {
		t.Fatal("no container runs a Driftline binary")
	}

	// Every binary run is a command of cmd/ the image builds, and every
	// flag passed is one it has.
	flags := map[string]map[string]bool{}
	binDir := t.TempDir()
	for _, r := range runs {
		if _, err := os.Stat(filepath.Join("..", "cmd", r.bin, "main.go")); err != nil {
			t.Errorf("%s: %q is not a command of cmd/", r.where, r.bin)
			continue
		}
		if !built[r.bin] {
			t.Errorf("%s: the image does not build %q (deploy/Dockerfile)", r.where, r.bin)
		}
		if flags[r.bin] == nil {
			flags[r.bin] = binaryFlags(t, binDir, r.bin)
		}
		for _, name := range flagNames(r.args) {
			if !flags[r.bin][name] {
				t.Errorf("%s: %s has no flag -%s", r.where, r.bin, name)
			}
		}
	}

	// Every DRIFTLINE_ variable set is read by the code.
	source := goSource(t)
	for name, where := range envs {
		if strings.HasPrefix(name, "DRIFTLINE_") && !bytes.Contains(source, []byte(`"`+name+`"`)) {
			t.Errorf("%v: %s is not a variable the code reads", where, name)
		}
	}
}

// decodeAll decodes every document of the YAML file f with decode.
func decodeAll(t *testing.T, f string, decode func(*yaml.Decoder) error) {
	t.Helper()
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	d := yaml.NewDecoder(bytes.NewReader(b))
	for {
		if err := decode(d); errors.Is(err, io.EOF) {
			return
		} else if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
}

// stringList returns a compose command: a list, or a string split at
// spaces as compose splits it.
func stringList(t *testing.T, where string, v any) []string {
	switch v := v.(type) {
	case nil:
		return nil
	case string:
		return strings.Fields(v)
	case []any:
		out := make([]string, len(v))
		for i, e := range v {
			s, ok := e.(string)
			if !ok {
				t.Errorf("%s: command element %v is not a string", where, e)
			}
			out[i] = s
		}
		return out
	}
	t.Errorf("%s: command %v is neither a string nor a list", where, v)
	return nil
}

// flagNames returns the names of the flags in args ("-a=b" or "-a b";
// values never start with "-" in these files).
func flagNames(args []string) []string {
	var out []string
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name := strings.TrimLeft(a, "-")
		name, _, _ = strings.Cut(name, "=")
		out = append(out, name)
	}
	return out
}

var helpFlag = regexp.MustCompile(`(?m)^  -([A-Za-z0-9_.\-]+)`)

// binaryFlags builds cmd/bin and returns the flags its -h lists.
func binaryFlags(t *testing.T, dir, bin string) map[string]bool {
	t.Helper()
	out := filepath.Join(dir, bin)
	build := exec.Command("go", "build", "-o", out, "../cmd/"+bin)
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", bin, err, b)
	}
	// -h exits non-zero after printing the flags; the list is what counts.
	help, _ := exec.Command(out, "-h").CombinedOutput()
	names := map[string]bool{}
	for _, m := range helpFlag.FindAllSubmatch(help, -1) {
		names[string(m[1])] = true
	}
	if len(names) < 5 {
		t.Fatalf("%s -h lists %d flags:\n%s", bin, len(names), help)
	}
	return names
}

// dockerfileBinaries returns the commands deploy/Dockerfile builds, and
// checks that its final stage leaves the binary to the command.
func dockerfileBinaries(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	built := map[string]bool{}
	for _, m := range regexp.MustCompile(`\./cmd/([a-z]+)`).FindAllStringSubmatch(src, -1) {
		if _, err := os.Stat(filepath.Join("..", "cmd", m[1], "main.go")); err != nil {
			t.Errorf("Dockerfile builds ./cmd/%s, which does not exist", m[1])
		}
		built[m[1]] = true
	}
	if len(built) == 0 {
		t.Fatal("Dockerfile builds no command")
	}
	final := src[strings.LastIndex(src, "\nFROM "):]
	if strings.Contains(final, "\nENTRYPOINT") {
		t.Error("Dockerfile: the final stage sets an ENTRYPOINT; the command names the binary")
	}
	if m := regexp.MustCompile(`\nCMD \["([a-z]+)"`).FindStringSubmatch(final); m == nil || !built[m[1]] {
		t.Errorf("Dockerfile: the default CMD must run a binary the image builds (%v)", m)
	}
	if !slices.Contains(strings.Fields(final), "/usr/local/bin/") {
		t.Error("Dockerfile: the binaries are not copied to /usr/local/bin/")
	}
	return built
}

// goSource returns the non-test Go source of cmd/ and pipeline/.
func goSource(t *testing.T) []byte {
	t.Helper()
	var all []byte
	for _, root := range []string{"../cmd", "../pipeline"} {
		err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			b, err := os.ReadFile(p)
			all = append(all, b...)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return all
}
