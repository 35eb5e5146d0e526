package mcptransport

import "syscall"

// sysProcAttr puts a stdio server in a process group of its own, so that
// stopping it stops what it started (npx starts node). A server whose
// exprd dies reads the end of its stdin.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

func (p *process) terminate() { _ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM) }
func (p *process) kill()      { _ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) }
