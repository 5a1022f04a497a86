package natsauth

import "fmt"

// DevAccount is the development storage account's name. Its tables are
// also reached without the account in the subject, as before accounts
// became namespaces.
const DevAccount = "devstoreaccount1"

// ValidateAccount checks a storage account's name: 3 to 24 lowercase
// letters and digits.
func ValidateAccount(name string) error {
	if len(name) < 3 || len(name) > 24 {
		return fmt.Errorf("account name %q must be 3 to 24 characters long", name)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return fmt.Errorf("account name %q may contain only lowercase letters and digits", name)
		}
	}
	return nil
}

// TableSubjects returns the subjects that carry the entity commands of an
// account's table: <prefix>.cmd.<account>.<table>, and for the
// development account also <prefix>.cmd.<table>. table "*" stands for
// every table of the account. The subjects spell the table exactly as
// given: NATS subjects are case-sensitive even though table names are not.
func TableSubjects(prefix, account, table string) []string {
	s := []string{prefix + ".cmd." + account + "." + table}
	if account == DevAccount {
		s = append([]string{prefix + ".cmd." + table}, s...)
	}
	return s
}

// TablesSubjects returns the subjects that carry an account's table
// commands (CreateTable, DeleteTable, ListTables): <prefix>.tables.<account>,
// and for the development account also <prefix>.tables.
func TablesSubjects(prefix, account string) []string {
	s := []string{prefix + ".tables." + account}
	if account == DevAccount {
		s = append([]string{prefix + ".tables"}, s...)
	}
	return s
}
