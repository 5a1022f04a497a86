package main

import (
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
)

// TestExamplesDataSeries follows the section of examples/README.md on a
// series in one entity and a wide entity in two with the commands it
// gives, and checks what the README says they print: a Merge keeps the
// other hours, the parts of a wide entity are written at one position
// and read back whole, and one entity of 288 properties is refused.
func TestExamplesDataSeries(t *testing.T) {
	h, _ := nodetest.Start(t, node.Config{})
	dataseries := buildExample(t, "dataseries", nodeFlags(h)...)

	same(t, "seed", dataseries.must("seed"), "table Activity: 000123/hours_20261127 with 24 hourly counters H00 to H23 (journal position 1)\n")
	same(t, "hours", dataseries.must("hours", "000123", "20261127"), `Activity 000123/hours_20261127: 24 properties
  H00-H05     0     0     0     0     0     0
  H06-H11     0     0     0    21    15    22
  H12-H17    16    10    17    11    18    12
  H18-H23     0     0     0     0     0     0
`)
	same(t, "record", dataseries.must("record", "000123", "20261127", "14", "42"), `merged H14 = 42 into 000123/hours_20261127 (journal position 2)
Activity 000123/hours_20261127: 24 properties
  H00-H05     0     0     0     0     0     0
  H06-H11     0     0     0    21    15    22
  H12-H17    16    10    42    11    18    12
  H18-H23     0     0     0     0     0     0
`)
	same(t, "wide", dataseries.must("wide", "000123", "20261127"), "000123/minutes_20261127: 288 readings in 2 entities, one batch (journal position 3)\n")
	same(t, "read-wide", dataseries.must("read-wide", "000123", "20261127"), `Activity where PartitionKey eq '000123' and RowKey ge 'minutes_20261127_part' and RowKey lt 'minutes_20261127_paru':
  minutes_20261127_part1  144 readings, M0000 to M1155, written at position 3
  minutes_20261127_part2  144 readings, M1200 to M2355, written at position 3
000123 on 20261127: 288 readings, 0 missing, total 14236, highest 99 at 02:15
`)

	// One entity of 288 properties: refused with the limit's code, exit
	// status 1, and the two parts are as they were.
	out, err := dataseries.run("wide", "000123", "20261127", "-parts", "1")
	refused(t, "wide -parts 1", out, err, "", "dataseries: 000123/minutes_20261127_part1: 288 readings in one entity: TooManyProperties: operation 0: the entity has 288 properties; the limit is 252 besides PartitionKey, RowKey and Timestamp\n")
	if out := dataseries.must("read-wide", "000123", "20261127"); !strings.Contains(out, "part2  144 readings, M1200 to M2355, written at position 3\n") {
		t.Fatalf("read-wide after the refused write:\n%s", out)
	}

	// Three parts, then two again: the batch of two deletes the third, so
	// the day is still read whole and once.
	same(t, "wide -parts 3", dataseries.must("wide", "000123", "20261127", "-parts", "3"), "000123/minutes_20261127: 288 readings in 3 entities, one batch (journal position 4)\n")
	same(t, "wide after three parts", dataseries.must("wide", "000123", "20261127"), "000123/minutes_20261127: 288 readings in 2 entities, one batch (journal position 5); it deleted one entity left by an earlier write\n")
	if out := dataseries.must("read-wide", "000123", "20261127"); !strings.HasSuffix(out, "part2  144 readings, M1200 to M2355, written at position 5\n000123 on 20261127: 288 readings, 0 missing, total 14236, highest 99 at 02:15\n") {
		t.Fatalf("read-wide after three parts and two:\n%s", out)
	}

	// Merge changes an existing entity: a day without a series is not one.
	if out, err := dataseries.run("record", "000123", "20261128", "1", "1"); err == nil || !strings.Contains(err.Error(), "ResourceNotFound") {
		t.Fatalf("record on a day without a series: %v\n%s", err, out)
	}
}
