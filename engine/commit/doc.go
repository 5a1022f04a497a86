// Package commit is the committer: it turns validated commands into journal
// records, one partition at a time, and answers each command once its
// record is visible in this host's view.
//
// For each group of commands queued for one partition:
//
//  1. Take the view's latest snapshot and the partition's last sequence.
//  2. Decide the commands in order with engine.Decide against the snapshot
//     plus an engine.Overlay of the effects decided before them; commands
//     whose client id the view already holds are answered from the record
//     that committed them.
//  3. Append one record with the expected last sequence.
//  4. On success, wait until the view has applied the record, then answer.
//     On a conflict (another host wrote first), let the view catch up and
//     decide again. On an error of unknown outcome, settle it by the
//     partition's first record after the expected sequence (append.go).
//
// Table creation and deletion go through the catalog (tables.go).
package commit
