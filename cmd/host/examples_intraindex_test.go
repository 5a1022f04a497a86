package main

import (
	"testing"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
)

// TestExamplesIntraindex follows the section of examples/README.md on the
// intra-partition secondary index with the commands it gives, and checks
// what the README says they print: the two copies of an employee written
// by one batch, found by either key, changed together, and a change made
// on a stale read, or to an address already taken, refused whole.
func TestExamplesIntraindex(t *testing.T) {
	h, _ := nodetest.Start(t, node.Config{})
	intraindex := buildExample(t, "intraindex", nodeFlags(h)...)

	same(t, "seed", intraindex.must("seed"), "table EmployeesIdx: 12 employees hired, 24 entities, one batch each (journal position 12)\n")
	same(t, "by-id", intraindex.must("by-id", "Sales", "000003"),
		`EmployeesIdx Sales/empid_000003: 000003 David Brown, david.brown@contoso.com (ETag W/"1.3.0")`+"\n")
	same(t, "by-email", intraindex.must("by-email", "Sales", "david.brown@contoso.com"),
		`EmployeesIdx Sales/email_david.brown@contoso.com: 000003 David Brown, david.brown@contoso.com (ETag W/"1.3.1")`+"\n")
	same(t, "partition", intraindex.must("partition", "Sales"), `EmployeesIdx where PartitionKey eq 'Sales':
  email_ben.johnson@contoso.com   000009 Ben Johnson, ben.johnson@contoso.com
  email_david.brown@contoso.com   000003 David Brown, david.brown@contoso.com
  email_emma.jordan@contoso.com   000012 Emma Jordan, emma.jordan@contoso.com
  email_grace.wilson@contoso.com  000006 Grace Wilson, grace.wilson@contoso.com
  empid_000003                    000003 David Brown, david.brown@contoso.com
  empid_000006                    000006 Grace Wilson, grace.wilson@contoso.com
  empid_000009                    000009 Ben Johnson, ben.johnson@contoso.com
  empid_000012                    000012 Emma Jordan, emma.jordan@contoso.com
  (8)
`)
	same(t, "change-email", intraindex.must("change-email", "Sales", "000003", "david.brown-hill@contoso.com"), `read EmployeesIdx Sales/empid_000003: 000003 David Brown, david.brown@contoso.com (ETag W/"1.3.0")
batch on EmployeesIdx/Sales, if empid_000003 is still W/"1.3.0": journal position 13
  Replace  empid_000003
  Delete   email_david.brown@contoso.com
  Insert   email_david.brown-hill@contoso.com
at position 13: email_david.brown-hill@contoso.com -> 000003 David Brown, david.brown-hill@contoso.com
at position 13: email_david.brown@contoso.com -> ResourceNotFound
`)

	// A change made on the read before that one: refused, nothing written.
	out, err := intraindex.run("change-email", "-if-match", `W/"1.3.0"`, "Sales", "000003", "d.brown@contoso.com")
	refused(t, "change-email on a stale ETag", out, err,
		`read EmployeesIdx Sales/empid_000003: 000003 David Brown, david.brown-hill@contoso.com (ETag W/"1.13.0")`+"\n",
		`intraindex: batch refused, nothing written: UpdateConditionNotSatisfied: operation 0: the entity ("Sales", "empid_000003") has changed since W/"1.3.0" was read`+"\n")
	// An address another employee of the department has: refused by the
	// insert of its email_ copy, the empid_ copy left as it was.
	out, err = intraindex.run("change-email", "Sales", "000006", "emma.jordan@contoso.com")
	refused(t, "change-email to a taken address", out, err,
		`read EmployeesIdx Sales/empid_000006: 000006 Grace Wilson, grace.wilson@contoso.com (ETag W/"1.6.0")`+"\n",
		`intraindex: batch refused, nothing written: EntityAlreadyExists: operation 2: entity ("Sales", "email_emma.jordan@contoso.com") already exists`+"\n")
	out, err = intraindex.run("by-email", "Sales", "david.brown@contoso.com")
	refused(t, "by-email of the old address", out, err, "",
		`intraindex: EmployeesIdx Sales/email_david.brown@contoso.com: ResourceNotFound: The specified resource does not exist: ("Sales", "email_david.brown@contoso.com") in EmployeesIdx.`+"\n")

	same(t, "leave", intraindex.must("leave", "Sales", "000009"),
		"EmployeesIdx/Sales: empid_000009 and email_ben.johnson@contoso.com deleted in one batch (journal position 14)\n")
	same(t, "partition after", intraindex.must("partition", "Sales"), `EmployeesIdx where PartitionKey eq 'Sales':
  email_david.brown-hill@contoso.com  000003 David Brown, david.brown-hill@contoso.com
  email_emma.jordan@contoso.com       000012 Emma Jordan, emma.jordan@contoso.com
  email_grace.wilson@contoso.com      000006 Grace Wilson, grace.wilson@contoso.com
  empid_000003                        000003 David Brown, david.brown-hill@contoso.com
  empid_000006                        000006 Grace Wilson, grace.wilson@contoso.com
  empid_000012                        000012 Emma Jordan, emma.jordan@contoso.com
  (6)
`)
}
