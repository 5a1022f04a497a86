package engine

import "testing"

func TestFullTableNames(t *testing.T) {
	for _, c := range []struct{ account, table, full string }{
		{DevAccount, "Employees", "Employees"},
		{"", "Employees", "Employees"},
		{"contoso", "Employees", "contoso.Employees"},
	} {
		full := FullTableName(c.account, c.table)
		if full != c.full {
			t.Errorf("FullTableName(%q, %q) = %q, want %q", c.account, c.table, full, c.full)
		}
		if err := ValidateFullTableName(full); err != nil {
			t.Errorf("%q: %v", full, err)
		}
		a, tb := SplitTableName(full)
		if tb != c.table || (a != c.account && !(c.account == "" && a == DevAccount)) {
			t.Errorf("SplitTableName(%q) = %q, %q", full, a, tb)
		}
		if got, ok := TableOfAccount(full, a); !ok || got != c.table {
			t.Errorf("TableOfAccount(%q, %q) = %q, %v", full, a, got, ok)
		}
	}
	if _, ok := TableOfAccount("contoso.Employees", DevAccount); ok {
		t.Error("the development account sees contoso's table")
	}
	if _, ok := TableOfAccount("Employees", "contoso"); ok {
		t.Error("contoso sees the development account's table")
	}
	for _, bad := range []string{"devstoreaccount1.Employees", "ab.Employees", "Contoso.Employees", "contoso.", "contoso.x", ".Employees", "a.b.c", "contoso.Emp.loyees", "contoso-1.Employees"} {
		if err := ValidateFullTableName(bad); ErrorCode(err) != CodeInvalidInput {
			t.Errorf("%q: %v, want InvalidInput", bad, err)
		}
	}
	for _, bad := range []string{"", "ab", "Contoso", "con-toso", "abcdefghijklmnopqrstuvwxy"} {
		if ValidateAccountName(bad) == nil {
			t.Errorf("account %q accepted", bad)
		}
	}
}
