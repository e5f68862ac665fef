module github.com/driftline/driftline

go 1.26.0

require (
	github.com/segmentio/encoding v0.5.4
	github.com/twmb/franz-go v1.22.2
	github.com/twmb/franz-go/pkg/kadm v1.19.0
)

require (
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
	github.com/segmentio/asm v1.1.3 // indirect
	github.com/twmb/franz-go/pkg/kmsg v1.15.0 // indirect
	golang.org/x/sys v0.0.0-20211110154304-99a53858aa08 // indirect
)
