package pricebook

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Store holds the book in use and replaces it when the file changes.
// Readers call Book for every batch and never see a partly loaded book.
type Store struct {
	path string
	log  *slog.Logger
	cur  atomic.Pointer[Book]

	// mu serialises reloads and protects raw.
	mu  sync.Mutex
	raw []byte // contents of the file the current book came from

	// OnReload, when set before Watch starts, is called after every
	// reload attempt with the book in use and the error, if the new file
	// was refused.
	OnReload func(b *Book, err error)
}

// Open loads the file at path. A missing or invalid file is an error:
// without a price book nothing can be rated.
func Open(path string, log *slog.Logger) (*Store, error) {
	if log == nil {
		log = slog.Default()
	}
	s := &Store{path: path, log: log}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read price book: %w; Possible solutions: set -rater.priceBook to the price book file", err)
	}
	b, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s.cur.Store(b)
	s.raw = data
	return s, nil
}

// NewStatic returns a Store holding b that never reloads (tests, benchmarks).
func NewStatic(b *Book) *Store {
	s := &Store{log: slog.Default()}
	s.cur.Store(b)
	return s
}

// Book returns the book in use.
func (s *Store) Book() *Book { return s.cur.Load() }

// Path returns the file the store loads.
func (s *Store) Path() string { return s.path }

// Reload reads the file again and swaps the book in if the contents
// changed and are valid. It returns whether the book changed. An invalid
// file leaves the current book in use and is returned as an error.
func (s *Store) Reload() (bool, error) {
	if s.path == "" {
		return false, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	data, err := os.ReadFile(s.path)
	if err != nil {
		return false, fmt.Errorf("read price book: %w", err)
	}
	if bytes.Equal(data, s.raw) {
		return false, nil
	}
	b, err := Parse(data)
	if err != nil {
		return false, fmt.Errorf("%s: %w (keeping price book %s)", s.path, err, s.Book().Digest())
	}
	old := s.cur.Swap(b)
	s.raw = data
	s.log.Info("price book reloaded", "path", s.path, "from", old.Digest(), "to", b.Digest(), "units", b.Units())
	return true, nil
}

// Watch reloads the file every interval and whenever hup receives (wire
// it to SIGHUP), until ctx ends. Refused files are logged and reported to
// OnReload; the previous book stays in use.
func (s *Store) Watch(ctx context.Context, interval time.Duration, hup <-chan os.Signal) {
	if interval <= 0 {
		interval = 2 * time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-hup:
		}
		changed, err := s.Reload()
		if err != nil {
			s.log.Error("price book refused", "err", err)
		}
		if (changed || err != nil) && s.OnReload != nil {
			s.OnReload(s.Book(), err)
		}
	}
}
