package main

import (
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
)

// TestExamplesEntityTypes follows the section of examples/README.md on
// two kinds of entity in one partition with the commands it gives, and
// checks what the README says they print: one query returns both kinds,
// a filter by EntityType and one by RowKey return one, and the filter
// walks the partition where the key range does not.
func TestExamplesEntityTypes(t *testing.T) {
	h, _ := nodetest.Start(t, node.Config{})
	entitytypes := buildExample(t, "entitytypes", nodeFlags(h)...)

	// Before seed: the node's coded error, exit status 1.
	if out, err := entitytypes.run("partition", "Sales"); err == nil || !strings.Contains(err.Error(), "exit status 1") || !strings.Contains(err.Error(), "TableNotFound") {
		t.Fatalf("partition before seed: %v\n%s", err, out)
	}

	same(t, "seed", entitytypes.must("seed"), "table Departments: 3 departments and 20 employees, one batch per department (journal positions 1 to 3)\n")
	same(t, "partition Sales", entitytypes.must("partition", "Sales"), `Departments where PartitionKey eq 'Sales': 7 entities, 1 Department and 6 Employee
  DEPT        Department  manager Grace Evans, floor 1
  EMP_000003  Employee    David Brown
  EMP_000006  Employee    Grace Wilson
  EMP_000009  Employee    Ben Johnson
  EMP_000012  Employee    Emma Jordan
  EMP_000015  Employee    Hugo Jones
  EMP_000018  Employee    Chloe Taylor
`)
	employees := `  EMP_000003  David Brown
  EMP_000006  Grace Wilson
  EMP_000009  Ben Johnson
  EMP_000012  Emma Jordan
  EMP_000015  Hugo Jones
  EMP_000018  Chloe Taylor
`
	same(t, "kind Sales Employee", entitytypes.must("kind", "Sales", "Employee"),
		"Departments where PartitionKey eq 'Sales' and EntityType eq 'Employee': 6 Employee\n"+employees)
	same(t, "kind Sales Employee -by key", entitytypes.must("kind", "Sales", "Employee", "-by", "key"),
		"Departments where PartitionKey eq 'Sales' and RowKey ge 'EMP_' and RowKey lt 'EMP`': 6 Employee\n"+employees)
	same(t, "kind Sales Department -by key", entitytypes.must("kind", "Sales", "Department", "-by", "key"),
		"Departments where PartitionKey eq 'Sales' and RowKey eq 'DEPT': 1 Department\n  DEPT  manager Grace Evans, floor 1\n")
	same(t, "cost Sales", entitytypes.must("-operator-token", h.OperatorToken(), "cost", "Sales"), "FILTER                                                             RETURNED  EXAMINED\n"+
		"PartitionKey eq 'Sales' and EntityType eq 'Department'             1         7\n"+
		"PartitionKey eq 'Sales' and RowKey eq 'DEPT'                       1         1\n"+
		"PartitionKey eq 'Sales' and EntityType eq 'Employee'               6         7\n"+
		"PartitionKey eq 'Sales' and RowKey ge 'EMP_' and RowKey lt 'EMP`'  6         6\n")

	// /metrics refuses a wrong token, and a kind the program does not know
	// is refused before any request.
	if out, err := entitytypes.run("-operator-token", "not-the-operator-token", "cost", "Sales"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("cost with a wrong token: %v\n%s", err, out)
	}
	if out, err := entitytypes.run("kind", "Sales", "Manager"); err == nil || !strings.Contains(err.Error(), `kind "Manager": want Department or Employee`) {
		t.Fatalf("kind Manager: %v\n%s", err, out)
	}
}
