package main

import (
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
)

// TestExamplesDenormalise follows the section of examples/README.md on a
// manager's name copied into each employee with the commands it gives,
// and checks what the README says they print: the change of manager is
// one batch, every entity at its one position, and a department too large
// for one batch is refused with nothing written.
func TestExamplesDenormalise(t *testing.T) {
	h, _ := nodetest.Start(t, node.Config{})
	denormalise := buildExample(t, "denormalise", nodeFlags(h)...)
	list := func(manager, position string) string {
		var b strings.Builder
		b.WriteString("Staff where PartitionKey eq 'Sales' and RowKey ge 'EMP_' and RowKey lt 'EMP`':\n")
		for _, e := range []string{"EMP_000003  David Brown ", "EMP_000006  Grace Wilson", "EMP_000009  Ben Johnson ", "EMP_000012  Emma Jordan ", "EMP_000015  Hugo Jones  ", "EMP_000018  Chloe Taylor"} {
			b.WriteString("  " + e + "  manager " + manager + "  written at position " + position + "\n")
		}
		b.WriteString(`  (6 employees; ManagerName "` + manager + `" in 6)` + "\n")
		return b.String()
	}

	same(t, "seed", denormalise.must("seed"), "table Staff: 3 departments and 20 employees, each employee with its manager's name (journal positions 1 to 3)\n")
	same(t, "list Sales", denormalise.must("list", "Sales"), list("Grace Evans", "1"))
	same(t, "change-manager", denormalise.must("change-manager", "Sales", "Ida Moreau"), `Staff/Sales: manager Grace Evans -> Ida Moreau: the Department and 6 employees merged in one batch (journal position 4)
  as of position 3: 7 entities; the name "Grace Evans" in 7; last written at position 1 in 7
  at position 4: 7 entities; the name "Ida Moreau" in 7; last written at position 4 in 7
`)
	same(t, "list Sales after change-manager", denormalise.must("list", "Sales"), list("Ida Moreau", "4"))

	// 100 employees a department: the Department and its copies are 101
	// operations, more than one batch takes. Refused whole, exit status 1.
	if out := denormalise.must("seed", "-n", "300"); !strings.HasPrefix(out, "table Staff: 3 departments and 300 employees, each employee with its manager's name (journal positions 5 to ") {
		t.Fatalf("seed -n 300:\n%s", out)
	}
	out, err := denormalise.run("change-manager", "Sales", "Ida Moreau")
	refused(t, "change-manager of 100 employees", out, err, "", "denormalise: Staff/Sales: 101 operations in one batch: InvalidInput: request: The batch request operation exceeds the maximum 100 changes per change set (it has 101).\n")
	if out := denormalise.must("list", "Sales"); !strings.HasSuffix(out, "\n  (100 employees; ManagerName \"Grace Evans\" in 100)\n") {
		t.Fatalf("list Sales after the refused batch:\n%s", out)
	}
}
