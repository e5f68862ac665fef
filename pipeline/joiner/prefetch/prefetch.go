// Package prefetch asks the processor to bring memory into its caches
// ahead of use. The joiner's state (an index probe, an identity) is
// hundreds of megabytes read at random, and each first read of a line
// waits for memory; a prefetch issued a few records ahead overlaps that
// wait with the work on the records in between. A prefetch is a hint: it
// never faults (any address will do) and changes no result.
package prefetch
