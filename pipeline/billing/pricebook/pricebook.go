// Package pricebook is the versioned usage-unit registry the rater prices
// usage with (CONTRACT 3.7): a JSON file
//
//	{"units": [{"unit_id": "gpu_hour", "version": 1, "precision": 2,
//	            "unit_price": "2.450000", "currency": "USD",
//	            "rating_category": "compute", "lifecycle": "active"}]}
//
// A file is validated as a whole and either replaces the book in use
// atomically or is refused, leaving the previous book in place: a typo in
// a reload never stops rating and never rates with half a book.
//
// Keys are matched exactly and each object names each key once. A key
// written twice, or beside a case variant of itself ("UNIT_PRICE"), would
// leave the price to whichever value a decoder keeps, so it refuses the
// file, as an unknown key (a case variant alone among them) does.
//
// A version is an integer in 1..MaxVersion (4294967295), the range of the
// unit_version column rated lines are stored in. Several versions of a
// unit may be listed. The highest version is the
// unit's current one; usage is rated at it when it is active, and is not
// rated at all (ErrRetiredUnit) when it is retired. At most one version of
// a unit may be active, so which price applies is never a guess.
package pricebook

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"math"
	"os"
	"reflect"
	"slices"
	"strings"

	json "github.com/segmentio/encoding/json"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/contract/decimal"
)

// Lifecycles of a unit version.
const (
	LifecycleActive  = "active"
	LifecycleRetired = "retired"
)

// MaxPrecision bounds a unit's precision (decimal places of a rated
// amount). Amounts are 64-bit fixed point, so at 9 places an amount can
// reach ±9.2 billion; no currency is billed in finer units.
const MaxPrecision = 9

// MaxIDLen bounds a unit_id, like the envelope's identifiers.
const MaxIDLen = 128

// MaxVersion bounds a unit's version. Every rated line names the version
// it was rated at (CONTRACT 3.7), and rated_usage keeps it as a UInt32:
// a higher version would be stored as another one, the name of another
// price.
const MaxVersion = math.MaxUint32

// FileUnit is one entry of the file, as written.
type FileUnit struct {
	UnitID         string `json:"unit_id"`
	Version        int64  `json:"version"`
	Precision      int    `json:"precision"`
	UnitPrice      string `json:"unit_price"`
	Currency       string `json:"currency"`
	RatingCategory string `json:"rating_category"`
	Lifecycle      string `json:"lifecycle"`
}

// File is the JSON shape of a price book file.
type File struct {
	Units []FileUnit `json:"units"`
}

// Unit is one validated unit version.
type Unit struct {
	UnitID         string
	Version        int64
	Precision      int
	UnitPrice      decimal.Dec
	UnitPriceText  string // unit_price as written in the file, for rated lines
	Currency       string
	RatingCategory string
	Lifecycle      string
}

// Book is one validated, immutable price book. It is safe for concurrent
// use.
type Book struct {
	current  map[string]*Unit // unit_id -> highest version
	versions map[string][]*Unit
	digest   string
}

// strict decodes as the contract's payload decoders do, and refuses
// unknown keys besides: a key must name its field exactly, so a case
// variant ("UNIT_PRICE") neither fills nor shadows the field, and a
// misspelt field must not silently default.
const strict = json.DontMatchCaseInsensitiveStructFields | json.DisallowUnknownFields

// Parse validates a price book file's contents. Each object in it must
// name each of its keys once and exactly: with a key twice, or beside a
// case variant of itself, which value is meant would be a guess, so the
// file is refused (the validator's duplicate_key, contract.Scan), as it
// is for an unknown key.
func Parse(data []byte) (*Book, error) {
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return nil, &InvalidError{Index: -1, Detail: "not a price book JSON object: the file does not hold a JSON object"}
	}
	var top struct {
		Units []json.RawMessage `json:"units"`
	}
	rest, err := json.Parse(data, &top, strict)
	if err != nil {
		return nil, &InvalidError{Index: -1, Detail: "not a price book JSON object: " + err.Error()}
	}
	if len(rest) != 0 {
		return nil, &InvalidError{Index: -1, Detail: "trailing data after the JSON object"}
	}
	f := File{Units: make([]FileUnit, len(top.Units))}
	for i, raw := range top.Units {
		if err := decodeUnit(i, raw, &f.Units[i]); err != nil {
			return nil, err
		}
	}
	// Every unit passed Scan already: what it finds here is in the
	// file's own object, such as "units" twice (the last list would win).
	if verr := contract.Scan(data); verr != nil {
		return nil, &InvalidError{Index: -1, Detail: verr.Detail}
	}
	b, err := FromFile(f)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	b.digest = hex.EncodeToString(sum[:8])
	return b, nil
}

// unitKeys are the keys of a unit, as FileUnit names them.
var unitKeys = func() []string {
	t := reflect.TypeFor[FileUnit]()
	keys := make([]string, t.NumField())
	for i := range keys {
		keys[i], _, _ = strings.Cut(t.Field(i).Tag.Get("json"), ",")
	}
	return keys
}()

