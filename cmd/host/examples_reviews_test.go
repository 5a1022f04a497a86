package main

import (
	"testing"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
)

// TestExamplesReviews follows the section of examples/README.md on
// compound keys with the commands it gives, and checks what the README
// says they print: an employee's reviews as one RowKey range, oldest
// first and nobody else's, one review by a point read, the latest by the
// range read from its end, and a review that does not exist refused with
// the host's code.
func TestExamplesReviews(t *testing.T) {
	h, _ := nodetest.Start(t, node.Config{})
	reviews := buildExample(t, "reviews", nodeFlags(h)...)

	same(t, "seed", reviews.must("seed"), "table EmployeeReviews: 47 reviews of 12 employees, one batch per employee (journal position 12)\n")
	of3 := `EmployeeReviews where PartitionKey eq 'Sales' and RowKey ge '000003_' and RowKey lt '000003` + "`" + `':
  000003_2010  2  partly met expectations  Maria Garcia
  000003_2011  3  met expectations         Maria Garcia
  000003_2012  4  exceeded expectations    Maria Garcia
  000003_2013  5  outstanding              Maria Garcia
  000003_2014  1  below expectations       Maria Garcia
  (5)
`
	same(t, "reviews", reviews.must("reviews", "Sales", "000003"), of3)
	same(t, "review", reviews.must("review", "Sales", "000003", "2012"),
		"EmployeeReviews Sales/000003_2012: rating 4, exceeded expectations (Maria Garcia)\n")
	same(t, "latest", reviews.must("latest", "Sales", "000003"),
		"EmployeeReviews, latest first, $top 1: Sales/000003_2014: rating 1, below expectations (Maria Garcia)\n")

	// The neighbours in the partition stay out of the range, and an id
	// is written with six digits whichever way it is typed.
	same(t, "reviews of 000006", reviews.must("reviews", "Sales", "000006"), `EmployeeReviews where PartitionKey eq 'Sales' and RowKey ge '000006_' and RowKey lt '000006`+"`"+`':
  000006_2012  5  outstanding              Maria Garcia
  000006_2013  1  below expectations       Maria Garcia
  000006_2014  2  partly met expectations  Maria Garcia
  (3)
`)
	same(t, "reviews Sales 3", reviews.must("reviews", "Sales", "3"), of3)
	// Another department's partition holds no reviews of 000003.
	same(t, "reviews in another partition", reviews.must("reviews", "Marketing", "000003"),
		"EmployeeReviews where PartitionKey eq 'Marketing' and RowKey ge '000003_' and RowKey lt '000003`':\n  (0)\n")

	out, err := reviews.run("review", "Sales", "000003", "2030")
	refused(t, "review of a year without one", out, err, "",
		`reviews: EmployeeReviews Sales/000003_2030: ResourceNotFound: The specified resource does not exist: ("Sales", "000003_2030") in EmployeeReviews.`+"\n")
	out, err = reviews.run("review", "Sales", "1234567", "2012")
	refused(t, "review of a seven-digit id", out, err, "", `reviews: an employee id is a number of at most 6 digits, not "1234567"`+"\n")
	out, err = reviews.run("latest", "Marketing", "000003")
	refused(t, "latest of nobody's reviews", out, err, "", "reviews: EmployeeReviews Marketing: employee 000003 has no reviews\n")
}
