package checkpoint

import (
	"errors"
	"fmt"
)

// ErrClosed is returned by Save and Load after Close.
var ErrClosed = errors.New("checkpoint: store closed")

// errDamaged marks a checkpoint whose manifest was found but whose chunks
// are missing or do not match it. Load skips such a checkpoint and looks
// for an older one.
var errDamaged = errors.New("damaged checkpoint")

// PartitionError says which partition of the checkpoint topic an operation
// failed on and, when known, at which offset.
type PartitionError struct {
	Op        string // "save", "load", "fetch", "list offsets"
	Topic     string
	Partition int32
	Offset    int64 // -1 when not tied to an offset
	Err       error
}

func (e *PartitionError) Error() string {
	if e.Offset >= 0 {
		return fmt.Sprintf("checkpoint %s %s/%d at offset %d: %v", e.Op, e.Topic, e.Partition, e.Offset, e.Err)
	}
	return fmt.Sprintf("checkpoint %s %s/%d: %v", e.Op, e.Topic, e.Partition, e.Err)
}

func (e *PartitionError) Unwrap() error { return e.Err }
