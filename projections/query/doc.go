// Package query evaluates the Azure Table service's queries on a view
// snapshot: the OData $filter subset (eq ne gt ge lt le, and or not,
// parentheses, typed literals), a planner that turns key conditions into a
// B-tree range so that point queries, RowKey ranges and partition scans
// read only what they must, and paging with continuation keys.
package query
