package pricebook

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const gpu = `{"unit_id":"gpu_hour","version":1,"precision":2,"unit_price":"2.450000","currency":"USD","rating_category":"compute","lifecycle":"active"}`

func book(units ...string) string { return `{"units":[` + strings.Join(units, ",") + `]}` }

func TestDeployPriceBook(t *testing.T) {
	b, err := Load(filepath.Join("..", "..", "..", "deploy", "pricebook.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"gpu_hour": "2.450000", "app_vcpu_hour": "0.042500", "storage_gb_hour": "0.000139", "tokens_1k": "0.002000"}
	for id, price := range want {
		u, err := b.Lookup(id)
		if err != nil || u.UnitPrice.String() != price || u.Currency != "USD" || u.Version != 1 {
			t.Fatalf("Lookup(%s) = %+v, %v", id, u, err)
		}
	}
	if _, err := b.Lookup("gpu_hour_legacy"); !errors.Is(err, ErrRetiredUnit) {
		t.Fatalf("retired unit: %v", err)
	}
	if _, err := b.Lookup("gpu_minute"); !errors.Is(err, ErrUnknownUnit) {
		t.Fatalf("unknown unit: %v", err)
	}
	if b.Digest() == "" || b.Units() != 5 {
		t.Fatalf("digest %q units %d", b.Digest(), b.Units())
	}
}

func TestVersions(t *testing.T) {
	v := func(version int, price, lifecycle string) string {
		s := strings.Replace(gpu, `"version":1`, `"version":`+string(rune('0'+version)), 1)
		s = strings.Replace(s, `"2.450000"`, `"`+price+`"`, 1)
		return strings.Replace(s, `"active"`, `"`+lifecycle+`"`, 1)
	}
	// The highest version is current.
	b, err := Parse([]byte(book(v(1, "2.00", "retired"), v(3, "2.60", "active"), v(2, "2.40", "retired"))))
	if err != nil {
		t.Fatal(err)
	}
	if u, err := b.Lookup("gpu_hour"); err != nil || u.Version != 3 || u.UnitPriceText != "2.60" {
		t.Fatalf("Lookup = %+v, %v; want version 3", u, err)
	}
	if u := b.Version("gpu_hour", 2); u == nil || u.UnitPriceText != "2.40" {
		t.Fatalf("Version(2) = %+v", u)
	}
	// A retired highest version retires the unit.
	b, err = Parse([]byte(book(v(1, "2.00", "active"), v(2, "2.40", "retired"))))
	if err != nil {
		t.Fatal(err)
	}
	if u, err := b.Lookup("gpu_hour"); !errors.Is(err, ErrRetiredUnit) || u.Version != 2 {
		t.Fatalf("Lookup = %+v, %v; want retired version 2", u, err)
	}
}

// A version is what a rated line's unit_version names, and rated_usage
// keeps that as a UInt32: the highest version it holds is accepted, and
// one above it, which would be stored as version 1, is refused.
func TestVersionFitsUnitVersion(t *testing.T) {
	retired := strings.Replace(gpu, `"active"`, `"retired"`, 1)
	b, err := Parse([]byte(book(retired, strings.Replace(gpu, `"version":1`, `"version":4294967295`, 1))))
	if err != nil {
		t.Fatal(err)
	}
	if u, err := b.Lookup("gpu_hour"); err != nil || u.Version != MaxVersion {
		t.Fatalf("Lookup = %+v, %v; want version %d", u, err, int64(MaxVersion))
	}
	for _, v := range []string{"4294967296", "4294967297", "9223372036854775807"} {
		_, err := Parse([]byte(book(retired, strings.Replace(gpu, `"version":1`, `"version":`+v, 1))))
		var ie *InvalidError
		if !errors.As(err, &ie) || ie.Field != "version" || !strings.Contains(err.Error(), v) {
			t.Errorf("version %s: %v, want it refused naming the version", v, err)
		}
	}
}

func TestInvalid(t *testing.T) {
	set := func(old, new string) string {
		if !strings.Contains(gpu, old) {
			panic("fixture lacks " + old)
		}
		return book(strings.Replace(gpu, old, new, 1))
	}
	cases := map[string]struct{ file, field string }{
		"not json":          {`{"units":`, ""},
		"empty":             {`{"units":[]}`, ""},
		"unknown field":     {book(strings.Replace(gpu, `"currency"`, `"curency"`, 1)), ""},
		"trailing":          {book(gpu) + `{}`, ""},
		"no unit id":        {set(`"unit_id":"gpu_hour"`, `"unit_id":""`), "unit_id"},
		"version 0":         {set(`"version":1`, `"version":0`), "version"},
		"version 2^32":      {set(`"version":1`, `"version":4294967296`), "version"},
		"precision -1":      {set(`"precision":2`, `"precision":-1`), "precision"},
		"precision 10":      {set(`"precision":2`, `"precision":10`), "precision"},
		"float price":       {set(`"2.450000"`, `2.45`), ""},
		"exponent price":    {set(`"2.450000"`, `"2.45e0"`), "unit_price"},
		"negative price":    {set(`"2.450000"`, `"-2.45"`), "unit_price"},
		"lower currency":    {set(`"USD"`, `"usd"`), "currency"},
		"long currency":     {set(`"USD"`, `"USDT"`), "currency"},
		"no category":       {set(`"compute"`, `""`), "rating_category"},
		"unknown lifecycle": {set(`"active"`, `"deprecated"`), "lifecycle"},
		"duplicate version": {book(gpu, gpu), "version"},
		"two active":        {book(gpu, strings.Replace(gpu, `"version":1`, `"version":2`, 1)), "lifecycle"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(c.file))
			var ie *InvalidError
			if !errors.As(err, &ie) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse accepted or wrong error: %v", err)
			}
			if ie.Field != c.field {
				t.Fatalf("field = %q, want %q (%v)", ie.Field, c.field, err)
			}
		})
	}
}

