package stack

import "syscall"

func childSysProcAttr() *syscall.SysProcAttr {
	// Pdeathsig: a supervisor killed with SIGKILL still takes its children
	// down, gracefully, instead of leaving them holding the ports.
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
