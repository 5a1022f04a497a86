package wasm

import "fmt"

// BudgetError is a Load refused because the module's worst case (its
// memory cap times its instances) does not fit in what the runtime's
// memory budget has left.
type BudgetError struct {
	Name string
	// Need is the module's worst case, Reserved what the loaded modules
	// hold, Budget the runtime's budget; all in bytes.
	Need, Reserved, Budget uint64
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("wasm: load %s: its worst case (%d MiB: memory cap × instances) does not fit in the node's function memory budget (%d MiB, of which loaded functions reserve %d MiB): lower memoryMB or concurrency, undeploy another function, or raise the budget (-functions-memory)",
		e.Name, e.Need>>20, e.Budget>>20, e.Reserved>>20)
}

// reserve takes need bytes of the budget for a module, or refuses.
func (r *Runtime) reserve(name string, need uint64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reserved+need > r.cfg.MemoryBudget {
		return &BudgetError{Name: name, Need: need, Reserved: r.reserved, Budget: r.cfg.MemoryBudget}
	}
	r.reserved += need
	return nil
}

// unreserve gives a module's share back.
func (r *Runtime) unreserve(need uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reserved -= need
}

// Reserved returns the worst case of the loaded modules and the budget,
// in bytes.
func (r *Runtime) Reserved() (reserved, budget uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reserved, r.cfg.MemoryBudget
}
