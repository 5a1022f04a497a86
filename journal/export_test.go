package journal

// Sample records for the tests of package journal_test.
var (
	SampleRecord  = sampleRecord
	SampleCatalog = sampleCatalog
	EqualRecords  = equalRecords
)