// A unit naming a key twice, or beside a case variant of it, is
// ambiguous about its price: the last value would win, and a case variant
// would stand in for the key. Such a file is refused, the error naming the
// unit and the key, as the validator refuses such payloads. A case variant
// alone is an unknown key, refused like a misspelt one.
func TestAmbiguousKeysRefused(t *testing.T) {
	price := `"unit_price":"2.450000"`
	tokens := `{"unit_id":"tokens_1k","version":1,"precision":6,"unit_price":"0.002000","currency":"USD","rating_category":"ai","lifecycle":"active"}`
	for name, c := range map[string]struct{ file, unit, key string }{
		"duplicate key":      {book(strings.Replace(gpu, price, price+`,"unit_price":"245.000000"`, 1)), `"gpu_hour"`, `"unit_price"`},
		"case variant":       {book(strings.Replace(gpu, price, price+`,"UNIT_PRICE":"245.000000"`, 1)), `"gpu_hour"`, `"UNIT_PRICE"`},
		"case variant first": {book(strings.Replace(gpu, price, `"Unit_Price":"245.000000",`+price, 1)), `"gpu_hour"`, `"Unit_Price"`},
		"case variant alone": {book(strings.Replace(gpu, `"unit_price"`, `"UNIT_PRICE"`, 1)), `"gpu_hour"`, `"UNIT_PRICE"`},
		"in a later unit": {book(gpu, strings.Replace(tokens, `"currency":"USD"`, `"currency":"USD","currency":"EUR"`, 1)),
			`units[1] ("tokens_1k")`, `"currency"`},
		"units twice": {`{"units":[` + gpu + `],"units":[` + strings.Replace(gpu, "2.450000", "245.000000", 1) + `]}`, "", `"units"`},
		"units case":  {`{"units":[` + gpu + `],"UNITS":[]}`, "", `"UNITS"`},
	} {
		t.Run(name, func(t *testing.T) {
			b, err := Parse([]byte(c.file))
			if err == nil {
				u, _ := b.Lookup("gpu_hour")
				t.Fatalf("accepted, gpu_hour priced %s", u.UnitPriceText)
			}
			var ie *InvalidError
			if !errors.As(err, &ie) || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.unit) || !strings.Contains(err.Error(), c.key) {
				t.Fatalf("error %q, want an *InvalidError naming %s and %s", err, c.unit, c.key)
			}
		})
	}
	// Keys written exactly, once, in any order, are one unit.
	b, err := Parse([]byte(book(`{"lifecycle":"active","rating_category":"compute","currency":"USD",` + price + `,"precision":2,"version":1,"unit_id":"gpu_hour"}`)))
	if err != nil {
		t.Fatal(err)
	}
	if u, err := b.Lookup("gpu_hour"); err != nil || u.UnitPriceText != "2.450000" {
		t.Fatalf("Lookup = %+v, %v", u, err)
	}
}

func TestLookupDoesNotAllocate(t *testing.T) {
	b, err := Parse([]byte(book(gpu)))
	if err != nil {
		t.Fatal(err)
	}
	id := []byte("gpu_hour")
	if n := testing.AllocsPerRun(1000, func() { _, _ = b.Lookup(string(id)) }); n != 0 {
		t.Fatalf("Lookup allocates %.1f times", n)
	}
}

func TestReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pricebook.json")
	write := func(s string) {
		t.Helper()
		// Replace atomically, as an operator's deploy tool would.
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write(book(gpu))
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	first := s.Book()
	if changed, err := s.Reload(); changed || err != nil {
		t.Fatalf("unchanged file: changed %v, %v", changed, err)
	}

	// A bad file is refused and the old book stays.
	write(`{"units":[{"unit_id":"gpu_hour"}]}`)
	if changed, err := s.Reload(); changed || !errors.Is(err, ErrInvalid) {
		t.Fatalf("invalid file: changed %v, %v", changed, err)
	}
	if s.Book() != first {
		t.Fatal("a refused file replaced the book")
	}

	// Watch picks up a good file on SIGHUP (here: the channel).
	hup := make(chan os.Signal, 1)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); s.Watch(ctx, time.Hour, hup) }()
	defer func() { cancel(); wg.Wait() }()

	v2 := strings.NewReplacer(`"version":1`, `"version":2`, `"2.450000"`, `"2.500000"`).Replace(gpu)
	write(book(strings.Replace(gpu, `"active"`, `"retired"`, 1), v2))
	hup <- os.Interrupt
	deadline := time.Now().Add(5 * time.Second)
	for {
		u, err := s.Book().Lookup("gpu_hour")
		if err == nil && u.Version == 2 && u.UnitPriceText == "2.500000" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("book not reloaded: %+v, %v", u, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestConcurrentReadersDuringReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pricebook.json")
	if err := os.WriteFile(path, []byte(book(gpu)), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				// Every reader sees one whole book: the version and the
				// price always agree.
				u, err := s.Book().Lookup("gpu_hour")
				if err != nil || (u.Version == 1) != (u.UnitPriceText == "2.450000") {
					t.Errorf("torn read: %+v, %v", u, err)
					return
				}
			}
		}()
	}
	for i := 2; i < 40; i++ {
		price := "2.450000"
		if i%2 == 0 {
			price = "3.000000"
		}
		version := "1"
		if price != "2.450000" {
			version = "2"
		}
		f := strings.NewReplacer(`"version":1`, `"version":`+version, `"2.450000"`, `"`+price+`"`).Replace(gpu)
		if err := os.WriteFile(path, []byte(book(f)), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Reload(); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
}
