package keys

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/driftline/driftline/pipeline/contract"
)

func TestRolesAndScopes(t *testing.T) {
	base := KeySpec{SHA256: HashKey("k"), Grant: Grant{ActorID: "HUMAN::ana", SourceType: contract.SourceHuman}}
	for _, tc := range []struct {
		name string
		edit func(*KeySpec)
		want string // "" accepted
	}{
		{"neither types nor roles", func(s *KeySpec) {}, "event_types is empty"},
		{"roles only", func(s *KeySpec) { s.Roles = []string{contract.RoleViewer} }, ""},
		{"unknown role", func(s *KeySpec) { s.Roles = []string{"root"} }, "role \"root\" is unknown"},
		{"tenants without finance", func(s *KeySpec) { s.Roles, s.TenantIDs = []string{contract.RoleViewer}, []string{"t1"} }, "finance role"},
		{"empty tenant", func(s *KeySpec) { s.Roles, s.TenantIDs = []string{contract.RoleFinance}, []string{""} }, "empty tenant"},
		{"finance scoped", func(s *KeySpec) {
			s.Roles, s.TenantIDs = []string{contract.RoleFinance, contract.RoleFinance}, []string{"t2", "t1", "t2"}
		}, ""},
		{"levels without operator", func(s *KeySpec) { s.Roles, s.AuthorityLevels = []string{contract.RoleViewer}, []string{"LOCAL"} }, "operator role"},
		{"unknown level", func(s *KeySpec) { s.Roles, s.AuthorityLevels = []string{contract.RoleOperator}, []string{"local"} }, "unknown"},
		{"operator scoped", func(s *KeySpec) {
			s.Roles, s.AuthorityLevels = []string{contract.RoleOperator}, []string{contract.AuthorityLocal}
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := base
			tc.edit(&s)
			kr, err := NewKeyring([]KeySpec{s})
			if tc.want != "" {
				var kfe *KeyFileError
				if !errors.As(err, &kfe) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("err = %v, want KeyFileError containing %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p, err := kr.Authenticate("k")
			if err != nil {
				t.Fatal(err)
			}
			if !slices.IsSorted(p.TenantIDs) || len(slices.Compact(slices.Clone(p.TenantIDs))) != len(p.TenantIDs) ||
				!slices.Equal(p.Roles, slices.Compact(slices.Clone(p.Roles))) {
				t.Fatalf("principal lists not normalised: %+v", p)
			}
			if p.MayType(contract.TypePlatformRecord) {
				t.Fatal("a key without event types may send")
			}
		})
	}
}

func TestLocalKeyIsAdminOnlyInLocalParity(t *testing.T) {
	kr, err := OpenKeyring(contract.EnvLocalParity, "", "local")
	if err != nil {
		t.Fatal(err)
	}
	p, err := kr.Authenticate("local")
	if err != nil || !slices.Equal(p.Roles, []string{contract.RoleAdmin}) {
		t.Fatalf("local key: %+v, %v", p, err)
	}
	for _, env := range []string{contract.EnvDev, contract.EnvProd} {
		if _, err := OpenKeyring(env, "", "local"); !errors.Is(err, ErrNoKeysFile) {
			t.Fatalf("%s without keys file: %v", env, err)
		}
		if err := CheckEnvironment(env, "local", kr); !errors.Is(err, ErrLocalKeyOutsideLocal) {
			t.Fatalf("%s with the local key: %v", env, err)
		}
	}
}
