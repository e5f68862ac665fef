//go:build !linux

package chserver

import "syscall"

// sysProcAttr puts the server in its own process group. Options.DieWithParent
// has no effect here: only Linux has a parent-death signal.
func sysProcAttr(bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
