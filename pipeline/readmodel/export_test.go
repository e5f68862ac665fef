package readmodel

import "iter"

// Blocks exposes blocks to the tests.
func Blocks[R any](parts [][]R, n int) iter.Seq[[][]R] { return blocks(parts, n) }
