package logmerge

import (
	"bytes"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestFetchPoolSizes(t *testing.T) {
	var p FetchPool
	plain := bytes.Repeat([]byte(`{"event_type":"provider.observation","producer":"scanner-1"}`), 300)
	raw := s2.EncodeSnappy(nil, plain)
	// Raw snappy says its decoded length: the buffer fits it exactly
	// to the size class, whatever the compression ratio.
	if b := p.GetDecompressBytes(raw, kgo.CodecSnappy); len(b) != 0 || cap(b) < len(plain) || cap(b) >= 2*len(plain) {
		t.Errorf("snappy: len %d cap %d for %d decoded bytes", len(b), cap(b), len(plain))
	}
	// Other codecs: a guess, at least 4 KiB.
	if b := p.GetDecompressBytes(make([]byte, 100), kgo.CodecLz4); cap(b) < 4096 {
		t.Errorf("lz4: cap %d", cap(b))
	}
	// What comes back is lent again with its capacity (when the runtime
	// keeps it), and never one too small.
	b := p.GetDecompressBytes(raw, kgo.CodecSnappy)
	want := cap(b)
	p.PutDecompressBytes(b[:10])
	if again := p.GetDecompressBytes(raw, kgo.CodecSnappy); len(again) != 0 || cap(again) < len(plain) || cap(again) > want {
		t.Errorf("after a put: len %d cap %d, want cap %d", len(again), cap(again), want)
	}
	for _, n := range []int{1, 2, 3, 100, 1 << 20} {
		rs := p.GetRecords(n)
		if len(rs) != 0 || cap(rs) < n || cap(rs) >= 2*n+1 {
			t.Errorf("GetRecords(%d): len %d cap %d", n, len(rs), cap(rs))
		}
		p.PutRecords(rs[:cap(rs)])
	}
}
