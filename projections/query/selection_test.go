package query

import (
	"strings"
	"testing"
)

// TestSelectionsRefuseWhatNamesNoProperty: both spellings of $select, the
// HTTP list and the NATS protocol's names, accept the same names and
// refuse the same mistakes, an empty name included.
func TestSelectionsRefuseWhatNamesNoProperty(t *testing.T) {
	for _, tc := range []struct {
		names []string
		ok    bool
	}{
		{[]string{"Name"}, true},
		{[]string{"PartitionKey", "RowKey", "Timestamp", "_x", "ü1"}, true},
		{[]string{""}, false},
		{[]string{"Name", ""}, false},
		{[]string{"1st"}, false},
		{[]string{"a-b"}, false},
		{[]string{"a b"}, false},
		{[]string{"\xff"}, false},
		{[]string{strings.Repeat("a", 256)}, false},
	} {
		sel, err := SelectNames(tc.names)
		if (err == nil) != tc.ok {
			t.Errorf("SelectNames(%q) = %v, %v; want ok %v", tc.names, sel, err, tc.ok)
		}
		if err == nil && len(sel) != len(tc.names) {
			t.Errorf("SelectNames(%q) selected %v", tc.names, sel)
		}
		// The same names as an HTTP $select, where spaces around a name
		// are allowed and an empty $select means every property.
		if tc.names[0] == "a b" || tc.names[0] == "" && len(tc.names) == 1 {
			continue
		}
		if _, err := ParseSelect(strings.Join(tc.names, ",")); (err == nil) != tc.ok {
			t.Errorf("ParseSelect(%q): %v; want ok %v", strings.Join(tc.names, ","), err, tc.ok)
		}
	}
}
