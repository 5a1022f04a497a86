package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
)

// TestExamplesProjectionsWalkthrough follows the sections of
// examples/README.md on declared projections and the log tail with the
// commands they give, and checks what the README says they print.
func TestExamplesProjectionsWalkthrough(t *testing.T) {
	h, _ := nodetest.Start(t, node.Config{})
	url, creds := h.ClientURL(), h.NATSCredsFile()
	directory, logtail := buildExample(t, "directory", nodeFlags(h)...), buildExample(t, "logtail", httpFlags(h)...)

	same(t, "directory seed", directory.must("seed"), "table Employees: 20 employees hired (journal position 20)\n")
	for _, f := range []string{"by-email", "by-lastname", "per-dept"} {
		out, err := runCLI(t, "projections", "-nats-url", url, "-nats-creds", creds, "deploy", "../../examples/directory/projections/"+f+".json")
		if err != nil || !strings.Contains(out, "version 1: declared") || !strings.Contains(out, "version 1: served by 1 host(s)") {
			t.Fatalf("projections deploy %s: %v\n%s", f, err, out)
		}
	}
	out, err := runCLI(t, "projections", "-nats-url", url, "-nats-creds", creds, "list")
	if err != nil {
		t.Fatalf("projections list: %v\n%s", err, out)
	}
	for name, entities := range map[string]string{"EmployeesByEmail": "20", "EmployeesByLastName": "20", "EmployeesPerDept": "3"} {
		found := false
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			found = found || len(f) >= 9 && f[0] == name && f[6] == "active" && f[7] == entities && f[8] == "20"
		}
		if !found {
			t.Fatalf("projections list: %s not active with %s entities at position 20:\n%s", name, entities, out)
		}
	}

	same(t, "find-email", directory.must("find-email", "david.brown@contoso.com"), `EmployeesByEmail: david.brown@contoso.com -> Sales/000003 (David Brown)
Employees Sales/000003: David Brown, david.brown@contoso.com, salary 51100
`)
	same(t, "by-lastname", directory.must("by-lastname", "Jo"), `EmployeesByLastName where PartitionKey ge 'Jo' and PartitionKey lt 'Jp':
  Johnson|Anna   Marketing/000016    anna.johnson@contoso.com
  Johnson|Ben    Sales/000009        ben.johnson@contoso.com
  Johnson|Chloe  Engineering/000002  chloe.johnson@contoso.com
  Jones|Hugo     Sales/000015        hugo.jones@contoso.com
  Jordan|David   Marketing/000019    david.jordan@contoso.com
  Jordan|Emma    Sales/000012        emma.jordan@contoso.com
  Jordan|Farid   Engineering/000005  farid.jordan@contoso.com
  (7)
`)
	departments := `DEPARTMENT   EMPLOYEES  TOTAL SALARY  MIN    MAX
Engineering  7          429900        46800  80700
Marketing    7          404000        43100  77000
Sales        6          383100        50500  84400
`
	same(t, "departments", directory.must("departments"), departments)
	same(t, "change-email", directory.must("change-email", "david.brown@contoso.com", "david.brown-hill@contoso.com"), `Employees Sales/000003: Email david.brown-hill@contoso.com (journal position 21)
EmployeesByEmail at position 21: david.brown-hill@contoso.com -> Sales/000003 (David Brown)
EmployeesByEmail at position 21: david.brown@contoso.com -> nobody
`)
	if out, err := directory.run("find-email", "david.brown@contoso.com"); err == nil || !strings.Contains(err.Error(), "no employee has this address") {
		t.Fatalf("find-email of the old address: %v\n%s", err, out)
	}
	same(t, "departments after change-email", directory.must("departments"), departments)
	// A hire moves the aggregate at once (seed -n 21 adds employee 21).
	directory.must("seed", "-n", "21")
	if out := directory.must("departments"); !strings.Contains(out, "Sales        7          455800        50500  84400\n") {
		t.Fatalf("departments after a hire:\n%s", out)
	}

	// The log tail, in today's table and another day's.
	today := "Logs" + time.Now().UTC().Format("20060102")
	if today == "Logs20261122" {
		t.Skip("today is the README's other day")
	}
	if out := logtail.must("write", "-count", "30"); !strings.HasPrefix(out, today+"/web: 30 entries, ") {
		t.Fatalf("logtail write:\n%s", out)
	}
	if out := logtail.must("write", "-day", "20261122", "-count", "5", "old %d"); !strings.HasPrefix(out, "Logs20261122/web: 5 entries, 2026-11-22T") {
		t.Fatalf("logtail write -day:\n%s", out)
	}
	lines := strings.Split(strings.TrimSuffix(logtail.must("tail", "-n", "10"), "\n"), "\n")
	if len(lines) != 11 || lines[0] != today+"/web, newest first:" {
		t.Fatalf("logtail tail -n 10:\n%s", strings.Join(lines, "\n"))
	}
	prev := "~"
	for i, line := range lines[1:] {
		f := strings.Fields(line)
		if len(f) != 3 || f[1]+" "+f[2] != fmt.Sprintf("request %d", 30-i) || f[0] >= prev {
			t.Fatalf("logtail tail -n 10, line %d not request %d, newest first:\n%s", i+1, 30-i, strings.Join(lines, "\n"))
		}
		prev = f[0]
	}
	same(t, "logtail days", logtail.must("days"), "Logs20261122\n"+today+"\n(2)\n")
	same(t, "logtail drop-day", logtail.must("drop-day", "20261122"), "dropped Logs20261122: one request, however many entries it held\n")
	same(t, "logtail days after drop-day", logtail.must("days"), today+"\n(1)\n")
}
