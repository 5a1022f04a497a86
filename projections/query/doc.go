// Package query evaluates the Azure Table service's queries on a view
// snapshot: the OData $filter subset (eq ne gt ge lt le, and or not,
// parentheses, typed literals), a planner that turns key conditions into a
// B-tree range so that point queries, RowKey ranges and partition scans
// read only what they must, and paging with continuation keys.
//
// # Parts
//
//   - ast.go: the syntax tree, Expr (Compare, And, Or, Not) and Op.
//   - lex.go: tokens and typed literals: strings in single quotes (a
//     quote doubled inside), true, false, Int32 (42), Int64 (42L), Double
//     (1.5, 1e3, 2d), datetime'RFC 3339', guid'…', X'hex' and
//     binary'hex or base64'.
//   - parse.go: Parse, the grammar (or binds looser than and, and than
//     not), and SyntaxError.
//   - eval.go: Expr.Match on an entity.
//   - plan.go: NewPlan, the key range of a filter, and Plan.Run, one page.
//
// # Semantics
//
// A comparison is a property and a literal, in either order. An entity
// without the property, or with a value of another type, does not match,
// not even ne (as in the Table service); Int32 and Int64 compare by value.
// Only conditions on PartitionKey and RowKey joined by and at the top of
// the filter narrow the walk (Kind: Point, Range, PartitionScan,
// TableScan); everything else, or included, is checked on each entity
// walked.
//
// # Failures
//
//   - A filter that does not parse is a *SyntaxError with the byte offset
//     of the fault and a sentence ("$filter: at 12: expected a comparison
//     operator …"), including literals that do not fit their type (an
//     Int32 past 2³¹, a datetime that is not RFC 3339) and nesting deeper
//     than 100, which bounds the parser's stack. Nothing is evaluated.
//   - A page whose Options.Deadline passes ends early, not with an error:
//     the deadline is checked every 256 entities examined, and the page
//     comes back with what it found, More set and the continuation keys of
//     the first entity not examined, where the next page resumes exactly.
//   - A continuation is only keys: resumed on a newer snapshot it continues
//     in key order without duplicates or gaps, but sees later writes.
//
// # Costs
//
// A point query is one B-tree lookup, O(log n); a range or partition scan
// walks O(log n + k) for the k entities in its range; a table scan walks
// every entity, or those between its PartitionKey bounds. A page holds at
// most MaxPage (1,000) entities, shared with the snapshot (not copied). A
// filter on a non-key property costs 15–16 ns per entity examined with a
// 1 % match on 12-property entities (BenchmarkScan: go test
// ./projections/query/ -run x -bench Scan, 2 cores); a Compare remembers
// where its property was in the last entity, so entities of one layout are
// searched once.
package query
