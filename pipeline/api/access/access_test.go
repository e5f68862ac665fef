package access

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/contract/keys"
)

func TestRolesAndAuthority(t *testing.T) {
	for _, tc := range []struct {
		roles, levels []string
		has           []string // roles Has reports
		acts          []string // authority levels AllowsAuthority admits
	}{
		{[]string{contract.RoleAdmin}, nil, contract.Roles, contract.AuthorityLevels},
		{[]string{contract.RoleViewer}, nil, []string{contract.RoleViewer}, nil},
		{[]string{contract.RoleOperator}, nil, []string{contract.RoleOperator, contract.RoleViewer}, contract.AuthorityLevels},
		{[]string{contract.RoleOperator}, []string{contract.AuthorityLocal}, []string{contract.RoleOperator, contract.RoleViewer}, []string{contract.AuthorityLocal}},
		{[]string{contract.RoleFinance}, nil, []string{contract.RoleFinance}, nil},
		{[]string{contract.RoleAuditor}, nil, []string{contract.RoleAuditor}, nil},
		{nil, nil, nil, nil},
	} {
		p := Principal{Roles: tc.roles, AuthorityLevels: tc.levels}
		for _, r := range contract.Roles {
			if got := p.Has(r); got != slices.Contains(tc.has, r) {
				t.Errorf("%v Has(%s) = %v", tc.roles, r, got)
			}
		}
		for _, l := range contract.AuthorityLevels {
			if got := AllowsAuthority(p, l); got != slices.Contains(tc.acts, l) {
				t.Errorf("%v %v AllowsAuthority(%s) = %v", tc.roles, tc.levels, l, got)
			}
		}
	}
	if _, ok := (Principal{Roles: []string{contract.RoleAdmin, contract.RoleFinance}, TenantIDs: []string{"t"}}).TenantScope(); ok {
		t.Error("admin is tenant-scoped")
	}
	if s, ok := (Principal{Roles: []string{contract.RoleFinance}, TenantIDs: []string{"t"}}).TenantScope(); !ok || !slices.Equal(s, []string{"t"}) {
		t.Error("scoped finance is not scoped")
	}
}

// Every route names known roles, and an unknown endpoint is admin's.
func TestRoutes(t *testing.T) {
	for name, r := range Routes {
		for _, role := range r.Roles {
			if !slices.Contains(contract.Roles, role) {
				t.Errorf("%s needs unknown role %q", name, role)
			}
		}
	}
	if Allowed(Principal{Roles: []string{contract.RoleViewer}}, "something_new") ||
		!Allowed(Principal{Roles: []string{contract.RoleAdmin}}, "something_new") {
		t.Error("an unknown endpoint is not admin's alone")
	}
}

func TestBearerKey(t *testing.T) {
	for _, tc := range []struct {
		in, key string
		err     error
	}{
		{"", "", keys.ErrMissingKey},
		{"Bearer abc", "abc", nil},
		{"bearer abc", "abc", nil},
		{"Basic abc", "", ErrMalformedAuth},
		{"Bearer", "", ErrMalformedAuth},
		{"Bearer ", "", ErrMalformedAuth},
		{"Bearer a b", "", ErrMalformedAuth},
		{"Bearer " + strings.Repeat("k", maxKeyLen+1), "", ErrMalformedAuth},
	} {
		key, err := BearerKey(tc.in)
		if key != tc.key || !errors.Is(err, tc.err) {
			t.Errorf("BearerKey(%.20q) = %q, %v; want %q, %v", tc.in, key, err, tc.key, tc.err)
		}
	}
}

