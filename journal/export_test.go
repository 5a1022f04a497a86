package journal

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
)

// Sample records for the tests of package journal_test.
var (
	SampleRecord  = sampleRecord
	SampleCatalog = sampleCatalog
	EqualRecords  = equalRecords
	Matches       = func(subj, filter string) bool { return matchesAny(subj, []string{filter}) }
)

// JetStream is the journal's JetStream context, for tests that look at
// what it leaves on the server.
func (j *Journal) JetStream() jetstream.JetStream { return j.js }

// LoseInTransit makes the journal's readers treat the delivery of a
// stream sequence as lost on its way (a test of what a reconnect loses).
func (j *Journal) LoseInTransit(f func(stream string, seq uint64) bool) { j.lose = f }

// NoConsumerWhile makes the journal's readers' consumer creations go
// unanswered while f says so (a test of a meta leader being elected).
func (j *Journal) NoConsumerWhile(f func(stream string) bool) { j.noConsumer = f }

// LoseAck makes the answers of the appends on a subject go unheard while
// f says so; f is called before each is sent.
func (j *Journal) LoseAck(f func(subj string) bool) { j.loseAck = f }

// FailAppends makes an append's outcome the error f returns, without
// sending it, when that is not nil; f is called before each is sent.
func (j *Journal) FailAppends(f func(subj string, data []byte) error) { j.failAppend = f }

// MaxReadsPerTable is how many Reads of one table hold a consumer at once.
const MaxReadsPerTable = maxReadsPerTable

// TakeRead takes a place among the Reads of a table incarnation, as Read
// does, and returns the func that gives it back.
func (j *Journal) TakeRead(ctx context.Context, table string, epoch uint64) (func(), error) {
	return j.takeRead(ctx, StreamName(j.cfg.Prefix, table, epoch))
}
