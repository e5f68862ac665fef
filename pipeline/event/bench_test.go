package event

import "testing"

// BenchmarkDecodeEvent measures the shared validator on a typical
// observation line, the hot path of the gateway and of every consumer.
func BenchmarkDecodeEvent(b *testing.B) {
	line := []byte(validObs)
	v := Validator{Environment: EnvLocalParity}
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := v.DecodeEvent(line); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeEventZeroCopy(b *testing.B) {
	line := []byte(validObs)
	v := Validator{Environment: EnvLocalParity, ZeroCopy: true}
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := v.DecodeEvent(line); err != nil {
			b.Fatal(err)
		}
	}
}
