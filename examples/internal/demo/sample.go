package demo

import (
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
)

// The sample company: three departments, each with a manager, and
// employees named from two short lists of eight, so that names repeat as
// they do in a real directory.
var (
	departments = []string{"Sales", "Marketing", "Engineering"}
	managers    = []string{"Grace Evans", "Hugo Wilson", "Emma Taylor"}
	firstNames  = []string{"Anna", "Ben", "Chloe", "David", "Emma", "Farid", "Grace", "Hugo"}
	lastNames   = []string{"Jones", "Smith", "Johnson", "Brown", "Taylor", "Jordan", "Wilson", "Evans"}
)

// Departments are the sample company's departments, in the order
// Department and Manager number them.
func Departments() []string { return append([]string(nil), departments...) }

// Department is the department of employee i: they take turns.
func Department(i int) string { return departments[i%len(departments)] }

// Manager is the manager of Departments()[d].
func Manager(d int) string { return managers[d] }

// Name is employee i's first and last name.
func Name(i int) (first, last string) {
	return firstNames[i%len(firstNames)], lastNames[(i+i/len(firstNames))%len(lastNames)]
}

// EmployeeID is employee i's id: six digits, fixed width so that the ids
// sort as their numbers do (000009 before 000010).
func EmployeeID(i int) string { return fmt.Sprintf("%06d", i) }

// Quote is s as an OData string literal: in single quotes, each quote
// doubled.
func Quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// Columns is a writer of a listing's columns on stdout: cells separated by
// tabs are padded with spaces to the widest of their column, two apart.
// Flush prints the listing.
func Columns() *tabwriter.Writer { return tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0) }
