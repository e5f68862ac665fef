package chserver

import "syscall"

// sysProcAttr puts the server in its own process group, so a terminal's
// Ctrl-C reaches the program that owns the server, which then stops it in
// order, and not the server directly.
func sysProcAttr(dieWithParent bool) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true}
	if dieWithParent {
		a.Pdeathsig = syscall.SIGKILL
	}
	return a
}
