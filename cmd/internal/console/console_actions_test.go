package console_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/cairn-dev/cairn/cmd/internal/console"
	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
	"github.com/cairn-dev/cairn/functions"
)

// TestConsoleOperatorActions drives the console's operator actions in a
// real headless Chromium against a real node: purging a queue (cancelled,
// then confirmed), bulk delete and requeue of poison messages by filter,
// a function's test invocation and log lines, and the functions page's
// rates with its auto refresh turned off.
func TestConsoleOperatorActions(t *testing.T) {
	ctx := browserCtx(t)
	h, _ := nodetest.Start(t, node.Config{})
	<-h.Functions().Ready()
	fr := h.Functions()
	q := fr.Queues()
	bg := context.Background()

	var fail atomic.Bool
	var handled atomic.Int32
	fail.Store(true)
	om := functions.Manifest{Name: "orders", Trigger: functions.Trigger{Queue: "orders"}, MaxDequeueCount: 1}
	if err := fr.Register(om, functions.NativeFunc(func(ctx context.Context, inv *functions.Invocation) error {
		if fail.Load() {
			return errors.New("payment service refused: " + string(inv.Trigger().Body))
		}
		handled.Add(1)
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	em := functions.Manifest{Name: "echo", Trigger: functions.Trigger{Queue: "echo"}}
	if err := fr.Register(em, functions.NativeFunc(func(ctx context.Context, inv *functions.Invocation) error {
		body := string(inv.Trigger().Body)
		inv.Log("echo got " + body)
		if body == "fail" {
			return errors.New("asked to fail")
		}
		return inv.SetOutput([]byte("echo: " + body))
	})); err != nil {
		t.Fatal(err)
	}

	u := newUI(t, ctx, 50)
	base := h.HTTPURL() + console.Path
	u.signIn(h)

	// Purge: the dialog names the queue and its depth; cancelled, nothing
	// goes; confirmed, the queue is empty and the page says how many went.
	for _, b := range []string{"one", "two", "three"} {
		if err := q.Enqueue(bg, "parked", []byte(b)); err != nil {
			t.Fatal(err)
		}
	}
	u.do("open parked",
		chromedp.Navigate(base+"#/queues/parked"),
		until(`document.querySelectorAll('table.peek tbody tr').length === 3`),
		chromedp.Click("#purge", chromedp.ByQuery),
		chromedp.WaitVisible("#confirm-dialog[open]", chromedp.ByQuery))
	if txt := u.text("#confirm-dialog"); !strings.Contains(txt, "Purge queue parked?") || !strings.Contains(txt, "All 3 messages") {
		t.Fatalf("the purge dialog says %q", txt)
	}
	u.shot("purge-confirm")
	u.do("cancel the purge",
		chromedp.Click("#confirm-cancel", chromedp.ByQuery),
		until(`!document.querySelector('#confirm-dialog').open`))
	if n, _ := q.Depth(bg, "parked"); n != 3 {
		t.Fatalf("a cancelled purge left %d messages", n)
	}
	u.do("purge",
		chromedp.Click("#purge", chromedp.ByQuery),
		chromedp.WaitVisible("#confirm-dialog[open]", chromedp.ByQuery),
		chromedp.Click("#confirm-ok", chromedp.ByQuery),
		until(`document.querySelector('#toast').textContent === 'Purged 3 messages from parked'`),
		until(`document.querySelector('table.peek').textContent.includes('The queue is empty')`))
	if n, _ := q.Depth(bg, "parked"); n != 0 {
		t.Fatalf("after the purge parked holds %d", n)
	}

	// Poison messages: delete those whose error names blue, requeue the
	// red ones (enqueued before a time) once the function is fixed.
	for _, b := range []string{"red 1", "blue 1", "red 2"} {
		if err := q.Enqueue(bg, "orders", []byte(b)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "three messages in orders-poison", func() bool { n, _ := q.Depth(bg, "orders-poison"); return n == 3 })
	u.do("poison queue",
		chromedp.Navigate(base+"#/queues/orders-poison"),
		until(`document.querySelectorAll('.poison-msg').length === 3`),
		setValue("#bulk-error", "refused: blue"),
		until(`document.querySelector('#bulk-match').textContent === '1 of the 3 listed messages matches.'`),
		chromedp.Click("#bulk-delete", chromedp.ByQuery),
		chromedp.WaitVisible("#confirm-dialog[open]", chromedp.ByQuery))
	if txt := u.text("#confirm-text"); !strings.Contains(txt, `error contains "refused: blue". 1 of the 3 listed messages matches. At most 10,000`) {
		t.Fatalf("the bulk delete dialog says %q", txt)
	}
	u.shot("poison-bulk-confirm")
	u.do("bulk delete",
		chromedp.Click("#confirm-ok", chromedp.ByQuery),
		until(`document.querySelector('#bulk-result').textContent === 'Deleted 1 message'`),
		until(`document.querySelectorAll('.poison-msg').length === 2`))
	fail.Store(false)
	u.do("bulk requeue",
		setValue("#bulk-error", "red"),
		setValue("#bulk-by", "enqueuedBefore"),
		setValue("#bulk-before", time.Now().Add(time.Hour).Format("2006-01-02T15:04:05")),
		until(`document.querySelector('#bulk-match').textContent === 'All 2 listed messages match.'`),
		chromedp.Click("#bulk-requeue", chromedp.ByQuery),
		chromedp.WaitVisible("#confirm-dialog[open]", chromedp.ByQuery),
		chromedp.Click("#confirm-ok", chromedp.ByQuery),
		until(`document.querySelector('#bulk-result').textContent === 'Requeued 2 messages'`),
		until(`document.querySelectorAll('.poison-msg').length === 0`))
	u.shot("poison-bulk-done")
	// The count's sentence in the cases the queue above did not show.
	var sentences []string
	u.do("count sentences", chromedp.Evaluate(`import('./ops.js').then(m => [[0, 0], [1, 1], [0, 1], [0, 3], [3, 3], [1, 3], [2, 3], [1, 200]].map(([n, l]) => m.matchSentence(n, l, 200)))`, &sentences,
		func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
	want := []string{
		"No messages are listed.",
		"The one listed message matches.",
		"The one listed message does not match.",
		"None of the 3 listed messages match.",
		"All 3 listed messages match.",
		"1 of the 3 listed messages matches.",
		"2 of the 3 listed messages match.",
		"1 of the 200 listed messages matches. Only the first 200 are listed: the queue may hold more.",
	}
	if strings.Join(sentences, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the count's sentences:\n%s\nwant:\n%s", strings.Join(sentences, "\n"), strings.Join(want, "\n"))
	}
	eventually(t, "the two requeued orders handled", func() bool { return handled.Load() == 2 })

	// Functions: the rates come from two readings of the counters 5 s
	// apart; runs between them make the invocation rate positive.
	u.do("functions",
		chromedp.Navigate(base+"#/functions"),
		until(`document.querySelector('#fn-stats .stats') && document.querySelector('#fn-stats .stats').dataset.readings === '1'`))
	if r := u.text("#rate-invocations .stat-value"); r != "…" {
		t.Fatalf("the rate after one reading: %q", r)
	}
	for i := range 5 {
		if st, _, b := operator(t, h, "POST", "/$cairn/functions/echo/invoke", []byte("warm "+strconv.Itoa(i)), nil); st != http.StatusOK {
			t.Fatalf("invoke: %d %s", st, b)
		}
	}
	u.do("the second reading",
		until(`document.querySelector('#fn-stats .stats').dataset.readings === '2' && parseFloat(document.querySelector('#rate-invocations .stat-value').textContent) > 0`))
	var echoRate string
	u.js(`[...document.querySelectorAll('table.functions tbody tr')].find(r => r.cells[0].textContent === 'echo').querySelector('.fn-rate').textContent`, &echoRate)
	if !strings.HasSuffix(echoRate, "0.00/s") || strings.HasPrefix(echoRate, "0.00/s") {
		t.Fatalf("echo's rates: %q, want runs/s above 0 and no failures/s", echoRate)
	}
	u.shot("functions-rates")

	// Test invoke and the log lines.
	u.do("open echo",
		chromedp.Evaluate(`[...document.querySelectorAll('table.functions tbody tr')].find(r => r.cells[0].textContent === 'echo').querySelector('button.details').click()`, nil),
		chromedp.WaitVisible("#invoke-body", chromedp.ByQuery),
		setValue("#invoke-body", "hello"),
		chromedp.Click("#invoke", chromedp.ByQuery),
		until(`document.querySelector('#invoke-result .invoke-reply') && document.querySelector('#invoke-result').textContent.includes('echo: hello')`),
		until(`document.querySelector('table.fn-logs tbody tr').textContent.includes('echo got hello')`))
	u.shot("function-invoke")
	u.do("a failing invoke",
		setValue("#invoke-body", "fail"),
		chromedp.Click("#invoke", chromedp.ByQuery),
		until(`document.querySelector('#invoke-result .invoke-error') && document.querySelector('#invoke-result').textContent.includes('asked to fail')`),
		until(`document.querySelector('table.fn-logs tbody tr').textContent.includes('echo got fail')`))
	var lines int
	u.js(`document.querySelectorAll('table.fn-logs tbody tr').length`, &lines)
	if lines != 7 { // 5 warm-ups, hello, fail
		t.Fatalf("%d log lines shown, want 7", lines)
	}
	u.shot("function-invoke-failed")

	// A function this node did not load: the invoke is refused with a
	// coded error, shown as such, and the function's logs are empty.
	if _, err := fr.Registry().Deploy(bg, functions.Manifest{Name: "broken", Trigger: functions.Trigger{Queue: "broken"}}, []byte("not a module")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "broken reported as not loaded", func() bool { _, ok := fr.LoadFailure("broken"); return ok })
	u.do("invoke a function that did not load",
		chromedp.Click(".page-head .refresh", chromedp.ByQuery),
		until(`[...document.querySelectorAll('table.functions tbody tr')].some(r => r.cells[0].textContent === 'broken')`),
		chromedp.Evaluate(`[...document.querySelectorAll('table.functions tbody tr')].find(r => r.cells[0].textContent === 'broken').querySelector('button.details').click()`, nil),
		until(`document.querySelector('#fn-detail h2') && document.querySelector('#fn-detail').textContent.includes('Test invoke broken')`),
		chromedp.Click("#invoke", chromedp.ByQuery),
		until(`document.querySelector('#invoke-result').textContent.startsWith('ResourceNotFound: ')`),
		until(`document.querySelector('table.fn-logs').textContent.includes('No log lines from broken')`))
	u.shot("function-invoke-refused")

	// Auto refresh off: no reading in the next interval, and the page
	// keeps what was typed.
	var before string
	u.js(`document.querySelector('#fn-stats .stats').dataset.readings`, &before)
	u.do("auto refresh off",
		chromedp.Click("#auto-refresh", chromedp.ByQuery),
		until(`!document.querySelector('#auto-refresh').checked`),
		chromedp.Sleep(6*time.Second)) // an absence: nothing to wait on
	var after string
	u.js(`document.querySelector('#fn-stats .stats').dataset.readings`, &after)
	if after != before {
		t.Fatalf("readings went from %s to %s with auto refresh off", before, after)
	}
}
