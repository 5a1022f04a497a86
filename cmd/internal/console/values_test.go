package console_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/cmd/internal/console"
	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/journal/values"
)

// TestConsoleLargeValue: a property holding a large value's reference
// shows in the table's grid as a "large value" badge with a download
// link; the link fetches the value through the operator door and saves
// the very bytes uploaded. A reference whose value is not that entity's
// is refused at the door, and a download of a property that holds no
// reference answers InvalidInput, which the page shows.
func TestConsoleLargeValue(t *testing.T) {
	ctx := browserCtx(t)
	h, _ := nodetest.Start(t, node.Config{})
	tables := httpapi.OperatorPrefix + "devstoreaccount1/"
	jsonType := map[string]string{"Content-Type": "application/json"}
	if st, _, b := operator(t, h, "POST", tables+"Tables", []byte(`{"TableName":"Photos"}`), jsonType); st != http.StatusCreated {
		t.Fatalf("create Photos: %d %s", st, b)
	}
	photo := make([]byte, 300<<10) // past the 64 KiB of a property
	if _, err := rand.Read(photo); err != nil {
		t.Fatal(err)
	}
	st, hdr, b := operator(t, h, "PUT", tables+"Photos(PartitionKey='Sales',RowKey='000003')/$value", photo, nil)
	if st != http.StatusCreated {
		t.Fatalf("upload: %d %s", st, b)
	}
	ref := hdr.Get(httpapi.ValueHeader)
	if !strings.HasPrefix(ref, "cairn-value:") {
		t.Fatalf("upload: reference %q, body %s", ref, b)
	}
	ent, _ := json.Marshal(map[string]string{"PartitionKey": "Sales", "RowKey": "000003", "Name": "David Brown", "Photo": ref})
	if st, _, b := operator(t, h, "POST", tables+"Photos", ent, jsonType); st != http.StatusCreated {
		t.Fatalf("insert with the reference: %d %s", st, b)
	}
	// The same reference in another employee names nothing of theirs.
	copied, _ := json.Marshal(map[string]string{"PartitionKey": "Sales", "RowKey": "000006", "Name": "Grace Wilson", "Photo": ref})
	if st, _, b := operator(t, h, "POST", tables+"Photos", copied, jsonType); st != http.StatusBadRequest || !bytes.Contains(b, []byte("InvalidInput")) {
		t.Fatalf("insert with a copied reference: %d %s, want 400 InvalidInput", st, b)
	}

	downloads := t.TempDir()
	u := &ui{t: t, ctx: ctx, shots: t.TempDir()}
	u.do("open the table",
		chromedp.Navigate(h.HTTPURL()+console.Path),
		chromedp.WaitVisible("#login-dialog[open]", chromedp.ByQuery),
		chromedp.SendKeys("#login-token", h.OperatorToken(), chromedp.ByQuery),
		chromedp.Click("#login-submit", chromedp.ByQuery),
		chromedp.WaitVisible("#table-list", chromedp.ByQuery),
		chromedp.Evaluate(`location.hash = '#/tables/Photos'`, nil),
		until(`!!document.querySelector('#page-info') && document.querySelector('#page-info').textContent.startsWith('Page 1 · 1 entity')`))
	if got := u.text("#results td.value-ref .badge"); got != "large value" {
		t.Fatalf("the Photo cell's badge: %q", got)
	}
	if got := u.text("#results td.value-ref .ref"); got != ref {
		t.Fatalf("the Photo cell's reference: %q, want %q", got, ref)
	}
	var plain int
	u.js(`document.querySelectorAll('#results td.value-ref').length`, &plain)
	if plain != 1 {
		t.Fatalf("%d cells shown as large values, want 1 (Name is a plain String)", plain)
	}
	u.shot("large-value")

	u.do("download the value",
		setDownloads(downloads),
		chromedp.Click("#results td.value-ref a.value-download", chromedp.ByQuery),
		until(`document.getElementById('toast').textContent.includes('300.0 KiB downloaded')`))
	if got := waitFile(t, downloads, "-Photo.bin"); !bytes.Equal(got, photo) {
		t.Fatalf("the download: %d bytes, not the %d uploaded", len(got), len(photo))
	}

	// A download of a property that is not a reference is refused, with
	// the host's code.
	var msg string
	u.do("download a plain property", chromedp.Evaluate(`(async () => {
		const lib = await import('/$cairn/console/lib.js');
		try { await lib.fetchBytes('/$cairn/tables/devstoreaccount1/Photos(PartitionKey=\'Sales\',RowKey=\'000003\')/$value/Name'); return 'downloaded'; }
		catch (err) { return lib.describe(err); }
	})()`, &msg, func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
	if !strings.HasPrefix(msg, "InvalidInput: ") {
		t.Fatalf("download of a property that is no reference: %q", msg)
	}

	// A reference whose value has left the store (removed here behind the
	// host's back: every door checks a reference when it is written)
	// shows as one, and its link says the value is gone, with the host's
	// code.
	st, hdr, b = operator(t, h, "PUT", tables+"Photos(PartitionKey='Sales',RowKey='000009')/$value", photo[:1000], nil)
	if st != http.StatusCreated {
		t.Fatalf("upload: %d %s", st, b)
	}
	dangling := hdr.Get(httpapi.ValueHeader)
	c := client.New(nodetest.Connect(t, h))
	cctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.Insert(cctx, "Photos", engine.NewEntity("Sales", "000009", engine.Property{Name: "Photo", Value: engine.String(dangling)})); err != nil {
		t.Fatalf("insert a reference over NATS: %v", err)
	}
	js, err := jetstream.New(nodetest.Connect(t, h))
	if err != nil {
		t.Fatal(err)
	}
	store, err := values.Open(cctx, js, "cairn", 1)
	if err != nil {
		t.Fatal(err)
	}
	k := values.Key{Account: httpapi.DevAccountName, Table: "Photos", PartitionKey: "Sales", RowKey: "000009"}
	if err := store.Delete(cctx, k.Name(strings.TrimPrefix(dangling, engine.ValueRefPrefix))); err != nil {
		t.Fatal(err)
	}
	u.do("download a value that is gone",
		chromedp.Click("#q-run", chromedp.ByQuery),
		until(`document.querySelector('#page-info').textContent.startsWith('Page 1 · 2 entities')`),
		chromedp.Click(`#results tbody tr:nth-child(2) td.value-ref a.value-download`, chromedp.ByQuery),
		until(`document.getElementById('toast').className.includes('error')`))
	if got := u.text("#toast"); !strings.HasPrefix(got, "ResourceNotFound: ") || !strings.Contains(got, dangling) {
		t.Fatalf("download of a value that is gone: the notice %q", got)
	}
}
