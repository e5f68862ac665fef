// Package memstat measures the heap for tests and benchmarks of memory
// per item: what stays live after a full collection, so that the garbage
// of earlier work does not count.
package memstat

import "runtime"

// Collected runs a full collection and returns the memory statistics
// after it.
func Collected() runtime.MemStats {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms
}

// Live returns the bytes of the objects live on the heap after a full
// collection.
func Live() uint64 {
	ms := Collected()
	return ms.HeapAlloc
}
