//go:build !unix

package event

func cpuTime() int64 { return 0 }
