//go:build !linux

package mcptransport

import (
	"os"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr { return nil }

func (p *process) terminate() { _ = p.cmd.Process.Signal(os.Interrupt) }
func (p *process) kill()      { _ = p.cmd.Process.Kill() }
