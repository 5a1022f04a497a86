package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
)

// TestExamplesHotPartitionWalkthrough follows the section of
// examples/README.md on hot partitions: the same log entries written into
// one partition and spread over ten, and the per-partition load the host
// reports for each in $load and /metrics.
func TestExamplesHotPartitionWalkthrough(t *testing.T) {
	dataDir := t.TempDir()
	h, _ := nodetest.Start(t, node.Config{DataDir: dataDir})
	hot := buildExample(t, "hotpartition", append(nodeFlags(h), "-operator-token-file", filepath.Join(dataDir, "operator.token"))...)

	same(t, "write date", hot.must("write", "date"), "LogsByDate: 500 entries written into 1 partition(s)\n")
	same(t, "write hashed", hot.must("write", "hashed"), "LogsHashed: 500 entries written into 10 partition(s)\n")
	same(t, "load LogsByDate", hot.must("load", "LogsByDate"), `LogsByDate: 500 writes in 500 journal records, 1 partition(s)
  PARTITION   WRITES  SHARE
  2026-11-28  500     100.0%
hottest partition: 2026-11-28 with 100.0% of 500 writes
`)
	same(t, "load LogsHashed", hot.must("load", "LogsHashed"), `LogsHashed: 500 writes in 500 journal records, 10 partition(s)
  PARTITION     WRITES  SHARE
  3-2026-11-28  56      11.2%
  6-2026-11-28  55      11.0%
  1-2026-11-28  52      10.4%
  8-2026-11-28  52      10.4%
  0-2026-11-28  51      10.2%
  4-2026-11-28  49      9.8%
  9-2026-11-28  49      9.8%
  7-2026-11-28  47      9.4%
  5-2026-11-28  46      9.2%
  2-2026-11-28  43      8.6%
hottest partition: 3-2026-11-28 with 11.2% of 500 writes
`)
	same(t, "metrics LogsByDate", hot.must("metrics", "LogsByDate"), `cairn_partition_writes_total{table="LogsByDate",partition="2026-11-28"} 500
`)
	same(t, "metrics LogsHashed", hot.must("metrics", "LogsHashed"), `cairn_partition_writes_total{table="LogsHashed",partition="0-2026-11-28"} 51
cairn_partition_writes_total{table="LogsHashed",partition="1-2026-11-28"} 52
cairn_partition_writes_total{table="LogsHashed",partition="2-2026-11-28"} 43
cairn_partition_writes_total{table="LogsHashed",partition="3-2026-11-28"} 56
cairn_partition_writes_total{table="LogsHashed",partition="4-2026-11-28"} 49
cairn_partition_writes_total{table="LogsHashed",partition="5-2026-11-28"} 46
cairn_partition_writes_total{table="LogsHashed",partition="6-2026-11-28"} 55
cairn_partition_writes_total{table="LogsHashed",partition="7-2026-11-28"} 47
cairn_partition_writes_total{table="LogsHashed",partition="8-2026-11-28"} 52
cairn_partition_writes_total{table="LogsHashed",partition="9-2026-11-28"} 49
`)

	// A second day's entries land in a partition of their own, and the
	// first day's partition stays the hottest: the load is counted per
	// partition, not per table.
	same(t, "write date -day 2026-11-29 -n 100", hot.must("write", "date", "-day", "2026-11-29", "-n", "100"), "LogsByDate: 100 entries written into 1 partition(s)\n")
	same(t, "load LogsByDate after a second day", hot.must("load", "LogsByDate"), `LogsByDate: 600 writes in 600 journal records, 2 partition(s)
  PARTITION   WRITES  SHARE
  2026-11-28  500     83.3%
  2026-11-29  100     16.7%
hottest partition: 2026-11-28 with 83.3% of 600 writes
`)

	// The operators' door answers $load with the token instead of a
	// signature, as the README's curl sends it.
	token, err := os.ReadFile(filepath.Join(dataDir, "operator.token"))
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, h.HTTPURL()+"/$cairn/tables/devstoreaccount1/$load?table=LogsByDate", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"hot":[{"partitionKey":"2026-11-28","records":500,"writes":500,`) {
		t.Fatalf("$load through the operators' door: %s\n%s", resp.Status, body)
	}

	// Refusals: a table that does not exist, /metrics without the node's
	// operator token.
	out, err := hot.run("load", "LogsNowhere")
	refused(t, "load of a table that does not exist", out, err, "", "hotpartition: GET "+h.HTTPURL()+"/devstoreaccount1/$load: HTTP 404 TableNotFound\n")
	wrong := filepath.Join(t.TempDir(), "operator.token")
	if err := os.WriteFile(wrong, []byte("not-the-operator-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = hot.run("-operator-token-file", wrong, "metrics", "LogsByDate")
	refused(t, "metrics with a wrong operator token", out, err, "", "hotpartition: GET "+h.HTTPURL()+"/metrics: HTTP 401 OperatorAuthenticationFailed\n")
}
