package exprbound

import (
	"sync"

	"github.com/expr-lang/expr/vm"
)

// VMs is a pool of expr VMs: a vm.VM is not safe to share, and cheap to
// reuse. The zero value is ready to use.
type VMs struct{ pool sync.Pool }

// Run runs p on env in the calling goroutine (expr's VM cannot be
// interrupted: its iteration counter stops it), under the VM's memory
// budget.
func (s *VMs) Run(p *vm.Program, env any, memoryBudget uint) (any, error) {
	v, ok := s.pool.Get().(*vm.VM)
	if !ok {
		v = &vm.VM{}
	}
	v.MemoryBudget = memoryBudget
	out, err := v.Run(p, env)
	s.pool.Put(v)
	return out, err
}
