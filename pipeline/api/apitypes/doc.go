// Package apitypes holds the answers of the query API (CONTRACT section 7)
// as Go types with their JSON names, and the vocabulary they carry. The
// server encodes them and the client decodes them, so both see one
// definition; the package has no behaviour and imports nothing of the
// project.
package apitypes
