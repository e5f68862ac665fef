package rater_test

import (
	"flag"
	"slices"
	"testing"
	"time"

	"github.com/driftline/driftline/pipeline/billing/rater"
)

func TestRegisterFlags(t *testing.T) {
	parse := func(args ...string) rater.Options {
		t.Helper()
		fs, o := flag.NewFlagSet("rater", flag.ContinueOnError), rater.DefaultOptions()
		finish := o.RegisterFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		finish()
		return o
	}
	d := rater.DefaultOptions()
	if o := parse(); o.DisableTransactions || len(o.Currencies) != 0 || o.MaxBatch != d.MaxBatch || o.TransactionalID != d.TransactionalID || o.Compression != "snappy" {
		t.Errorf("defaults: %+v", o)
	}
	o := parse("-rater.transactions=false", "-rater.currencies", "EUR, USD,,GBP", "-rater.maxBatch", "7", "-rater.horizon", "1h", "-rater.compression", "none")
	if !o.DisableTransactions || !slices.Equal(o.Currencies, []string{"EUR", "USD", "GBP"}) || o.MaxBatch != 7 || o.Horizon != time.Hour || o.Compression != "none" {
		t.Errorf("set: %+v", o)
	}
}
