package readmodel

import (
	"context"
	"sync"
)

// GroupCommit writes the rows that concurrent callers submit together, a
// batch per write: a Submit waits for the write that holds its row, and the
// rows that arrive while one write runs go together in the next. One
// INSERT per request made one part per request, and a burst of requests
// kept ClickHouse 18.16 merging them.
type GroupCommit[T any] struct {
	write func([]T) error
	max   int

	mu      sync.Mutex      // protects pending and writing
	pending []*groupWait[T] // rows waiting for the next write
	writing bool            // a write loop is running
}

// groupWait is one submitted row and where its write's result goes.
type groupWait[T any] struct {
	row  T
	done chan error
}

// NewGroupCommit returns a GroupCommit that writes at most max rows at a
// time with write. write runs on its own goroutine, never two at once,
// and bounds its own time: the context of a Submit may end while other
// callers' rows share the write.
func NewGroupCommit[T any](max int, write func([]T) error) *GroupCommit[T] {
	if max < 1 {
		panic("BUG: GroupCommit of fewer than one row a write")
	}
	return &GroupCommit[T]{write: write, max: max}
}

// Submit queues row for the next write and returns that write's error, or
// ctx's error if ctx ends first; the row is written all the same.
func (g *GroupCommit[T]) Submit(ctx context.Context, row T) error {
	w := &groupWait[T]{row: row, done: make(chan error, 1)}
	g.mu.Lock()
	g.pending = append(g.pending, w)
	if !g.writing {
		g.writing = true
		go g.loop()
	}
	g.mu.Unlock()
	select {
	case err := <-w.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// loop writes the pending rows, a batch per write, until none is left.
func (g *GroupCommit[T]) loop() {
	for {
		g.mu.Lock()
		n := min(len(g.pending), g.max)
		batch := g.pending[:n:n]
		g.pending = g.pending[n:]
		if n == 0 {
			g.pending, g.writing = nil, false
		}
		g.mu.Unlock()
		if n == 0 {
			return
		}
		rows := make([]T, n)
		for i, w := range batch {
			rows[i] = w.row
		}
		err := g.write(rows)
		for _, w := range batch {
			w.done <- err
		}
	}
}