// FuzzAuthenticate feeds arbitrary Authorization headers and keys files
// to the guard: no panic; a principal is returned without error only for
// a key the file lists, unrevoked, with the file's actor and roles.
func FuzzAuthenticate(f *testing.F) {
	file := `{"keys":[
		{"sha256":"` + keys.HashKey("live") + `","actor_id":"HUMAN::ana","source_type":"HUMAN","roles":["finance"],"tenant_ids":["t1"]},
		{"sha256":"` + keys.HashKey("old") + `","actor_id":"HUMAN::old","source_type":"HUMAN","roles":["admin"],"revoked":true},
		{"sha256":"` + keys.HashKey("gw") + `","actor_id":"SYSTEM::gw","source_type":"SYSTEM","event_types":["usage.recorded"]}]}`
	for _, h := range []string{"Bearer live", "Bearer old", "Bearer gw", "bearer live", "Bearer  live", "", "Basic bGl2ZQ==", "Bearer live\x00"} {
		f.Add(h, []byte(file))
	}
	f.Add("Bearer x", []byte(`{"keys":[{"sha256":"`+keys.HashKey("x")+`","actor_id":"HUMAN::x","source_type":"HUMAN","roles":["operator"],"authority_levels":["LOCAL","GLOBAL"]}]}`))
	f.Fuzz(func(t *testing.T, header string, data []byte) {
		kr, err := keys.ParseKeyring(data)
		if err != nil {
			return
		}
		g, err := NewGuard(GuardOptions{Environment: contract.EnvLocalParity, LocalKey: "local"}, kr)
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest("GET", "/v1/drift", nil)
		r.Header["Authorization"] = []string{header}
		p, err := g.Authenticate(r)
		if p.PolicyRev != g.PolicyRev() {
			t.Fatalf("policy rev %q, want %q", p.PolicyRev, g.PolicyRev())
		}
		if err != nil {
			return
		}
		key, kerr := BearerKey(header)
		if kerr != nil {
			t.Fatalf("authenticated %q although BearerKey refuses it: %v", header, kerr)
		}
		var spec *keys.KeySpec
		for i, s := range kr.Specs() {
			if s.SHA256 == keys.HashKey(key) {
				spec = &kr.Specs()[i]
			}
		}
		if spec == nil || spec.Revoked || spec.ActorID != p.ActorID || !slices.Equal(spec.Roles, p.Roles) ||
			!slices.Equal(spec.TenantIDs, p.TenantIDs) || !slices.Equal(spec.AuthorityLevels, p.AuthorityLevels) {
			t.Fatalf("header %q authenticated as %+v; file entry %+v", header, p, spec)
		}
	})
}

// TestWatchReloads: a change of the keys file, or SIGHUP, puts the new
// keys in force under a new revision; a file that does not parse leaves
// the old policy in force.
func TestWatchReloads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.json")
	write := func(revoked bool) {
		t.Helper()
		doc := `{"keys":[{"sha256":"` + keys.HashKey("k") + `","actor_id":"HUMAN::k","source_type":"HUMAN","roles":["viewer"],"revoked":` + strconv.FormatBool(revoked) + `}]}`
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(false)
	kr, err := keys.LoadKeyring(path)
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewGuard(GuardOptions{Environment: contract.EnvDev, LocalKey: "local", Logger: slog.New(slog.DiscardHandler)}, kr)
	if err != nil {
		t.Fatal(err)
	}
	rev0 := g.PolicyRev()
	auth := func() error {
		r := httptest.NewRequest("GET", "/v1/drift", nil)
		r.Header.Set("Authorization", "Bearer k")
		_, err := g.Authenticate(r)
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	hup := make(chan os.Signal, 1)
	done := make(chan struct{})
	go func() { defer close(done); g.Watch(ctx, path, 10*time.Millisecond, hup) }()
	defer func() { cancel(); <-done }()
	wait := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal(what)
			}
		}
	}
	time.Sleep(50 * time.Millisecond) // Watch has read the file it starts from
	write(true)
	wait("the revocation was not picked up", func() bool { return errors.Is(auth(), keys.ErrRevokedKey) })
	rev1 := g.PolicyRev()
	if rev1 == rev0 {
		t.Fatal("a revocation kept the policy revision")
	}
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	hup <- syscall.SIGHUP
	time.Sleep(50 * time.Millisecond)
	if g.PolicyRev() != rev1 || !errors.Is(auth(), keys.ErrRevokedKey) {
		t.Fatal("a broken file changed the policy")
	}
	write(false)
	hup <- syscall.SIGHUP
	wait("SIGHUP did not reload", func() bool { return auth() == nil })
	if g.PolicyRev() != rev0 {
		t.Errorf("the same keys again: revision %s, want %s", g.PolicyRev(), rev0)
	}
}

// BenchmarkAuthenticate is the per-request cost of access control before
// the handler: header, digest, lookup, principal.
func BenchmarkAuthenticate(b *testing.B) {
	var specs []keys.KeySpec
	for i := range 1000 {
		specs = append(specs, keys.KeySpec{SHA256: keys.HashKey("key-" + strconv.Itoa(i)), Grant: keys.Grant{
			ActorID: "HUMAN::u" + strconv.Itoa(i), SourceType: "HUMAN", Roles: []string{contract.RoleViewer}}})
	}
	kr, err := keys.NewKeyring(specs)
	if err != nil {
		b.Fatal(err)
	}
	g, err := NewGuard(GuardOptions{Environment: contract.EnvLocalParity, LocalKey: "local"}, kr)
	if err != nil {
		b.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/v1/drift", nil)
	r.Header.Set("Authorization", "Bearer key-500")
	b.ReportAllocs()
	for b.Loop() {
		p, err := g.Authenticate(r)
		if err != nil || !Allowed(p, "drift") {
			b.Fatal(p, err)
		}
	}
}
