package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/cairn-dev/cairn/cmd/internal/console"
	"github.com/cairn-dev/cairn/cmd/internal/node"
)

// chromium is the browser the test drives (Debian's package, which
// .ci/run installs).
const chromium = "/usr/bin/chromium"

// browserCtx starts a headless Chromium with a fresh profile; it stops
// when the test ends. Without the background-networking flags Chromium
// keeps trying to reach Google's services from the closed network.
func browserCtx(t *testing.T) context.Context {
	t.Helper()
	if os.Getenv("CAIRN_NO_BROWSER") != "" {
		t.Skip("CAIRN_NO_BROWSER is set: the console's browser test is skipped")
	}
	if _, err := os.Stat(chromium); err != nil {
		// Not a skip: CI installs it (.ci/run), and a test that silently
		// skips there would test nothing.
		t.Fatalf("%s is missing (apt-get install chromium, or set CAIRN_NO_BROWSER=1 to skip this test): %v", chromium, err)
	}
	// The profile is removed by hand once the browser is gone: Chromium's
	// helper processes may still write to it for a moment after it quit,
	// which t.TempDir's removal would report as a failure.
	profile, err := os.MkdirTemp("", "cairn-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1400, 900),
	)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	// Chromium newer than the protocol package sends events it does not
	// know (dom.topLayerElementsUpdated); they are logged, not errors.
	ctx, cancelB := chromedp.NewContext(actx, chromedp.WithErrorf(func(format string, args ...any) {
		if msg := fmt.Sprintf(format, args...); !strings.Contains(msg, "unhandled node event") {
			t.Logf("chromedp: %s", msg)
		}
	}))
	ctx, cancelT := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() {
		_ = chromedp.Cancel(ctx) // closes the browser and waits for it
		cancelT()
		cancelB()
		cancelA()
		for i := 0; ; i++ {
			err := os.RemoveAll(profile)
			if err == nil {
				return
			}
			if i == 50 {
				t.Logf("the browser profile %s: %v", profile, err)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("start %s: %v", chromium, err)
	}
	// An uncaught exception or rejected promise in the page, or an error
	// it logs, fails the test.
	chromedp.ListenTarget(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			t.Errorf("the page threw: %s", ev.ExceptionDetails.Error())
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.APITypeError {
				var args []string
				for _, a := range ev.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				t.Errorf("the page logged an error: %s", strings.Join(args, " "))
			}
		}
	})
	return ctx
}

// ui runs the browser's steps of one part of the flow; a failure names
// the part.
type ui struct {
	t     *testing.T
	ctx   context.Context
	shots string
	n     int
}

