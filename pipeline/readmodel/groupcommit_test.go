package readmodel_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/driftline/driftline/pipeline/readmodel"
)

func TestGroupCommit(t *testing.T) {
	var mu sync.Mutex
	var writes [][]int
	release := make(chan struct{})
	g := readmodel.NewGroupCommit(3, func(rows []int) error {
		<-release
		mu.Lock()
		defer mu.Unlock()
		writes = append(writes, rows)
		for _, r := range rows {
			if r == 7 {
				return errors.New("row 7 refused")
			}
		}
		return nil
	})
	const n = 10
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = g.Submit(context.Background(), i)
		}()
	}
	// Let the submitters queue up behind the first write, then let every
	// write go.
	time.Sleep(50 * time.Millisecond)
	close(release)
	wg.Wait()

	seen := map[int]int{}
	var batchOf7 []int
	for _, w := range writes {
		if len(w) == 0 || len(w) > 3 {
			t.Errorf("write of %d rows, want 1 to 3", len(w))
		}
		for _, r := range w {
			seen[r]++
			if r == 7 {
				batchOf7 = w
			}
		}
	}
	if len(seen) != n || len(writes) >= n {
		t.Errorf("writes %v: want every row once, fewer writes than rows", writes)
	}
	for r, c := range seen {
		if c != 1 {
			t.Errorf("row %d written %d times", r, c)
		}
	}
	for i, err := range errs {
		inFailed := false
		for _, r := range batchOf7 {
			inFailed = inFailed || r == i
		}
		if inFailed != (err != nil) {
			t.Errorf("row %d: error %v, in the refused write %v", i, err, inFailed)
		}
	}

	// A caller whose context ends stops waiting; its row is still written.
	block := make(chan struct{})
	wrote := make(chan []string, 1)
	g2 := readmodel.NewGroupCommit(10, func(rows []string) error {
		<-block
		wrote <- rows
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g2.Submit(ctx, "late"); !errors.Is(err, context.Canceled) {
		t.Errorf("submit with an ended context: %v", err)
	}
	close(block)
	if rows := <-wrote; len(rows) != 1 || rows[0] != "late" {
		t.Errorf("wrote %v, want [late]", rows)
	}
}
