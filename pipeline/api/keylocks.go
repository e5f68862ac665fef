package api

import (
	"context"
	"sync"
)

// keyLocks serializes the action requests of one Idempotency-Key within
// this process: the check of the action log (Accepted), the command's
// produce and the record of the answer (Accept) are separate steps, so
// two requests of one key run side by side would both find the key
// unused and both be answered 202, whatever their bodies. Under the lock
// the second finds the first's answer: the replay, or 409 for another
// body.
//
// It does not serialize replicas: two query services that take requests
// of one key at the same moment can still both answer 202
// (docs/actions.md, Idempotency).
//
// A key has an entry only while requests hold or wait for its lock, and
// every such request holds one of the server's MaxConcurrent slots, so
// the table never holds more than MaxConcurrent keys.
type keyLocks struct {
	mu   sync.Mutex          // protects held and each entry's waiters
	held map[string]*keyLock // by key, while requests hold or wait for it
}

// keyLock is the lock of one key.
type keyLock struct {
	token   chan struct{} // holds a value while a request holds the key
	waiters int           // requests holding or waiting for token
}

// lock waits until no other request holds key, or until ctx ends, and
// returns the function that releases the key.
func (l *keyLocks) lock(ctx context.Context, key string) (unlock func(), err error) {
	l.mu.Lock()
	if l.held == nil {
		l.held = map[string]*keyLock{}
	}
	k := l.held[key]
	if k == nil {
		k = &keyLock{token: make(chan struct{}, 1)}
		l.held[key] = k
	}
	k.waiters++
	l.mu.Unlock()
	select {
	case k.token <- struct{}{}:
		return func() {
			<-k.token
			l.leave(key, k)
		}, nil
	case <-ctx.Done():
		l.leave(key, k)
		return nil, ctx.Err()
	}
}

// leave drops one holder or waiter of k, and k with the last.
func (l *keyLocks) leave(key string, k *keyLock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if k.waiters--; k.waiters == 0 {
		delete(l.held, key)
	}
}
