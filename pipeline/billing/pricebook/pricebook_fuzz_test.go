package pricebook

import (
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"
)

// FuzzParse feeds arbitrary price book files to Parse: no panic; in a book
// it accepts every unit id looks up to its highest version, active or
// ErrRetiredUnit, every version is found by Version, and the book written
// back as a file parses to the same units.
func FuzzParse(f *testing.F) {
	f.Add([]byte(book(gpu)))
	f.Add([]byte(book(gpu,
		`{"unit_id":"gpu_hour","version":2,"precision":0,"unit_price":"3","currency":"USD","rating_category":"compute","lifecycle":"retired"}`,
		`{"unit_id":"tokens_1k","version":1,"precision":6,"unit_price":"0.002000","currency":"EUR","rating_category":"ai","lifecycle":"active"}`)))
	f.Add([]byte(`{"units":[]}`))
	f.Add([]byte(`{"units":[{"unit_id":"x","version":1,"unit_price":"1.0000000000000000001","currency":"USD","rating_category":"c","lifecycle":"active"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := Parse(data)
		if err != nil {
			var inv *InvalidError
			if !errors.As(err, &inv) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v is no *InvalidError", err)
			}
			return
		}
		if b.Units() == 0 || b.Digest() == "" {
			t.Fatalf("%d units, digest %q", b.Units(), b.Digest())
		}
		var file File
		for id, versions := range b.versions {
			cur, err := b.Lookup(id)
			if cur == nil || cur != b.current[id] || (err != nil) != (cur.Lifecycle == LifecycleRetired) ||
				(err != nil && !errors.Is(err, ErrRetiredUnit)) {
				t.Fatalf("Lookup(%q) = %+v, %v", id, cur, err)
			}
			for _, u := range versions {
				if u.Version > cur.Version || b.Version(id, u.Version) != u {
					t.Fatalf("%q version %d: current %d, Version found %+v", id, u.Version, cur.Version, b.Version(id, u.Version))
				}
				file.Units = append(file.Units, FileUnit{UnitID: u.UnitID, Version: u.Version, Precision: u.Precision,
					UnitPrice: u.UnitPriceText, Currency: u.Currency, RatingCategory: u.RatingCategory, Lifecycle: u.Lifecycle})
			}
		}
		if !utf8.Valid(data) {
			return // JSON encoding replaces invalid UTF-8, so ids may merge
		}
		raw, err := json.Marshal(file)
		if err != nil {
			t.Fatal(err)
		}
		again, err := Parse(raw)
		if err != nil {
			t.Fatalf("the book written back does not parse: %v\n%s", err, raw)
		}
		if again.Units() != b.Units() {
			t.Fatalf("written back: %d units, want %d", again.Units(), b.Units())
		}
		for id, cur := range b.current {
			u := again.current[id]
			if u == nil || u.Version != cur.Version || u.UnitPrice != cur.UnitPrice || u.UnitPriceText != cur.UnitPriceText {
				t.Fatalf("written back, %q is %+v, want %+v", id, u, cur)
			}
		}
	})
}