// newUI returns the steps' runner of a test, its screenshots numbered
// from n, in $CAIRN_SCREENSHOTS when set (kept), else in a temporary
// directory.
func newUI(t *testing.T, ctx context.Context, n int) *ui {
	t.Helper()
	shots := os.Getenv("CAIRN_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	} else if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	return &ui{t: t, ctx: ctx, shots: shots, n: n}
}

// signIn opens the console of h and signs in with its operator token.
func (u *ui) signIn(h *node.Node) {
	u.t.Helper()
	u.do("sign in",
		chromedp.Navigate(h.HTTPURL()+console.Path),
		chromedp.WaitVisible("#login-dialog[open]", chromedp.ByQuery),
		chromedp.SendKeys("#login-token", h.OperatorToken(), chromedp.ByQuery),
		chromedp.Click("#login-submit", chromedp.ByQuery),
		chromedp.WaitVisible("#table-list", chromedp.ByQuery))
}

func (u *ui) do(what string, actions ...chromedp.Action) {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(u.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		var page string
		_ = chromedp.Run(u.ctx, chromedp.Text("body", &page, chromedp.ByQuery))
		u.shot("failed-" + strings.ReplaceAll(what, " ", "-"))
		var hash string
		_ = chromedp.Run(u.ctx, chromedp.Evaluate(`location.hash`, &hash))
		u.t.Fatalf("%s: %v\nlocation hash %q, page text: %s", what, err, hash, page)
	}
}

// until waits for a JavaScript condition to hold, evaluating it every
// 20 ms for 15 s at most. (chromedp.Poll can miss a condition when the
// page's fragment changes while it sets up.)
func until(expr string) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		deadline := time.Now().Add(15 * time.Second)
		for {
			var ok bool
			err := chromedp.Evaluate("!!("+expr+")", &ok).Do(ctx)
			if err == nil && ok {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("after 15s, still not %s (%v)", expr, err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
}

// shot saves a screenshot of the viewport as <n>-<name>.png.
func (u *ui) shot(name string) {
	u.t.Helper()
	var png []byte
	if err := chromedp.Run(u.ctx, chromedp.CaptureScreenshot(&png)); err != nil {
		u.t.Errorf("screenshot %s: %v", name, err)
		return
	}
	u.n++
	path := filepath.Join(u.shots, fmt.Sprintf("%02d-%s.png", u.n, name))
	if err := os.WriteFile(path, png, 0o644); err != nil {
		u.t.Errorf("screenshot %s: %v", name, err)
		return
	}
	u.t.Logf("screenshot: %s", path)
}

// text returns the text of the first element matching a CSS selector.
func (u *ui) text(sel string) string {
	u.t.Helper()
	var s string
	u.do("read "+sel, chromedp.Text(sel, &s, chromedp.ByQuery))
	return s
}

// js evaluates an expression for its result.
func (u *ui) js(expr string, out any) {
	u.t.Helper()
	u.do("evaluate "+expr, chromedp.Evaluate(expr, out))
}

// operator calls the node's operators' API with the token.
func operator(t *testing.T, h *node.Node, method, path string, body []byte, header map[string]string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, h.HTTPURL()+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+h.OperatorToken())
	req.Header.Set("Accept", "application/json;odata=fullmetadata")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 20s: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitFile waits for a finished download in dir whose name ends with
// suffix and returns its content.
func waitFile(t *testing.T, dir, suffix string) []byte {
	t.Helper()
	var got []byte
	eventually(t, "a download *"+suffix+" in "+dir, func() bool {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), suffix) {
				got, _ = os.ReadFile(filepath.Join(dir, e.Name()))
				return len(got) > 0
			}
		}
		return false
	})
	return got
}

// setValue sets the value of the element a CSS selector names, as a
// user's typing would leave it.
func setValue(sel, value string) chromedp.Action {
	js, _ := json.Marshal(map[string]string{"sel": sel, "value": value})
	return chromedp.Evaluate(fmt.Sprintf(`((a) => { const e = document.querySelector(a.sel); if (!e) throw new Error('no ' + a.sel); e.value = a.value; e.dispatchEvent(new Event('input', {bubbles: true})); e.dispatchEvent(new Event('change', {bubbles: true})); return true; })(%s)`, js), nil)
}

// prop sets the editor's property row i (1-based) to name, type and value.
func prop(i int, name, typ, value string) chromedp.Tasks {
	row := fmt.Sprintf("#editor .prop-row:nth-child(%d) ", i)
	return chromedp.Tasks{
		setValue(row+".prop-name", name),
		setValue(row+".prop-type", typ),
		setValue(row+".prop-value", value),
	}
}

// insert adds an entity through the editor: props are name, type, value.
func (u *ui) insert(pk, rk string, props ...[3]string) {
	u.t.Helper()
	acts := chromedp.Tasks{
		chromedp.Click("#add-entity", chromedp.ByQuery),
		chromedp.WaitVisible("#editor", chromedp.ByQuery),
		chromedp.SendKeys("#ed-pk", pk, chromedp.ByQuery),
		chromedp.SendKeys("#ed-rk", rk, chromedp.ByQuery),
	}
	for i, p := range props {
		if i > 0 {
			acts = append(acts, chromedp.Click("#ed-add-prop", chromedp.ByQuery))
		}
		acts = append(acts, prop(i+1, p[0], p[1], p[2]))
	}
	acts = append(acts, chromedp.Click("#ed-save", chromedp.ByQuery), chromedp.WaitNotPresent("#editor", chromedp.ByQuery))
	u.do("insert "+pk+"/"+rk, acts)
}
