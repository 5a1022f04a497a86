package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"github.com/cairn-dev/cairn/cmd/internal/console"
	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
	"github.com/cairn-dev/cairn/functions"
	"github.com/cairn-dev/cairn/functions/admin"
)

// TestConsoleInBrowser drives the console in a real headless Chromium
// against a real node: sign-in, tables (create, typed inserts, query with
// a filter and paging, an ETag conflict, export, import, deletes),
// functions, queues with poison messages, projections and the outbox.
func TestConsoleInBrowser(t *testing.T) {
	ctx := browserCtx(t)
	h, _ := nodetest.Start(t, node.Config{})
	<-h.Functions().Ready()
	// A function that fails while fail is set: its messages go to
	// orders-poison after two attempts.
	var fail atomic.Bool
	var handled atomic.Int32
	fail.Store(true)
	m := functions.Manifest{Name: "orders", Trigger: functions.Trigger{Queue: "orders"}, MaxDequeueCount: 2,
		BackoffMin: functions.Duration(20 * time.Millisecond), BackoffMax: functions.Duration(100 * time.Millisecond)}
	if err := h.Functions().Register(m, functions.NativeFunc(func(ctx context.Context, inv *functions.Invocation) error {
		if fail.Load() {
			return errors.New("payment service refused: " + string(inv.Trigger().Body))
		}
		handled.Add(1)
		return nil
	})); err != nil {
		t.Fatal(err)
	}

	downloads := t.TempDir()
	u := newUI(t, ctx, 0)
	base := h.HTTPURL() + console.Path

	// Sign in: a wrong token is refused with a message, the right one
	// opens the tables.
	u.do("open the console",
		browser.SetDownloadBehavior(browser.SetDownloadBehaviorBehaviorAllow).WithDownloadPath(downloads),
		chromedp.Navigate(base),
		chromedp.WaitVisible("#login-dialog[open]", chromedp.ByQuery))
	u.shot("login")
	u.do("wrong token",
		chromedp.SendKeys("#login-token", "not-the-token-0000", chromedp.ByQuery),
		chromedp.Click("#login-submit", chromedp.ByQuery),
		chromedp.WaitVisible("#login-error", chromedp.ByQuery))
	if msg := u.text("#login-error"); !strings.Contains(msg, "refused") {
		t.Fatalf("wrong token: the message is %q", msg)
	}
	u.shot("login-refused")
	u.do("sign in",
		chromedp.SendKeys("#login-token", h.OperatorToken(), chromedp.ByQuery),
		chromedp.Click("#login-submit", chromedp.ByQuery),
		chromedp.WaitVisible("#table-list", chromedp.ByQuery))

	// Create a table.
	u.do("create a table",
		chromedp.Click("#new-table", chromedp.ByQuery),
		chromedp.SendKeys("#new-table-name", "People", chromedp.ByQuery),
		chromedp.Click("#create-table", chromedp.ByQuery),
		until(`location.hash === '#/tables/People' && !!document.querySelector('#results')`))
	// A name the server refuses shows its coded error.
	u.do("create a bad table",
		chromedp.Click("#new-table", chromedp.ByQuery),
		chromedp.SendKeys("#new-table-name", "People", chromedp.ByQuery),
		chromedp.Click("#create-table", chromedp.ByQuery),
		chromedp.WaitVisible("#create-table-error", chromedp.ByQuery))
	if msg := u.text("#create-table-error"); !strings.Contains(msg, "TableAlreadyExists") {
		t.Fatalf("creating an existing table: %q", msg)
	}

	// Typed entities through the editor; a value not of its type is
	// refused in the editor, and nothing is sent.
	u.do("bad value",
		chromedp.Click("#add-entity", chromedp.ByQuery),
		chromedp.SendKeys("#ed-pk", "eng", chromedp.ByQuery),
		chromedp.SendKeys("#ed-rk", "000", chromedp.ByQuery),
		prop(1, "Age", "Int32", "thirty"),
		chromedp.Click("#ed-save", chromedp.ByQuery),
		chromedp.WaitVisible("#ed-error", chromedp.ByQuery))
	if msg := u.text("#ed-error"); !strings.Contains(msg, "Age") || !strings.Contains(msg, "Int32") {
		t.Fatalf("bad Int32: %q", msg)
	}
	u.do("cancel", chromedp.Click("#ed-cancel", chromedp.ByQuery), chromedp.WaitNotPresent("#editor", chromedp.ByQuery))
	u.insert("eng", "001",
		[3]string{"Name", "String", "Ada"}, [3]string{"Age", "Int32", "36"}, [3]string{"Big", "Int64", "9007199254740993"},
		[3]string{"Score", "Double", "1.5"}, [3]string{"Active", "Boolean", "true"}, [3]string{"Born", "DateTime", "1815-12-10T00:00:00Z"},
		[3]string{"Id", "Guid", "3f2504e0-4f89-11d3-9a0c-0305e82c3301"}, [3]string{"Data", "Binary", "aGk="})
	u.insert("eng", "002", [3]string{"Name", "String", "Grace"}, [3]string{"Age", "Int32", "45"})
	u.insert("ops", "003", [3]string{"Name", "String", "Linus"}, [3]string{"Age", "Int32", "28"})
	u.do("three rows", until(`document.querySelectorAll('#results tbody tr[data-index]').length === 3`))
	u.shot("table-typed-grid")

	// The table's load follows its writes within seconds; one partition
	// taking most of them is flagged hot.
	const loadSummary = `(document.querySelector('#table-load-summary')?.textContent || '')`
	u.do("the load of three writes", until(loadSummary+`.includes('2 partitions · 3 writes') && `+loadSummary+`.includes('most written: eng (66.7 % of writes)') && !`+loadSummary+`.includes('hot partition')`))
	if st, _, b := operator(t, h, "POST", httpapi.OperatorPrefix+"devstoreaccount1/Tables", []byte(`{"TableName":"Hot"}`), map[string]string{"Content-Type": "application/json"}); st != http.StatusCreated {
		t.Fatalf("create Hot: %d %s", st, b)
	}
	for i := range 121 {
		pk := "today"
		if i%40 == 0 {
			pk = "yesterday"
		}
		body := fmt.Sprintf(`{"PartitionKey":%q,"RowKey":"%03d"}`, pk, i)
		if st, _, b := operator(t, h, "POST", httpapi.OperatorPrefix+"devstoreaccount1/Hot", []byte(body), map[string]string{"Content-Type": "application/json", "Prefer": "return-no-content"}); st != http.StatusNoContent {
			t.Fatalf("insert %d: %d %s", i, st, b)
		}
	}
	u.do("a hot partition",
		chromedp.Evaluate(`location.hash = '#/tables/Hot'`, nil),
		until(loadSummary+`.includes('121 writes') && `+loadSummary+`.includes('most written: today (96.7 % of writes)') && `+loadSummary+`.includes('hot partition')`),
		chromedp.Click("#table-load-summary", chromedp.ByQuery),
		until(`document.querySelectorAll('#load-partitions tbody tr').length === 2 && document.querySelector('#load-partitions tbody tr td')?.textContent === 'today'`))
	if txt := u.text("#load-partitions"); !strings.Contains(txt, "today\t117\t96.7 %") || !strings.Contains(txt, "yesterday\t4\t3.3 %") {
		t.Fatalf("the load's partitions: %q", txt)
	}
	u.shot("table-load-hot")
	u.do("back to People",
		chromedp.Evaluate(`location.hash = '#/tables/People'`, nil),
		until(`document.querySelectorAll('#results tbody tr[data-index]').length === 3`))
	if st, _, b := operator(t, h, "DELETE", httpapi.OperatorPrefix+"devstoreaccount1/Tables('Hot')", nil, nil); st != http.StatusNoContent {
		t.Fatalf("delete Hot: %d %s", st, b)
	}

	// The editor belongs to its table's page: switching to another table,
	// going Back, or switching while the entity is still being read for
	// it, leaves no editor over the next page.
	st, _, b := operator(t, h, "POST", httpapi.OperatorPrefix+"devstoreaccount1/Tables", []byte(`{"TableName":"Teams"}`), map[string]string{"Content-Type": "application/json"})
	if st != http.StatusCreated {
		t.Fatalf("create Teams: %d %s", st, b)
	}
	const showing = `location.hash === '#/tables/%[1]s' && document.querySelector('.pane h1') && document.querySelector('.pane h1').textContent === '%[1]s' && !!document.querySelector('#results') && !document.querySelector('#editor') && !document.querySelector('dialog[open]')`
	u.do("switch table with the editor open",
		chromedp.DoubleClick(`#results tbody tr[data-index="0"]`, chromedp.ByQuery),
		chromedp.WaitVisible("#editor", chromedp.ByQuery),
		chromedp.Evaluate(`location.hash = '#/tables/Teams'`, nil),
		until(fmt.Sprintf(showing, "Teams")))
	u.do("Back with the editor open",
		chromedp.Click("#add-entity", chromedp.ByQuery),
		chromedp.WaitVisible("#editor", chromedp.ByQuery),
		chromedp.NavigateBack(),
		until(fmt.Sprintf(showing, "People")+` && document.querySelectorAll('#results tbody tr[data-index]').length === 3`))
	u.do("switch table while the editor loads",
		chromedp.Evaluate(`document.querySelector('#results tbody tr[data-index="1"]').dispatchEvent(new MouseEvent('dblclick', { bubbles: true })); location.hash = '#/tables/Teams'`, nil),
		until(fmt.Sprintf(showing, "Teams")+` && document.querySelector('#page-info').textContent.startsWith('Page 1 · 0 entities')`))
	var editors int
	u.js(`document.querySelectorAll('#editor, dialog[open]').length`, &editors)
	if editors != 0 {
		t.Fatalf("%d editors or dialogs open over Teams after leaving People", editors)
	}
	u.shot("editor-closed-on-navigation")
	if st, _, b := operator(t, h, "DELETE", httpapi.OperatorPrefix+"devstoreaccount1/Tables('Teams')", nil, nil); st != http.StatusNoContent {
		t.Fatalf("delete Teams: %d %s", st, b)
	}
	u.do("back to People",
		chromedp.Evaluate(`location.hash = '#/tables/People'`, nil),
		until(fmt.Sprintf(showing, "People")+` && document.querySelectorAll('#results tbody tr[data-index]').length === 3`))
	st, _, b = operator(t, h, "GET", httpapi.OperatorPrefix+"devstoreaccount1/People(PartitionKey='eng',RowKey='001')", nil, nil)
	var ada map[string]any
	if st != 200 || json.Unmarshal(b, &ada) != nil {
		t.Fatalf("read the inserted entity: %d %s", st, b)
	}
	for name, typ := range map[string]string{"Big": "Edm.Int64", "Score": "Edm.Double", "Born": "Edm.DateTime", "Id": "Edm.Guid", "Data": "Edm.Binary"} {
		if ada[name+"@odata.type"] != typ {
			t.Errorf("%s stored as %v, want %s (%s)", name, ada[name+"@odata.type"], typ, b)
		}
	}
	if ada["Big"] != "9007199254740993" || ada["Age"] != 36.0 || ada["Active"] != true || ada["Name"] != "Ada" {
		t.Errorf("stored values: %s", b)
	}
	var heads string
	u.js(`[...document.querySelectorAll('#results thead th')].map(th => th.textContent).join('|')`, &heads)
	if !strings.Contains(heads, "Big Int64") || !strings.Contains(heads, "Born DateTime") || !strings.Contains(heads, "Age Int32") {
		t.Errorf("grid headers %q lack the types", heads)
	}

	// The table's history: nothing pruned, the node's default retention.
	u.do("history", until(`document.querySelector('#table-history').textContent.startsWith('journal from position 1 · keeps everything (default)')`))

	// A filter, two per page: the continuation leads to the third.
	u.do("query page 1",
		setValue("#q-filter", "Age gt 20"),
		setValue("#q-top", "2"),
		chromedp.Click("#q-run", chromedp.ByQuery),
		until(`document.querySelector('#page-info').textContent.startsWith('Page 1 · 2 entities') && !document.querySelector('#next-page').disabled`))
	u.shot("query-page-1")
	u.do("query page 2",
		chromedp.Click("#next-page", chromedp.ByQuery),
		until(`document.querySelector('#page-info').textContent.startsWith('Page 2 · 1 entity') && document.querySelector('#next-page').disabled`))
	if rk := u.text("#results tbody tr td:nth-child(2)"); rk != "003" {
		t.Fatalf("page 2 shows RowKey %q, want 003", rk)
	}
	// A filter the server cannot parse shows its coded error.
	u.do("bad filter",
		setValue("#q-filter", "Age gt"),
		chromedp.Click("#q-run", chromedp.ByQuery),
		chromedp.WaitVisible("#query-error", chromedp.ByQuery))
	if msg := u.text("#query-error"); !strings.Contains(msg, "Invalid") {
		t.Fatalf("bad filter: %q", msg)
	}
	u.do("PartitionKey query",
		setValue("#q-filter", ""),
		setValue("#q-top", "100"),
		setValue("#q-pk", "eng"),
		chromedp.Click("#q-run", chromedp.ByQuery),
		until(`document.querySelector('#page-info').textContent.startsWith('Page 1 · 2 entities')`))

	// An edit against a stale ETag: the entity changes behind the
	// editor's back, saving shows the conflict, reload shows the change.
	u.do("open the editor",
		chromedp.DoubleClick(`#results tbody tr[data-index="1"]`, chromedp.ByQuery),
		chromedp.WaitVisible("#editor", chromedp.ByQuery))
	st, _, b = operator(t, h, "PUT", httpapi.OperatorPrefix+"devstoreaccount1/People(PartitionKey='eng',RowKey='002')",
		[]byte(`{"PartitionKey":"eng","RowKey":"002","Name":"Grace Hopper","Age":46}`), map[string]string{"Content-Type": "application/json"})
	if st != http.StatusNoContent {
		t.Fatalf("change behind the editor: %d %s", st, b)
	}
	u.do("save with the stale ETag",
		chromedp.Evaluate(`[...document.querySelectorAll('#editor .prop-row')].find(r => r.querySelector('.prop-name').value === 'Name').querySelector('.prop-value').value = 'Grace B. Hopper'`, nil),
		chromedp.Click("#ed-save", chromedp.ByQuery),
		chromedp.WaitVisible("#ed-conflict", chromedp.ByQuery))
	if msg := u.text("#ed-conflict"); !strings.Contains(msg, "Changed by someone else") {
		t.Fatalf("conflict message: %q", msg)
	}
	u.shot("etag-conflict")
	u.do("reload",
		chromedp.Click("#ed-reload", chromedp.ByQuery),
		chromedp.WaitNotVisible("#ed-conflict", chromedp.ByQuery),
		until(`[...document.querySelectorAll('#editor .prop-value')].some(i => i.value === 'Grace Hopper')`))
	u.do("save after reload",
		chromedp.Click("#ed-save", chromedp.ByQuery),
		chromedp.WaitNotPresent("#editor", chromedp.ByQuery))
	_, _, b = operator(t, h, "GET", httpapi.OperatorPrefix+"devstoreaccount1/People(PartitionKey='eng',RowKey='002')", nil, nil)
	if !bytes.Contains(b, []byte(`"Age":46`)) {
		t.Fatalf("after the conflict the stored entity is %s", b)
	}

	// Editing from a grid read with $select edits the whole entity: the
	// properties not selected are kept.
	u.do("edit from a $select",
		setValue("#q-select", "Name"),
		chromedp.Click("#q-run", chromedp.ByQuery),
		until(`document.querySelector('#results thead').textContent.includes('Name') && !document.querySelector('#results thead').textContent.includes('Big')`),
		chromedp.DoubleClick(`#results tbody tr[data-index="0"]`, chromedp.ByQuery),
		chromedp.WaitVisible("#editor", chromedp.ByQuery),
		until(`document.querySelectorAll('#editor .prop-row').length === 8`),
		chromedp.Evaluate(`[...document.querySelectorAll('#editor .prop-row')].find(r => r.querySelector('.prop-name').value === 'Name').querySelector('.prop-value').value = 'Ada L.'`, nil),
		chromedp.Click("#ed-save", chromedp.ByQuery),
		chromedp.WaitNotPresent("#editor", chromedp.ByQuery),
		setValue("#q-select", ""))
	_, _, b = operator(t, h, "GET", httpapi.OperatorPrefix+"devstoreaccount1/People(PartitionKey='eng',RowKey='001')", nil, nil)
	if !bytes.Contains(b, []byte(`"Name":"Ada L."`)) || !bytes.Contains(b, []byte(`"Big":"9007199254740993"`)) {
		t.Fatalf("after an edit from a $select grid: %s", b)
	}

	// Export the whole table as JSON and CSV.
	u.do("export",
		setValue("#q-pk", ""),
		chromedp.Click("#q-run", chromedp.ByQuery),
		until(`document.querySelector('#page-info').textContent.startsWith('Page 1 · 3 entities')`),
		chromedp.Click("#export-json", chromedp.ByQuery),
		chromedp.Click("#export-csv", chromedp.ByQuery))
	var exported []map[string]any
	if err := json.Unmarshal(waitFile(t, downloads, ".json"), &exported); err != nil || len(exported) != 3 {
		t.Fatalf("JSON export: %d entities, %v", len(exported), err)
	}
	if exported[0]["Big@odata.type"] != "Edm.Int64" || exported[0]["Big"] != "9007199254740993" || exported[0]["Score@odata.type"] != "Edm.Double" {
		t.Fatalf("JSON export of the typed entity: %v", exported[0])
	}
	csv := string(waitFile(t, downloads, ".csv"))
	if !strings.HasPrefix(csv, "PartitionKey,RowKey,Timestamp,Active,Active@type,Age,Age@type,") || !strings.Contains(csv, "\r\nops,003,") || !strings.Contains(csv, "9007199254740993,Edm.Int64") {
		t.Fatalf("CSV export:\n%s", csv)
	}

	// Import JSON (the export, into another partition, and more) with
	// its progress shown; then a CSV.
	var imp []map[string]any
	for i := range 20 {
		imp = append(imp, map[string]any{"PartitionKey": "imported", "RowKey": fmt.Sprintf("%03d", i), "Name": fmt.Sprint("n", i),
			"Age": 20 + i, "When@odata.type": "Edm.DateTime", "When": "2024-05-01T12:00:00Z"})
	}
	impFile := filepath.Join(t.TempDir(), "people.json")
	raw, _ := json.Marshal(imp)
	if err := os.WriteFile(impFile, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	u.do("import JSON",
		chromedp.SetUploadFiles("#import-file", []string{impFile}, chromedp.ByQuery),
		chromedp.WaitVisible("#import-progress", chromedp.ByQuery),
		until(`document.querySelector('#import-progress').classList.contains('done')`))
	if msg := u.text("#import-progress span"); !strings.Contains(msg, "Imported 20 of 20") {
		t.Fatalf("import progress: %q", msg)
	}
	var bar float64
	u.js(`document.querySelector('#import-progress progress').value`, &bar)
	if bar != 20 {
		t.Fatalf("the progress bar stands at %v, want 20", bar)
	}
	u.do("grid after import", until(`document.querySelector('#page-info').textContent.startsWith('Page 1 · 23 entities')`))
	u.shot("imported")
	csvFile := filepath.Join(t.TempDir(), "more.csv")
	if err := os.WriteFile(csvFile, []byte("PartitionKey,RowKey,Age,Age@type,Note\r\ncsv,1,7,Edm.Int64,\"a, quoted \"\"note\"\"\"\r\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	u.do("import CSV",
		chromedp.SetUploadFiles("#import-file", []string{csvFile}, chromedp.ByQuery),
		until(`document.querySelector('#import-progress span').textContent.startsWith('Imported 1 of 1 entities from more.csv')`))
	_, _, b = operator(t, h, "GET", httpapi.OperatorPrefix+"devstoreaccount1/People(PartitionKey='csv',RowKey='1')", nil, nil)
	if !bytes.Contains(b, []byte(`"Age@odata.type":"Edm.Int64","Age":"7"`)) || !bytes.Contains(b, []byte(`"Note":"a, quoted \"note\""`)) {
		t.Fatalf("CSV import stored %s", b)
	}

	// Delete an entity (confirmed), then the table (confirmed).
	u.do("delete an entity",
		setValue("#q-pk", "ops"),
		chromedp.Click("#q-run", chromedp.ByQuery),
		until(`document.querySelector('#page-info').textContent.startsWith('Page 1 · 1 entity')`),
		chromedp.Click(`#results tbody tr[data-index="0"]`, chromedp.ByQuery),
		chromedp.Click("#delete-entity", chromedp.ByQuery),
		chromedp.WaitVisible("#confirm-dialog[open]", chromedp.ByQuery),
		chromedp.Click("#confirm-ok", chromedp.ByQuery),
		until(`document.querySelector('#page-info').textContent.startsWith('Page 1 · 0 entities')`))
	if st, _, _ := operator(t, h, "GET", httpapi.OperatorPrefix+"devstoreaccount1/People(PartitionKey='ops',RowKey='003')", nil, nil); st != http.StatusNotFound {
		t.Fatalf("the deleted entity reads %d", st)
	}
	u.do("delete the table",
		chromedp.Click("#delete-table", chromedp.ByQuery),
		chromedp.WaitVisible("#confirm-dialog[open]", chromedp.ByQuery))
	u.shot("delete-table-confirm")
	u.do("confirm",
		chromedp.Click("#confirm-ok", chromedp.ByQuery),
		until(`location.hash === '#/tables' && document.querySelector('#table-list').textContent.includes('No tables yet')`))
	if st, _, _ := operator(t, h, "GET", httpapi.OperatorPrefix+"devstoreaccount1/Tables('People')", nil, nil); st != http.StatusNotFound {
		t.Fatalf("the deleted table reads %d", st)
	}

	// Functions: the built-in archive function, the runner's counters, and
	// a deployed function whose two versions do not load (not WebAssembly):
	// its load error, its history, a rollback to version 1.
	reg := h.Functions().Registry()
	bm := functions.Manifest{Name: "broken", Trigger: functions.Trigger{Queue: "broken"}}
	v1, err := reg.Deploy(context.Background(), bm, []byte("not a module, version 1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Deploy(context.Background(), bm, []byte("not a module, version 2")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the node reports that broken version 2 does not load", func() bool {
		f, ok := h.Functions().LoadFailure("broken")
		return ok && f.Version == 2
	})
	u.do("functions",
		chromedp.Navigate(base+"#/functions"),
		until(`!!document.querySelector('table.functions') && document.querySelector('table.functions').textContent.includes('archive')`))
	if txt := u.text("table.functions"); !strings.Contains(txt, "load failed") || !strings.Contains(txt, "broken") {
		t.Fatalf("functions table: %q", txt)
	}
	u.do("history",
		chromedp.Evaluate(`[...document.querySelectorAll('table.functions tbody tr')].find(r => r.textContent.includes('broken')).querySelector('button').click()`, nil),
		until(`document.querySelectorAll('table.history tbody tr').length === 2`))
	u.shot("functions")
	u.do("roll back",
		chromedp.Click("table.history .rollback", chromedp.ByQuery),
		chromedp.WaitVisible("#confirm-dialog[open]", chromedp.ByQuery),
		chromedp.Click("#confirm-ok", chromedp.ByQuery),
		until(`document.querySelectorAll('table.history tbody tr').length === 3`))
	if cur, err := reg.Get(context.Background(), "broken"); err != nil || cur.Version != 3 || cur.Digest != v1.Digest {
		t.Fatalf("after the rollback: %+v %v, want version 3 with version 1's module", cur, err)
	}

	// Queues: enqueue two orders through the page; the function fails on
	// them and they land in orders-poison; one is requeued (and then
	// handled), the other deleted.
	for _, order := range []string{"order 41", "order 42"} {
		u.do("enqueue "+order,
			chromedp.Navigate(base+"#/queues/orders"),
			chromedp.WaitVisible("#enqueue-body", chromedp.ByQuery),
			setValue("#enqueue-body", order),
			chromedp.Evaluate(`document.querySelector('#toast').textContent = ''`, nil),
			chromedp.Click("#enqueue", chromedp.ByQuery),
			until(`document.querySelector('#toast').textContent.startsWith('Message enqueued')`))
	}
	q := h.QueueAdmin()
	eventually(t, "two messages in orders-poison", func() bool {
		ps, err := q.Poison(context.Background(), "orders", 0, 10)
		return err == nil && len(ps) == 2
	})
	u.do("queues",
		chromedp.Navigate(base+"#/queues"),
		until(`!!document.querySelector('table.queues') && document.querySelector('table.queues').textContent.includes('orders-poison')`))
	u.shot("queues")
	u.do("poison queue",
		chromedp.Navigate(base+"#/queues/orders-poison"),
		until(`document.querySelectorAll('.poison-msg').length === 2`))
	if card := u.text(".poison-msg"); !strings.Contains(card, "payment service refused: order 41") || !strings.Contains(strings.Join(strings.Fields(card), " "), "Attempts 2") {
		t.Fatalf("poison message card: %q", card)
	}
	u.shot("poison-messages")
	fail.Store(false)
	u.do("requeue",
		chromedp.Click(".poison-msg:nth-child(1) .requeue", chromedp.ByQuery),
		until(`document.querySelectorAll('.poison-msg').length === 1`))
	eventually(t, "the requeued order handled", func() bool { return handled.Load() == 1 })
	u.do("delete poison",
		chromedp.Click(".poison-msg .delete", chromedp.ByQuery),
		chromedp.WaitVisible("#confirm-dialog[open]", chromedp.ByQuery),
		chromedp.Click("#confirm-ok", chromedp.ByQuery),
		until(`document.querySelectorAll('.poison-msg').length === 0`))
	if ps, err := q.Poison(context.Background(), "orders", 0, 10); err != nil || len(ps) != 0 {
		t.Fatalf("orders-poison after requeue and delete: %v %v", ps, err)
	}

	// Projections and the outbox render what their endpoints report: a
	// write with an outbox message gives the outbox a table to show.
	st, _, b = operator(t, h, "POST", httpapi.OperatorPrefix+"devstoreaccount1/Tables", []byte(`{"TableName":"Orders"}`), map[string]string{"Content-Type": "application/json"})
	if st != http.StatusCreated {
		t.Fatalf("create Orders: %d %s", st, b)
	}
	st, _, b = operator(t, h, "POST", httpapi.OperatorPrefix+"devstoreaccount1/Orders", []byte(`{"PartitionKey":"o","RowKey":"1"}`),
		map[string]string{"Content-Type": "application/json", httpapi.MessagesHeader: `[{"queue":"audit","body":"order 1 placed"}]`})
	if st != http.StatusCreated {
		t.Fatalf("write with a message: %d %s", st, b)
	}
	st, _, b = operator(t, h, "POST", httpapi.OperatorPrefix+"devstoreaccount1/Orders", []byte(`{"PartitionKey":"o","RowKey":"2","Customer":"contoso","Total":12}`),
		map[string]string{"Content-Type": "application/json"})
	if st != http.StatusCreated {
		t.Fatalf("write an order: %d %s", st, b)
	}
	st, _, b = operator(t, h, "PUT", "/$cairn/projections", []byte(`{"name":"OrdersByCustomer","source":"Orders","version":1,"kind":"index","key":["Customer"]}`),
		map[string]string{"Content-Type": "application/json"})
	if st != http.StatusOK {
		t.Fatalf("declare a projection: %d %s", st, b)
	}
	// The pages read once when they open: wait until the node reports
	// what they should show (the projection attached, the outbox's
	// position stored, the message relayed to its queue).
	reports := func(path, want string) func() bool {
		return func() bool {
			st, _, b := operator(t, h, "GET", path, nil, nil)
			return st == http.StatusOK && strings.Contains(strings.ToLower(string(b)), strings.ToLower(want))
		}
	}
	eventually(t, "this node's status of OrdersByCustomer", reports("/$cairn/projections", `"status":[{"name":"OrdersByCustomer"`))
	eventually(t, "the outbox's report of Orders", reports("/$cairn/outbox", `"stream":"CAIRN_T_orders`))
	eventually(t, "the message relayed to audit", reports("/$cairn/queues/audit/peek", `"seq"`))
	u.do("projections",
		chromedp.Navigate(base+"#/projections"),
		until(`!!document.querySelector('table.projections') && document.querySelector('table.projections').textContent.includes('OrdersByCustomer')`))
	u.shot("projections")
	u.do("rebuild",
		chromedp.Click("table.projections .rebuild", chromedp.ByQuery),
		chromedp.WaitVisible("#confirm-dialog[open]", chromedp.ByQuery),
		chromedp.Click("#confirm-ok", chromedp.ByQuery),
		until(`document.querySelector('#toast').textContent.startsWith('Rebuilding OrdersByCustomer (generation 1)')`))
	eventually(t, "OrdersByCustomer rebuilt (generation 1)", reports("/$cairn/projections", `"generation":1`))

	// A projection opens as a read-only table, from the projections page
	// and from the tables' sidebar: queried and paged like a table, with
	// no editor, import or delete.
	const projectionShown = `location.hash === '#/tables/OrdersByCustomer' && document.querySelector('.pane h1') && document.querySelector('.pane h1').textContent === 'OrdersByCustomer' && document.querySelectorAll('#results tbody tr[data-index]').length === 1`
	u.do("open a projection",
		chromedp.Click("table.projections a.open-projection", chromedp.ByQuery),
		until(projectionShown))
	u.shot("projection-as-table")
	var cells []string
	u.js(`[...document.querySelectorAll('#results tbody tr[data-index="0"] td')].map(c => c.textContent)`, &cells)
	if len(cells) < 4 || cells[0] != "contoso" || cells[1] != "o|2" || !strings.Contains(strings.Join(cells, " "), "o 2") {
		t.Fatalf("the projection's row: %q, want the index entry contoso, o|2 of the source o/2", cells)
	}
	var head string
	u.js(`document.querySelector('.pane .page-head').textContent`, &head)
	if !strings.Contains(head, "read-only") || !strings.Contains(head, "index of Orders") {
		t.Fatalf("the projection's heading: %q", head)
	}
	var writable []string
	u.js(`['#add-entity', '#edit-entity', '#delete-entity', '#import', '#delete-table'].filter(s => document.querySelector(s))`, &writable)
	if len(writable) != 0 {
		t.Fatalf("a projection's page offers %v", writable)
	}
	u.do("a projection's row opens no editor",
		chromedp.DoubleClick(`#results tbody tr[data-index="0"]`, chromedp.ByQuery),
		until(`document.querySelector('#results tbody tr[data-index="0"]').classList.contains('selected')`))
	u.js(`document.querySelectorAll('#editor, dialog[open]').length`, &editors)
	if editors != 0 {
		t.Fatal("double-clicking a projection's row opened an editor")
	}
	u.do("query the projection",
		setValue("#q-pk", "nobody"),
		chromedp.Click("#q-run", chromedp.ByQuery),
		until(`document.querySelector('#page-info').textContent.startsWith('Page 1 · 0 entities')`),
		setValue("#q-pk", "contoso"),
		chromedp.Click("#q-run", chromedp.ByQuery),
		until(`document.querySelector('#page-info').textContent.startsWith('Page 1 · 1 entity')`))
	u.do("the projection from the sidebar",
		chromedp.Navigate(base+"#/tables"),
		until(`!!document.querySelector('#projection-list') && document.querySelector('#projection-list').textContent.includes('OrdersByCustomer') && !document.querySelector('#table-list').textContent.includes('OrdersByCustomer')`),
		chromedp.Click("#projection-list a", chromedp.ByQuery),
		until(projectionShown+` && document.querySelector('#projection-list li.active')`))
	u.do("outbox",
		chromedp.Navigate(base+"#/outbox"),
		until(`!!document.querySelector('table.outbox') && document.querySelector('table.outbox').textContent.toLowerCase().includes('orders')`))
	var outboxHead, outboxState string
	u.js(`document.querySelector('table.outbox thead').textContent`, &outboxHead)
	u.js(`document.querySelector('table.outbox tbody tr td:last-child').textContent`, &outboxState)
	if !strings.HasSuffix(outboxHead, "State") || strings.Contains(outboxHead, "Blocked") || outboxState != "flowing" {
		t.Fatalf("the outbox's columns %q and state %q, want a State column reading flowing", outboxHead, outboxState)
	}
	u.shot("outbox")
	// The cluster page: this host alone, live, holding Orders whole.
	u.do("cluster",
		chromedp.Navigate(base+"#/cluster"),
		until(`!!document.querySelector('table.hosts') && document.querySelector('table.hosts').textContent.includes('(this one)') && document.querySelector('table.hosts').textContent.includes('live')`+
			` && document.querySelector('table.holdings').textContent.includes('64 of 64') && document.querySelector('table.moves').textContent.includes('No view is moving')`))
	u.shot("cluster")
	u.do("audit queue peek",
		chromedp.Navigate(base+"#/queues/audit"),
		until(`!!document.querySelector('table.peek') && document.querySelector('table.peek').textContent.includes('order 1 placed')`))
	u.shot("queue-peek")

	// The functions page counts the orders function's runs: three orders
	// failed twice each and were poisoned, one ran again and succeeded.
	// Beside the counters (this node's, since it started), what its
	// poison queue holds now, read from the queue.
	fail.Store(true)
	if err := h.Functions().Queues().Enqueue(context.Background(), "orders", []byte("order 43")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "order 43 in orders-poison", func() bool {
		ps, err := q.Poison(context.Background(), "orders", 0, 10)
		return err == nil && len(ps) == 1
	})
	u.do("function counters",
		chromedp.Navigate(base+"#/functions"),
		until(`!!document.querySelector('table.functions')`))
	var counts []string
	u.js(`[...[...document.querySelectorAll('table.functions tbody tr')].find(r => r.cells[0].textContent === 'orders').cells].map(c => c.textContent)`, &counts)
	if len(counts) < 9 || counts[5] != "7" || counts[6] != "6" || counts[7] != "3" || counts[8] != "1 message in orders-poison" {
		t.Fatalf("the orders function's row: %q, want 7 runs, 6 failures, 3 poisoned, 1 message in orders-poison", counts)
	}
	if w := u.text("#poison-waiting .stat-value"); w != "1" {
		t.Fatalf("messages in poison queues now: %q, want 1", w)
	}
	var rs admin.RunnerStats
	if st, _, b := operator(t, h, "GET", "/$cairn/runner", nil, nil); st != http.StatusOK || json.Unmarshal(b, &rs) != nil {
		t.Fatalf("GET /$cairn/runner: %d %s", st, b)
	}
	if since := u.text("#fn-since"); !strings.Contains(since, "since it started, "+rs.Since.Local().Format("2006-01-02 15:04:05")) || !strings.Contains(since, "a restart starts them at 0") {
		t.Fatalf("the counters' note: %q, want it to say they count since %v", since, rs.Since)
	}
	u.shot("functions-counters")

	// Signing out forgets the token.
	u.do("sign out",
		chromedp.Click("#signout", chromedp.ByQuery),
		chromedp.WaitVisible("#login-dialog[open]", chromedp.ByQuery))
	var kept string
	u.js(`sessionStorage.getItem('cairn.operatorToken') || ''`, &kept)
	if kept != "" {
		t.Fatal("the token is still in sessionStorage after signing out")
	}
}
