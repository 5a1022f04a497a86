package console_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/cairn-dev/cairn/cmd/internal/console"
	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
	"github.com/cairn-dev/cairn/functions"
)

// routeCall sends a POST to a function's route with a key (none: "")
// from Go, as a server-side caller does, and returns the status and body.
func routeCall(t *testing.T, url, key, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set(functions.KeyHeader, key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// apiAnswers records the body of every answer of the operators' API the
// page received (the Network domain, which chromedp enables), to check
// that none carries a secret.
type apiAnswers struct {
	mu  sync.Mutex
	ids []network.RequestID
}

func (a *apiAnswers) listen(ctx context.Context) {
	chromedp.ListenTarget(ctx, func(ev any) {
		if ev, ok := ev.(*network.EventResponseReceived); ok && strings.Contains(ev.Response.URL, "/$cairn/") {
			a.mu.Lock()
			a.ids = append(a.ids, ev.RequestID)
			a.mu.Unlock()
		}
	})
}

// bodies reads the recorded answers' bodies from the browser.
func (a *apiAnswers) bodies(u *ui) []string {
	u.t.Helper()
	a.mu.Lock()
	ids := append([]network.RequestID(nil), a.ids...)
	a.mu.Unlock()
	var out []string
	for _, id := range ids {
		var body []byte
		u.do("read an answer's body", chromedp.ActionFunc(func(ctx context.Context) error {
			b, err := network.GetResponseBody(id).Do(ctx)
			if err != nil && strings.Contains(err.Error(), "No data found") {
				return nil // a 204: no body
			}
			body = b
			return err
		}))
		out = append(out, string(body))
	}
	return out
}

// TestConsoleFunctionKeysAndSettings drives a function's routes, keys,
// settings and secrets in the console, in a real headless Chromium
// against a real node: the routes with their URLs on the node; a key
// created (a bad name refused with its code, nothing stored), its secret
// shown once and read from the page, a call of the route with it
// answered, the key revoked (confirmed) and the call then refused 401
// without the function running, a key revoked elsewhere meanwhile
// refused with ResourceNotFound; a setting of two lines, a secret typed
// and one of several lines from a file set in the page and read by the
// function, no secret's value in any answer of the API or anywhere in
// the page; a bad name and a file that is not text refused; all removed
// (confirmed).
func TestConsoleFunctionKeysAndSettings(t *testing.T) {
	ctx := browserCtx(t)
	answers := &apiAnswers{}
	answers.listen(ctx)
	h, _ := nodetest.Start(t, node.Config{})
	<-h.Functions().Ready()
	fr := h.Functions()

	secret := randomText(t)
	// A secret of several lines, set from a file.
	pem := "-----BEGIN KEY-----\n" + randomText(t) + "\n" + randomText(t) + "\n-----END KEY-----\n"
	pemFile := filepath.Join(t.TempDir(), "key.pem")
	binFile := filepath.Join(t.TempDir(), "key.bin")
	if err := os.WriteFile(pemFile, []byte(pem), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(binFile, []byte{0xff, 0xfe, 0x00, 'x'}, 0o600); err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	m := functions.Manifest{Name: "shop", Trigger: functions.Trigger{HTTP: &functions.HTTPTrigger{Account: "devstoreaccount1", Routes: []functions.Route{
		{Method: "POST", Path: "/orders/{id}"},
		{Method: "GET", Path: "/health", Auth: functions.AuthAnonymous},
		{Method: "GET", Path: "/report", Auth: functions.AuthAccount},
	}}}}
	if err := fr.Register(m, functions.NativeFunc(func(ctx context.Context, inv *functions.Invocation) error {
		runs.Add(1)
		req := inv.Trigger().HTTP
		greeting, _, _ := inv.Setting("GREETING")
		token, ok, err := inv.Setting("TOKEN")
		if err != nil {
			return err
		}
		key, _, err := inv.Setting("PEM")
		if err != nil {
			return err
		}
		// What the function read, never the secrets themselves.
		return inv.SetOutput([]byte(fmt.Sprintf("order %s by %s; greeting %q; token set %v, matches %v; pem matches %v",
			req.Params["id"], req.Caller, greeting, ok, token == secret, key == pem)))
	})); err != nil {
		t.Fatal(err)
	}

	u := newUI(t, ctx, 70)
	base := h.HTTPURL() + console.Path
	route := h.HTTPURL() + "/fn/shop/orders/"
	openShop := chromedp.Tasks{
		chromedp.Navigate(base + "#/functions"),
		until(`[...document.querySelectorAll('table.functions tbody tr')].some(r => r.cells[0].textContent === 'shop')`),
		chromedp.Evaluate(`[...document.querySelectorAll('table.functions tbody tr')].find(r => r.cells[0].textContent === 'shop').querySelector('button.details').click()`, nil),
		until(`document.querySelector('table.fn-keys') && document.querySelector('table.fn-settings')`),
	}
	u.signIn(h)
	u.do("open shop", openShop)

	// The routes, each with its URL on this node.
	var routes [][]string
	u.js(`[...document.querySelectorAll('table.fn-routes tbody tr')].map(r => [...r.cells].map(c => c.textContent))`, &routes)
	want := [][]string{
		{"POST", "/orders/{id}", "key", "none", h.HTTPURL() + "/fn/shop/orders/{id}"},
		{"GET", "/health", "anonymous", "none", h.HTTPURL() + "/fn/shop/health"},
		{"GET", "/report", "account devstoreaccount1", "none", h.HTTPURL() + "/fn/shop/report"},
	}
	if fmt.Sprint(routes) != fmt.Sprint(want) {
		t.Fatalf("the routes shown: %q\nwant %q", routes, want)
	}
	if txt := u.text("table.fn-keys"); !strings.Contains(txt, "shop has no keys") {
		t.Fatalf("the keys of a function without any: %q", txt)
	}

	// A bad name: the API's coded refusal, and no key.
	u.do("a key with a bad name",
		setValue("#key-name", "two words"),
		chromedp.Click("#create-key", chromedp.ByQuery),
		until(`document.querySelector('#toast').textContent.startsWith('InvalidInput: ')`))
	if st, _, b := operator(t, h, "GET", "/$cairn/functions/shop/keys", nil, nil); st != http.StatusOK || strings.TrimSpace(string(b)) != "[]" {
		t.Fatalf("keys after a refused create: %d %s", st, b)
	}
	if s := u.text("#new-key-box"); s != "" {
		t.Fatalf("a refused create shows %q", s)
	}

	// Created: shown once, with its copy button and warning.
	u.do("create a key",
		setValue("#key-name", "web"),
		chromedp.Click("#create-key", chromedp.ByQuery),
		until(`document.querySelector('#new-key-text')`),
		until(`[...document.querySelectorAll('table.fn-keys tbody tr')].some(r => r.cells[0].textContent === 'web')`))
	key := u.text("#new-key-text")
	id, keySecret, ok := functions.SplitFunctionKey(key)
	if !ok {
		t.Fatalf("the page shows %q, not a key", key)
	}
	if box := u.text("#new-key-box"); !strings.Contains(box, "it will not be shown again") || !strings.Contains(box, "Copy") {
		t.Fatalf("the new key's box says %q", box)
	}
	var keyRow []string
	u.js(`[...document.querySelector('table.fn-keys tbody tr').cells].map(c => c.textContent)`, &keyRow)
	if len(keyRow) != 4 || keyRow[0] != "web" || keyRow[1] != id || keyRow[2] == "" || keyRow[3] != "Revoke…" {
		t.Fatalf("the key's row: %q (id %s)", keyRow, id)
	}
	u.shot("function-key-created")

	// The route answers a call with it (once this node's copy of the
	// keys has it), and refuses one without.
	eventually(t, "a call with the new key answered", func() bool {
		st, _ := routeCall(t, route+"7", key, "")
		return st == http.StatusOK
	})
	if st, b := routeCall(t, route+"8", key, ""); st != http.StatusOK || b != `order 8 by key:web; greeting ""; token set false, matches false; pem matches false` {
		t.Fatalf("a call with the key: %d %q", st, b)
	}
	if st, b := routeCall(t, route+"9", "", ""); st != http.StatusUnauthorized {
		t.Fatalf("a call without a key: %d %s", st, b)
	}

	// Shown once: the page opened again has the key's name and id, not
	// its secret.
	u.do("open shop again", chromedp.Navigate(base+"#/tables"), chromedp.WaitVisible("#table-list", chromedp.ByQuery), openShop,
		until(`[...document.querySelectorAll('table.fn-keys tbody tr')].some(r => r.cells[0].textContent === 'web')`))
	var html string
	u.js(`document.documentElement.outerHTML`, &html)
	if strings.Contains(html, keySecret) {
		t.Fatal("the page opened again shows the key's secret")
	}

	// Revoke: cancelled, the key stays; confirmed, calls are refused.
	u.do("revoke, cancelled",
		chromedp.Click("button.revoke-key", chromedp.ByQuery),
		chromedp.WaitVisible("#confirm-dialog[open]", chromedp.ByQuery))
	if txt := u.text("#confirm-title"); txt != "Revoke key web ("+id+") of shop?" {
		t.Fatalf("the revoke dialog: %q", txt)
	}
	u.do("cancel", chromedp.Click("#confirm-cancel", chromedp.ByQuery), until(`!document.querySelector('#confirm-dialog').open`))
	if st, _ := routeCall(t, route+"10", key, ""); st != http.StatusOK {
		t.Fatalf("a call after a cancelled revoke: %d", st)
	}
	u.do("revoke",
		chromedp.Click("button.revoke-key", chromedp.ByQuery),
		chromedp.WaitVisible("#confirm-dialog[open]", chromedp.ByQuery),
		chromedp.Click("#confirm-ok", chromedp.ByQuery),
		until(`document.querySelector('#toast').textContent === 'Key web (`+id+`) of shop revoked'`),
		until(`document.querySelector('table.fn-keys').textContent.includes('shop has no keys')`))
	eventually(t, "a call with the revoked key refused", func() bool {
		st, _ := routeCall(t, route+"11", key, "")
		return st == http.StatusUnauthorized
	})
	before := runs.Load()
	if st, b := routeCall(t, route+"12", key, ""); st != http.StatusUnauthorized || !strings.Contains(b, "Unauthorized") || runs.Load() != before {
		t.Fatalf("a call with the revoked key: %d %s, the function ran %d times more", st, b, runs.Load()-before)
	}
	u.shot("function-key-revoked")

	// A key revoked elsewhere while the page lists it: the API's
	// ResourceNotFound, and the list read again.
	st, _, b := operator(t, h, "POST", "/$cairn/functions/shop/keys?name=stale", nil, nil)
	var stale struct{ ID string }
	if err := json.Unmarshal(b, &stale); err != nil || st != http.StatusCreated {
		t.Fatalf("a key made through the API: %d %s", st, b)
	}
	u.do("list the key made elsewhere", chromedp.Navigate(base+"#/tables"), chromedp.WaitVisible("#table-list", chromedp.ByQuery), openShop,
		until(`[...document.querySelectorAll('table.fn-keys tbody tr')].some(r => r.cells[0].textContent === 'stale')`))
	if st, _, b := operator(t, h, "DELETE", "/$cairn/functions/shop/keys/"+stale.ID, nil, nil); st != http.StatusNoContent {
		t.Fatalf("revoke through the API: %d %s", st, b)
	}
	u.do("revoke a key already revoked",
		chromedp.Click("button.revoke-key", chromedp.ByQuery),
		chromedp.WaitVisible("#confirm-dialog[open]", chromedp.ByQuery),
		chromedp.Click("#confirm-ok", chromedp.ByQuery),
		until(`document.querySelector('#toast').textContent.startsWith('ResourceNotFound: ')`),
		until(`document.querySelector('table.fn-keys').textContent.includes('shop has no keys')`))

	// Settings and secrets: a bad name refused with its code, nothing
	// stored; a setting of two lines shown with its value; a secret by
	// name only, its input cleared; one from a file of several lines, and
	// a file that is not UTF-8 refused in the page.
	u.do("a setting with a bad name",
		setValue("#setting-name", "9LIVES"),
		setValue("#setting-value", "x"),
		chromedp.Click("#set-setting", chromedp.ByQuery),
		until(`document.querySelector('#toast').textContent.startsWith('InvalidInput: ')`))
	u.do("set a setting",
		setValue("#setting-name", "GREETING"),
		setValue("#setting-value", "hallo <b>welt</b>\nzwei"),
		chromedp.Click("#set-setting", chromedp.ByQuery),
		until(`document.querySelector('table.fn-settings tr[data-name="GREETING"]')`))
	if v := u.text(`table.fn-settings tr[data-name="GREETING"] .setting-value`); v != "hallo <b>welt</b>\nzwei" {
		t.Fatalf("the setting's value shown: %q", v)
	}
	u.do("set a secret",
		setValue("#secret-name", "TOKEN"),
		setValue("#secret-value", secret),
		chromedp.Click("#set-secret", chromedp.ByQuery),
		until(`document.querySelector('table.fn-settings tr[data-name="TOKEN"][data-kind="secret"]')`))
	if v := u.text(`table.fn-settings tr[data-name="TOKEN"]`); !strings.Contains(v, "secret") || !strings.Contains(v, "never shown") {
		t.Fatalf("the secret's row: %q", v)
	}
	u.do("a secret from a file that is not text",
		setValue("#secret-name", "BIN"),
		chromedp.SetUploadFiles("#secret-file", []string{binFile}, chromedp.ByQuery),
		chromedp.Click("#set-secret", chromedp.ByQuery),
		until(`document.querySelector('#toast').textContent === 'the file key.bin is not UTF-8 text: a value is text'`))
	u.do("a secret from a file",
		setValue("#secret-name", "PEM"),
		chromedp.SetUploadFiles("#secret-file", []string{pemFile}, chromedp.ByQuery),
		chromedp.Click("#set-secret", chromedp.ByQuery),
		until(`document.querySelector('table.fn-settings tr[data-name="PEM"][data-kind="secret"]')`),
		until(`document.querySelector('#secret-file').files.length === 0`))
	var inputs []string
	u.js(`[...document.querySelectorAll('input, textarea')].map(e => e.value)`, &inputs)
	u.js(`document.documentElement.outerHTML`, &html)
	for _, v := range []string{secret, pem[20:60]} {
		if strings.Contains(html, v) || strings.Contains(strings.Join(inputs, "\n"), v) {
			t.Fatal("the page holds a secret's value after setting it")
		}
	}
	u.shot("function-settings")
	if st, _, b := operator(t, h, "GET", "/$cairn/functions/shop/settings", nil, nil); st != http.StatusOK || strings.Contains(string(b), secret) || strings.Contains(string(b), pem[20:60]) ||
		!strings.Contains(string(b), `"name":"TOKEN","secret":true`) || !strings.Contains(string(b), `"value":"hallo \u003cb\u003ewelt\u003c/b\u003e\nzwei"`) {
		t.Fatalf("the settings: %d %s", st, b)
	}
	var names []string
	u.js(`[...document.querySelectorAll('table.fn-settings tbody tr')].map(r => r.dataset.name)`, &names)
	if strings.Join(names, ",") != "GREETING,PEM,TOKEN" {
		t.Fatalf("the settings shown: %q (9LIVES and BIN were refused)", names)
	}

	// The function reads both (a key made through the API).
	st, _, b = operator(t, h, "POST", "/$cairn/functions/shop/keys?name=probe", nil, nil)
	var probe struct{ Key string }
	if err := json.Unmarshal(b, &probe); err != nil || st != http.StatusCreated {
		t.Fatalf("a key for the check: %d %s", st, b)
	}
	eventually(t, "the function reads the setting and the secret", func() bool {
		_, b := routeCall(t, route+"13", probe.Key, "")
		return b == `order 13 by key:probe; greeting "hallo <b>welt</b>\nzwei"; token set true, matches true; pem matches true`
	})

	// Removed, each confirmed.
	for _, name := range []string{"GREETING", "PEM", "TOKEN"} {
		u.do("remove "+name,
			chromedp.Click(`table.fn-settings tr[data-name="`+name+`"] button.remove-setting`, chromedp.ByQuery),
			chromedp.WaitVisible("#confirm-dialog[open]", chromedp.ByQuery),
			chromedp.Click("#confirm-ok", chromedp.ByQuery),
			until(`!document.querySelector('table.fn-settings tr[data-name="`+name+`"]')`))
	}
	if st, _, b := operator(t, h, "GET", "/$cairn/functions/shop/settings", nil, nil); st != http.StatusOK || strings.TrimSpace(string(b)) != "[]" {
		t.Fatalf("the settings after removing them: %d %s", st, b)
	}
	if st, b := routeCall(t, route+"14", probe.Key, ""); b != `order 14 by key:probe; greeting ""; token set false, matches false; pem matches false` {
		t.Fatalf("a call after the removals: %d %q", st, b)
	}

	// No answer the page received carried the secret or the key's secret.
	bodies := answers.bodies(u)
	if len(bodies) < 10 {
		t.Fatalf("only %d answers of the operators' API recorded", len(bodies))
	}
	var keyShown int
	for _, b := range bodies {
		if strings.Contains(b, secret) || strings.Contains(b, pem[20:60]) {
			t.Fatalf("an answer of the operators' API carries the secret: %s", b)
		}
		if strings.Contains(b, keySecret) {
			keyShown++
		}
	}
	if keyShown != 1 { // the create's answer, once
		t.Fatalf("the key's secret is in %d answers, want the create's alone", keyShown)
	}
}

// randomText is 24 random bytes in base64: a value no page or answer
// holds by chance.
func randomText(t *testing.T) string {
	t.Helper()
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// TestFunctionRouteCORSInBrowser: a page of another origin (a second
// server) calls a function's route with a key and a JSON content type, a
// request the browser preflights: the route that lists the page's origin
// in its cors answers it with the function's reply; a route that lists
// another origin, or none, is refused at the preflight, the browser's
// fetch rejects, and the function does not run.
func TestFunctionRouteCORSInBrowser(t *testing.T) {
	ctx := browserCtx(t)
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, "<!doctype html><title>shop</title><p>A shop's page.</p>")
	}))
	defer page.Close()
	h, _ := nodetest.Start(t, node.Config{})
	<-h.Functions().Ready()
	if !strings.HasPrefix(page.URL, "http://127.0.0.1:") || page.URL == h.HTTPURL() {
		t.Fatalf("the page %s and the node %s: want two origins", page.URL, h.HTTPURL())
	}

	var runs sync.Map // route → *atomic.Int32
	count := func(route string) int32 {
		v, _ := runs.LoadOrStore(route, new(atomic.Int32))
		return v.(*atomic.Int32).Load()
	}
	m := functions.Manifest{Name: "api", Trigger: functions.Trigger{HTTP: &functions.HTTPTrigger{Routes: []functions.Route{
		{Method: "POST", Path: "/open", CORS: &functions.RouteCORS{Origins: []string{page.URL}}},
		{Method: "POST", Path: "/elsewhere", CORS: &functions.RouteCORS{Origins: []string{"https://shop.example"}}},
		{Method: "POST", Path: "/closed"},
	}}}}
	if err := h.Functions().Register(m, functions.NativeFunc(func(ctx context.Context, inv *functions.Invocation) error {
		req := inv.Trigger().HTTP
		v, _ := runs.LoadOrStore(req.Route, new(atomic.Int32))
		v.(*atomic.Int32).Add(1)
		if err := inv.SetResponse(http.StatusOK, map[string][]string{"Content-Type": {"application/json"}}); err != nil {
			return err
		}
		return inv.SetOutput([]byte(`{"route":"` + req.Route + `","body":` + string(inv.Trigger().Body) + `}`))
	})); err != nil {
		t.Fatal(err)
	}
	st, _, b := operator(t, h, "POST", "/$cairn/functions/api/keys?name=browser", nil, nil)
	var k struct{ Key string }
	if err := json.Unmarshal(b, &k); err != nil || st != http.StatusCreated {
		t.Fatalf("a key: %d %s", st, b)
	}
	eventually(t, "the key in the node's copy", func() bool {
		st, _ := routeCall(t, h.HTTPURL()+"/fn/api/open", k.Key, "{}")
		return st == http.StatusOK
	})
	warm := count("/open")

	// The browser's preflights and CORS failures, by URL, as the Network
	// domain reports them.
	var mu sync.Mutex
	preflights := map[string][]int64{}  // URL → the preflights' statuses
	corsErrors := map[string][]string{} // URL → the requests' CORS errors
	urls := map[network.RequestID]string{}
	chromedp.ListenTarget(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *network.EventRequestWillBeSent:
			urls[ev.RequestID] = ev.Request.URL
		case *network.EventResponseReceived:
			if ev.Type == network.ResourceTypePreflight {
				preflights[ev.Response.URL] = append(preflights[ev.Response.URL], ev.Response.Status)
			}
		case *network.EventLoadingFailed:
			if ev.CorsErrorStatus != nil {
				corsErrors[urls[ev.RequestID]] = append(corsErrors[urls[ev.RequestID]], ev.CorsErrorStatus.CorsError.String())
			}
		}
	})
	u := &ui{t: t, ctx: ctx, shots: t.TempDir()}
	u.do("open the page", chromedp.Navigate(page.URL+"/"), until(`document.title === 'shop'`))
	type result struct {
		Status int    `json:"status"`
		Body   string `json:"body"`
		Error  string `json:"error"`
	}
	call := func(path string) result {
		t.Helper()
		args, _ := json.Marshal(map[string]string{"url": h.HTTPURL() + "/fn/api" + path, "key": k.Key})
		var r result
		u.do("fetch "+path, chromedp.Evaluate(fmt.Sprintf(`((a) => fetch(a.url, {method: 'POST', headers: {'X-Functions-Key': a.key, 'Content-Type': 'application/json'}, body: '{"n":1}'})
			.then(async r => ({status: r.status, body: await r.text()}), e => ({error: String(e)})))(%s)`, args), &r,
			func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
		return r
	}
	if r := call("/open"); r.Status != http.StatusOK || r.Body != `{"route":"/open","body":{"n":1}}` || r.Error != "" {
		t.Fatalf("a preflighted call of the route that lists the page's origin: %+v", r)
	}
	if n := count("/open"); n != warm+1 {
		t.Fatalf("the route ran %d times for one call", n-warm)
	}
	for _, path := range []string{"/elsewhere", "/closed"} {
		if r := call(path); r.Error == "" || !strings.Contains(r.Error, "TypeError") {
			t.Fatalf("a call of %s, whose cors does not list the page: %+v, want the fetch rejected", path, r)
		}
		if n := count(path); n != 0 {
			t.Fatalf("%s ran %d times for a refused preflight", path, n)
		}
	}
	// The events come on their own: wait for the three preflights and
	// the two failures.
	eventually(t, "the browser's network events of the three calls", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(preflights) == 3 && len(corsErrors) == 2
	})
	mu.Lock()
	// One preflight per call: the listed origin's answered 204, the
	// others refused 403, which the browser reports as a failed preflight
	// (PreflightMissingAllowOriginHeader in Chromium 13x).
	fnURL := h.HTTPURL() + "/fn/api"
	if fmt.Sprint(preflights[fnURL+"/open"]) != "[204]" || len(corsErrors[fnURL+"/open"]) != 0 {
		t.Errorf("the call of /open: preflights %v, CORS errors %v", preflights[fnURL+"/open"], corsErrors[fnURL+"/open"])
	}
	for _, path := range []string{"/elsewhere", "/closed"} {
		if errs := corsErrors[fnURL+path]; fmt.Sprint(preflights[fnURL+path]) != "[403]" || len(errs) != 1 || !strings.HasPrefix(errs[0], "Preflight") {
			t.Errorf("the call of %s: preflights %v, CORS errors %v", path, preflights[fnURL+path], errs)
		}
	}
	mu.Unlock()
	// What the browser was answered: the preflight refused with its code.
	req, _ := http.NewRequest("OPTIONS", h.HTTPURL()+"/fn/api/elsewhere", nil)
	req.Header.Set("Origin", page.URL)
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "content-type,x-functions-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	pb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(pb), functions.CodeOriginNotAllowed) || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("the preflight of /elsewhere from %s: %d %v %s", page.URL, resp.StatusCode, resp.Header, pb)
	}
}
