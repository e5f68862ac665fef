package service

import (
	"os"
	"syscall"
	"testing"
	"time"
)

func TestHangup(t *testing.T) {
	hup, stop := Hangup()
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-hup:
		if s != syscall.SIGHUP {
			t.Fatalf("received %v, want SIGHUP", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no SIGHUP received")
	}
}
