package engine

import "strings"

// Accounts are namespaces: a table belongs to one storage account, and no
// other account sees it. Inside Cairn a table is named by its full name,
// which carries the account:
//
//   - "Employees" is the development account's table Employees. Every table
//     made before accounts were namespaces has such a name, so the
//     development account's data keeps its names, subjects and streams.
//   - "acme.Employees" is account acme's table Employees.
//
// The dot cannot occur in a table or account name, so the split is never
// ambiguous; a full name always has one spelling (the development
// account's tables are never written "devstoreaccount1.Employees").
// The committer, the journal and the views work on full names only; the
// front doors turn an account and a table into one (FullTableName) and
// show users the table part alone (SplitTableName).

// DevAccount is the development account of the Azure emulators, the
// owner of the tables whose full name is the bare table name.
const DevAccount = "devstoreaccount1"

// DevAccountKey is the development account's key, the emulators'
// well-known public one: anyone may sign for the development account,
// which is why a host can turn it off. The HTTP API checks signatures
// with it, and clients (the examples) sign with it.
const DevAccountKey = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

// Account name bounds: Azure's storage account names, 3 to 24 lowercase
// ASCII letters and digits.
const (
	MinAccountNameLen = 3
	MaxAccountNameLen = 24
)

// ValidateAccountName checks an account name: 3 to 24 lowercase ASCII
// letters and digits.
func ValidateAccountName(name string) error {
	if len(name) < MinAccountNameLen || len(name) > MaxAccountNameLen {
		return Errorf(CodeInvalidInput, "account name %q must be %d to %d characters long", name, MinAccountNameLen, MaxAccountNameLen)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return Errorf(CodeInvalidInput, "account name %q may contain only lowercase letters and digits (found %q at %d)", name, c, i)
		}
	}
	return nil
}

// FullTableName returns the full name of an account's table: the bare
// table name for the development account, "account.table" otherwise. It
// does not validate either part.
func FullTableName(account, table string) string {
	if account == "" || account == DevAccount {
		return table
	}
	return account + "." + table
}

// SplitTableName splits a full table name into its account (DevAccount for
// a bare name) and its table.
func SplitTableName(full string) (account, table string) {
	if a, t, ok := strings.Cut(full, "."); ok {
		return a, t
	}
	return DevAccount, full
}

// ShownTable is a table's name as its account sees it: the table part of
// its full name, for messages users read (they name their own account).
func ShownTable(full string) string {
	_, t := SplitTableName(full)
	return t
}

// TableOfAccount reports whether a full table name is one of account's
// tables, and that table's name as the account sees it.
func TableOfAccount(full, account string) (string, bool) {
	a, t := SplitTableName(full)
	if a != account && !(account == "" && a == DevAccount) {
		return "", false
	}
	return t, true
}

// ValidateFullTableName checks a full table name: a valid table name,
// alone or after a valid account name other than DevAccount and a dot.
func ValidateFullTableName(full string) error {
	a, t, ok := strings.Cut(full, ".")
	if !ok {
		return ValidateTableName(full)
	}
	if err := ValidateAccountName(a); err != nil {
		return err
	}
	if a == DevAccount {
		return Errorf(CodeInvalidInput, "table %q: the development account's tables are named without the account (%q)", full, t)
	}
	return ValidateTableName(t)
}
