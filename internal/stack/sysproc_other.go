//go:build unix && !linux

package stack

import "syscall"

func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
