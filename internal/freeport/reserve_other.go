//go:build !unix

package freeport

// reserve claims nothing where there is no flock: ports are unique
// within a process only.
func reserve(int) bool { return true }
