package readmodel

import (
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/driftline/driftline/pipeline/service"
)

func TestCompressionSetting(t *testing.T) {
	for _, c := range []struct {
		addr, setting string
		want          clickhouse.CompressionMethod
	}{
		{"127.0.0.1:9000", "", clickhouse.CompressionNone},
		{"127.0.0.1:9000", service.CompressionAuto, clickhouse.CompressionNone},
		{"127.8.9.10:9000", service.CompressionAuto, clickhouse.CompressionNone},
		{"localhost:9000", service.CompressionAuto, clickhouse.CompressionNone},
		{"[::1]:9000", service.CompressionAuto, clickhouse.CompressionNone},
		{"clickhouse.internal:9000", service.CompressionAuto, clickhouse.CompressionLZ4},
		{"10.0.0.7:9000", service.CompressionAuto, clickhouse.CompressionLZ4},
		{"127.0.0.1:9000", service.CompressionLZ4, clickhouse.CompressionLZ4},
		{"10.0.0.7:9000", service.CompressionZSTD, clickhouse.CompressionZSTD},
		{"10.0.0.7:9000", service.CompressionNone, clickhouse.CompressionNone},
	} {
		got, err := compression(service.ClickHouse{Addr: c.addr, Compression: c.setting})
		if err != nil || got != c.want {
			t.Errorf("compression(%s, %q) = %v, %v; want %v", c.addr, c.setting, got, err, c.want)
		}
	}
	if _, err := compression(service.ClickHouse{Addr: "127.0.0.1:9000", Compression: "snappy"}); err == nil {
		t.Error("compression snappy: no error")
	}
}
