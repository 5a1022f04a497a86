package httpapi

import "slices"

// ReservedAccountNames are valid storage account names that no account
// may have: the node serves /healthz, /readyz and /metrics (those exact
// paths) itself, and an account's own requests to its root
// (/<account>?comp=…) would reach them instead of the Tables API.
var ReservedAccountNames = []string{"healthz", "metrics", "readyz"}

// reservedAccount reports whether name is one of ReservedAccountNames.
func reservedAccount(name string) bool { return slices.Contains(ReservedAccountNames, name) }
