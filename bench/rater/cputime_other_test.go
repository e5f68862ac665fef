//go:build !unix

package rater_test

func cpuTime() int64 { return 0 }
