// Package rater_test benchmarks the rater's per-event hot path: decode and
// validate a usage.recorded event, price it against the price book, and
// encode the billing.rated envelope. See README.md for the command and the
// figures measured.
package rater_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/driftline/driftline/internal/cputime"
	"github.com/driftline/driftline/pipeline/billing/pricebook"
	"github.com/driftline/driftline/pipeline/billing/rater"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/contract/decimal"
)

func usageEvents(n int) [][]byte {
	units := []string{"gpu_hour", "app_vcpu_hour", "storage_gb_hour", "tokens_1k"}
	out := make([][]byte, n)
	for i := range out {
		out[i] = fmt.Appendf(nil, `{"event_id":"u-%08d","event_type":"usage.recorded","schema_version":1,"producer":"gw-eu1","seq":%d,`+
			`"occurred_at":"2026-11-21T10:15:30.123Z","correlation_id":"c-%d","environment":"local_parity","payload":{`+
			`"usage_id":"usage-%08d","metering_source":"gpu-meter-eu1","metering_id":"m-%08d","unit_id":"%s","quantity":"%d.%06d",`+
			`"product_id":"gpuaas","tenant_id":"tenant-%03d","project_id":"p-1","window_start":"2026-11-21T10:00:00Z","window_end":"2026-11-21T10:15:00Z"}}`,
			i, i, i%97, i, i, units[i%len(units)], i%50, (i*7919)%1000000, i%300)
	}
	return out
}

func loadBook(b *testing.B) *pricebook.Book {
	book, err := pricebook.Load(filepath.Join("..", "..", "deploy", "pricebook.json"))
	if err != nil {
		b.Fatal(err)
	}
	return book
}

// BenchmarkRateHotPath is the whole per-event work of the rater: decode
// and validate the envelope and payload (with the rater's reused
// contract.Decoder, strings aliasing the record), look up the unit, price it,
// and encode the rated line into a reused buffer.
func BenchmarkRateHotPath(b *testing.B) {
	benchHotPath(b, contract.NewDecoder(contract.Validator{Environment: contract.EnvLocalParity, ZeroCopy: true}).DecodeEvent)
}

// BenchmarkRateHotPathValidator is the hot path with the shared
// validator's allocating DecodeEvent (a new payload, copied strings).
func BenchmarkRateHotPathValidator(b *testing.B) {
	benchHotPath(b, contract.Validator{Environment: contract.EnvLocalParity}.DecodeEvent)
}

func benchHotPath(b *testing.B, decode func([]byte) (contract.Envelope, any, *contract.ValidationError)) {
	book := loadBook(b)
	events := usageEvents(4096)
	now := time.Date(2026, 11, 21, 10, 16, 0, 0, time.UTC)
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	b.SetBytes(int64(len(events[0])))
	b.ResetTimer()
	cpu := cputime.Now()
	for i := 0; i < b.N; i++ {
		env, p, verr := decode(events[i%len(events)])
		if verr != nil {
			b.Fatal(verr)
		}
		u := p.(*contract.Usage)
		r := rater.Rate(book, nil, u)
		if r.Reason != "" {
			b.Fatal(r.Detail)
		}
		buf = rater.AppendRated(buf[:0], &env, u, &r, contract.EnvLocalParity, now)
	}
	reportCPU(b, cpu)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// reportCPU reports the CPU time per event since cpu, and the events per
// second of CPU time.
func reportCPU(b *testing.B, cpu int64) {
	if cpu > 0 {
		ns := float64(cputime.Now()-cpu) / float64(b.N)
		b.ReportMetric(ns, "cpu-ns/op")
		b.ReportMetric(1e9/ns, "events/cpu-s")
	}
}

// BenchmarkRateOnly is the pricing step alone (lookup, parse, multiply,
// round, encode), the part the rater owns beyond the shared validator.
func BenchmarkRateOnly(b *testing.B) {
	book := loadBook(b)
	v := contract.Validator{Environment: contract.EnvLocalParity}
	events := usageEvents(4096)
	envs := make([]contract.Envelope, len(events))
	usages := make([]*contract.Usage, len(events))
	for i, e := range events {
		env, p, verr := v.DecodeEvent(e)
		if verr != nil {
			b.Fatal(verr)
		}
		envs[i], usages[i] = env, p.(*contract.Usage)
	}
	now := time.Date(2026, 11, 21, 10, 16, 0, 0, time.UTC)
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cputime.Now()
	for i := 0; i < b.N; i++ {
		k := i % len(events)
		r := rater.Rate(book, nil, usages[k])
		buf = rater.AppendRated(buf[:0], &envs[k], usages[k], &r, contract.EnvLocalParity, now)
	}
	reportCPU(b, cpu)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkMulRound is the money arithmetic alone.
func BenchmarkMulRound(b *testing.B) {
	q, p := decimal.MustParse("1.234567"), decimal.MustParse("0.042500")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := decimal.MulRound(q, p, 4); err != nil {
			b.Fatal(err)
		}
	}
}
