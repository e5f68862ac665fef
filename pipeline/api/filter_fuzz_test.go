package api

import (
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// FuzzParseFilter feeds arbitrary query strings to the parameter parsers:
// they must not panic, must refuse with a *ParamError only, and an
// accepted filter holds only non-empty values, the enumerated ones
// allowed. (reader.FuzzWhere checks that the SQL binds every value.)
func FuzzParseFilter(f *testing.F) {
	for _, s := range []string{
		"", "status=all", "severity=critical,warning&classification=identity_mismatch",
		"product=a'b&owning_domain=x%3Fy", "age=15m&limit=10&cursor=ZTE6YQ", "cursor=%%", "limit=-1",
		"product_id=p&product=q", "status=open&status=resolved",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		flt, err := parseFilter(q, time.Unix(1e9, 0), "limit", "cursor")
		if err != nil {
			if _, ok := err.(*ParamError); !ok {
				t.Fatalf("%q: error %T %v", raw, err, err)
			}
			return
		}
		_, _ = parseLimit(q)
		_, _ = parseCursor(q)
		for _, p := range driftParams(&flt) {
			for _, v := range *p.dst {
				if v == "" || v != strings.TrimSpace(v) || strings.Contains(v, ",") {
					t.Fatalf("%q: %s value %q", raw, p.name, v)
				}
				if p.allowed != nil && !slices.Contains(p.allowed, v) {
					t.Fatalf("%q: %s value %q not allowed", raw, p.name, v)
				}
			}
		}
		if !slices.Contains(statusValues, flt.Status) {
			t.Fatalf("%q: status %q", raw, flt.Status)
		}
	})
}

func TestCursorRoundTrip(t *testing.T) {
	for _, id := range []string{"missing_provider_resource:maas/n1", "x", "ünïcode:a/b?c&d"} {
		got, err := parseCursor(url.Values{"cursor": {encodeCursor(id)}})
		if err != nil || got != id {
			t.Errorf("%q: %q %v", id, got, err)
		}
	}
}
