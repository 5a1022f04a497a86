package natsauth

import "github.com/cairn-dev/cairn/engine"

// TableSubjects returns the subjects that carry the entity commands of an
// account's table: <prefix>.cmd.<account>.<table>, and for the
// development account also <prefix>.cmd.<table>; and the table's large
// value sessions, <prefix>.cmd.<account>.<table>.* (always with the
// account: the short form's <prefix>.cmd.<table>.* would name another
// account's tables). table "*" stands for every table of the account.
// The subjects spell the table exactly as given: NATS subjects are
// case-sensitive even though table names are not.
func TableSubjects(prefix, account, table string) []string {
	s := []string{prefix + ".cmd." + account + "." + table, prefix + ".cmd." + account + "." + table + ".*"}
	if account == engine.DevAccount {
		s = append([]string{prefix + ".cmd." + table}, s...)
	}
	return s
}

// TablesSubjects returns the subjects that carry an account's table
// commands (CreateTable, DeleteTable, ListTables): <prefix>.tables.<account>,
// and for the development account also <prefix>.tables.
func TablesSubjects(prefix, account string) []string {
	s := []string{prefix + ".tables." + account}
	if account == engine.DevAccount {
		s = append([]string{prefix + ".tables"}, s...)
	}
	return s
}

// ChangesSubjects returns the subjects of the change feed of an account's
// table: <prefix>.changes.<account>.<table>, and for the development
// account also <prefix>.changes.<table>. table "*" stands for every table
// of the account. Whoever may write a table may read its feed.
func ChangesSubjects(prefix, account, table string) []string {
	s := []string{prefix + ".changes." + account + "." + table}
	if account == engine.DevAccount {
		s = append([]string{prefix + ".changes." + table}, s...)
	}
	return s
}