// decodeUnit decodes units[i] of a file into fu. The unit must be one
// object naming each key of unitKeys at most once, exactly as written
// there, and no other key.
func decodeUnit(i int, raw []byte, fu *FileUnit) error {
	var named struct {
		UnitID string `json:"unit_id"`
	}
	_, _ = json.Parse(raw, &named, json.DontMatchCaseInsensitiveStructFields) // only to name the unit in an error
	bad := func(format string, args ...any) error {
		return &InvalidError{Index: i, UnitID: named.UnitID, Detail: fmt.Sprintf(format, args...)}
	}
	if len(raw) == 0 || raw[0] != '{' {
		return bad("not a JSON object")
	}
	if verr := contract.Scan(raw); verr != nil {
		hint := ""
		if verr.Reason == contract.ReasonDuplicateKey {
			hint = "; Possible solutions: state each key once, so the value used is the one meant"
		}
		return bad("%s, bytes counted from the unit's opening brace%s", verr.Detail, hint)
	}
	var keys map[string]json.RawMessage // faithful: Scan found no key twice
	if err := json.Unmarshal(raw, &keys); err != nil {
		return bad("%v", err)
	}
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if slices.Contains(unitKeys, k) {
			continue
		}
		for _, known := range unitKeys {
			if strings.EqualFold(k, known) {
				return bad("key %q is a case variant of %q: keys are matched exactly; Possible solutions: write it %q, once", k, known, known)
			}
		}
		return bad("unknown key %q; Possible solutions: use only %s", k, strings.Join(unitKeys, ", "))
	}
	if _, err := json.Parse(raw, fu, strict); err != nil {
		return bad("%v", err)
	}
	return nil
}

// Load reads and validates the price book file at path.
func Load(path string) (*Book, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read price book: %w", err)
	}
	return Parse(data)
}

// FromFile validates an already decoded file.
func FromFile(f File) (*Book, error) {
	if len(f.Units) == 0 {
		return nil, &InvalidError{Index: -1, Detail: `no units; Possible solutions: list at least one unit under "units"`}
	}
	b := &Book{current: map[string]*Unit{}, versions: map[string][]*Unit{}}
	active := map[string]int64{}
	for i, fu := range f.Units {
		u, err := validate(i, fu)
		if err != nil {
			return nil, err
		}
		for _, other := range b.versions[u.UnitID] {
			if other.Version == u.Version {
				return nil, &InvalidError{Index: i, UnitID: u.UnitID, Field: "version", Detail: fmt.Sprintf("version %d is listed twice", u.Version)}
			}
		}
		if u.Lifecycle == LifecycleActive {
			if v, ok := active[u.UnitID]; ok {
				return nil, &InvalidError{Index: i, UnitID: u.UnitID, Field: "lifecycle", Detail: fmt.Sprintf("versions %d and %d are both active; Possible solutions: retire the older version", v, u.Version)}
			}
			active[u.UnitID] = u.Version
		}
		b.versions[u.UnitID] = append(b.versions[u.UnitID], u)
		if cur := b.current[u.UnitID]; cur == nil || u.Version > cur.Version {
			b.current[u.UnitID] = u
		}
	}
	return b, nil
}

func validate(i int, fu FileUnit) (*Unit, error) {
	bad := func(field, format string, args ...any) error {
		return &InvalidError{Index: i, UnitID: fu.UnitID, Field: field, Detail: fmt.Sprintf(format, args...)}
	}
	if fu.UnitID == "" || len(fu.UnitID) > MaxIDLen {
		return nil, bad("unit_id", "must be 1..%d bytes", MaxIDLen)
	}
	if fu.Version < 1 || fu.Version > MaxVersion {
		return nil, bad("version", "%d is outside 1..%d (rated_usage keeps unit_version as a UInt32)", fu.Version, int64(MaxVersion))
	}
	if fu.Precision < 0 || fu.Precision > MaxPrecision {
		return nil, bad("precision", "%d is outside 0..%d", fu.Precision, MaxPrecision)
	}
	price, err := decimal.Parse(fu.UnitPrice)
	if err != nil {
		return nil, bad("unit_price", "%q is not a decimal string (%v)", fu.UnitPrice, err)
	}
	if price.Sign() < 0 {
		return nil, bad("unit_price", "%q is negative", fu.UnitPrice)
	}
	if !validCurrency(fu.Currency) {
		return nil, bad("currency", "%q is not an ISO 4217 code (three upper-case letters)", fu.Currency)
	}
	if fu.RatingCategory == "" {
		return nil, bad("rating_category", "required")
	}
	if fu.Lifecycle != LifecycleActive && fu.Lifecycle != LifecycleRetired {
		return nil, bad("lifecycle", "%q is not active or retired", fu.Lifecycle)
	}
	return &Unit{
		UnitID:         fu.UnitID,
		Version:        fu.Version,
		Precision:      fu.Precision,
		UnitPrice:      price,
		UnitPriceText:  fu.UnitPrice,
		Currency:       fu.Currency,
		RatingCategory: fu.RatingCategory,
		Lifecycle:      fu.Lifecycle,
	}, nil
}

// validCurrency reports whether c has the shape of an ISO 4217 code.
func validCurrency(c string) bool {
	if len(c) != 3 {
		return false
	}
	for i := 0; i < 3; i++ {
		if c[i] < 'A' || c[i] > 'Z' {
			return false
		}
	}
	return true
}

// Lookup returns the unit version usage of unitID is rated at: the current
// (highest) version, which is active. It returns ErrUnknownUnit or
// ErrRetiredUnit (with the retired version) otherwise. It does not
// allocate, also when called as b.Lookup(string(bytes)).
func (b *Book) Lookup(unitID string) (*Unit, error) {
	u := b.current[unitID]
	if u == nil {
		return nil, ErrUnknownUnit
	}
	if u.Lifecycle != LifecycleActive {
		return u, ErrRetiredUnit
	}
	return u, nil
}

// Version returns one listed version of a unit, active or retired, or nil.
func (b *Book) Version(unitID string, version int64) *Unit {
	for _, u := range b.versions[unitID] {
		if u.Version == version {
			return u
		}
	}
	return nil
}

// Units returns the number of distinct unit ids.
func (b *Book) Units() int { return len(b.current) }

// Digest identifies the file contents the book was parsed from (a prefix
// of its SHA-256), for logs and metrics; "" for books built by FromFile.
func (b *Book) Digest() string { return b.digest }
