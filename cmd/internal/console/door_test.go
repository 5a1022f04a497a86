package console_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"image/png"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/cairn-dev/cairn/cmd/internal/console"
	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
)

// checkIcon fails unless b is an ICO file holding one 32×32 PNG image.
func checkIcon(t *testing.T, b []byte) {
	t.Helper()
	if len(b) < 22 || binary.LittleEndian.Uint16(b[0:]) != 0 || binary.LittleEndian.Uint16(b[2:]) != 1 || binary.LittleEndian.Uint16(b[4:]) != 1 {
		t.Fatalf("not an icon file with one image: % x", b[:min(len(b), 22)])
	}
	size, at := binary.LittleEndian.Uint32(b[14:]), binary.LittleEndian.Uint32(b[18:])
	if int(at)+int(size) != len(b) {
		t.Fatalf("the icon's image is at %d, %d bytes, in a file of %d", at, size, len(b))
	}
	img, err := png.Decode(bytes.NewReader(b[at:]))
	if err != nil || img.Bounds().Dx() != 32 || img.Bounds().Dy() != 32 {
		t.Fatalf("the icon's image: %v %v", img, err)
	}
}

// TestFaviconHandler: the icon is served with GET and HEAD only, as an
// image that may be cached.
func TestFaviconHandler(t *testing.T) {
	h := console.Favicon()
	for _, tc := range []struct {
		method string
		status int
	}{{"GET", 200}, {"HEAD", 200}, {"POST", 405}, {"DELETE", 405}, {"OPTIONS", 405}} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(tc.method, console.FaviconPath, nil))
		if w.Code != tc.status {
			t.Errorf("%s %s: %d, want %d", tc.method, console.FaviconPath, w.Code, tc.status)
			continue
		}
		if tc.status != 200 {
			if w.Header().Get("Allow") != "GET, HEAD" {
				t.Errorf("%s: Allow %q", tc.method, w.Header().Get("Allow"))
			}
			continue
		}
		if ct := w.Header().Get("Content-Type"); ct != "image/x-icon" || !strings.Contains(w.Header().Get("Cache-Control"), "max-age") {
			t.Errorf("%s: headers %v", tc.method, w.Header())
		}
		if tc.method == "HEAD" {
			if w.Body.Len() != 0 {
				t.Errorf("HEAD: a body of %d bytes", w.Body.Len())
			}
			continue
		}
		checkIcon(t, w.Body.Bytes())
	}
}

// logBuffer is a log destination the node's goroutines share.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestNodeDoors: on a real node, the icon answers without the token and
// under any Host, never 403; GET / sends a browser to the console and
// says where the APIs are, under the node's names only; / with another
// method or a query string, and the Tables API, are as before; and the ready log line names
// the console's URL.
func TestNodeDoors(t *testing.T) {
	var logs logBuffer
	h, _ := nodetest.Start(t, node.Config{Log: slog.New(slog.NewJSONHandler(&logs, nil))})
	base := h.HTTPURL()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(base, "http://"))
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	call := func(method, path, host string, header map[string]string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if host != "" {
			req.Host = host
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}

	// The icon: without the token, under the node's address, a rebound
	// name, and from another site's page.
	for _, host := range []string{"", "localhost:" + port, "rebind.attacker.example:" + port} {
		resp, b := call("GET", console.FaviconPath, host, map[string]string{"Origin": "https://elsewhere.example"})
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/x-icon" {
			t.Fatalf("GET %s with Host %q: %d %s %.200s", console.FaviconPath, host, resp.StatusCode, resp.Header.Get("Content-Type"), b)
		}
		checkIcon(t, b)
	}
	if resp, _ := call("POST", console.FaviconPath, "", nil); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST %s: %d, want 405", console.FaviconPath, resp.StatusCode)
	}

	// GET / and HEAD /: a redirect to the console, with a text for
	// clients that do not follow it.
	resp, b := call("GET", "/", "", nil)
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != console.Path {
		t.Fatalf("GET /: %d, Location %q, want 302 to %s", resp.StatusCode, resp.Header.Get("Location"), console.Path)
	}
	for _, want := range []string{console.Path, "/<account>/Tables", "/healthz"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("GET /: the text does not name %s:\n%s", want, b)
		}
	}
	if resp, _ := call("HEAD", "/", "", nil); resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != console.Path {
		t.Errorf("HEAD /: %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	// Followed, it leads to the console's page.
	page, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	pb, _ := io.ReadAll(page.Body)
	page.Body.Close()
	if page.StatusCode != http.StatusOK || !strings.Contains(string(pb), `<script type="module" src="app.js">`) {
		t.Fatalf("GET / followed: %d %.200s", page.StatusCode, pb)
	}
	// The Host check still stands before it, as before the console's
	// other doors.
	if resp, _ := call("GET", "/", "rebind.attacker.example:"+port, nil); resp.StatusCode != http.StatusForbidden || resp.Header.Get("x-ms-error-code") != "HostNotAllowed" {
		t.Errorf("GET / under a rebound name: %d %q, want 403 HostNotAllowed", resp.StatusCode, resp.Header.Get("x-ms-error-code"))
	}
	// / with another method, and a path below it, are the Tables API's.
	for _, c := range []struct{ method, path string }{{"POST", "/"}, {"GET", "/?restype=service&comp=properties"}} {
		if resp, b := call(c.method, c.path, "", nil); resp.StatusCode != http.StatusBadRequest || resp.Header.Get("x-ms-error-code") != "InvalidUri" {
			t.Errorf("%s %s: %d %q %.200s, want the Tables API's 400 InvalidUri", c.method, c.path, resp.StatusCode, resp.Header.Get("x-ms-error-code"), b)
		}
	}
	if resp, _ := call("GET", "/devstoreaccount1/Tables", "", nil); resp.StatusCode != http.StatusForbidden || resp.Header.Get("x-ms-error-code") == "" {
		t.Errorf("GET /devstoreaccount1/Tables unsigned: %d %q, want the Tables API's coded refusal", resp.StatusCode, resp.Header.Get("x-ms-error-code"))
	}

	// The ready line names the console's URL.
	var ready struct {
		Msg, HTTP, Console string
	}
	for line := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(line, `"cairn host ready"`) {
			if err := json.Unmarshal([]byte(line), &ready); err != nil {
				t.Fatal(err)
			}
		}
	}
	if ready.Console != base+console.Path || ready.Console != h.ConsoleURL() {
		t.Fatalf("the ready line's console is %q, want %s:\n%s", ready.Console, base+console.Path, logs.String())
	}
}

// TestConsoleURLOnEveryAddress: a node listening on every address names
// its console under localhost, which a browser can open.
func TestConsoleURLOnEveryAddress(t *testing.T) {
	h, _ := nodetest.Start(t, node.Config{HTTP: "0.0.0.0:0"})
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(h.HTTPURL(), "http://"))
	if got, want := h.ConsoleURL(), "http://localhost:"+port+console.Path; got != want {
		t.Fatalf("ConsoleURL %q, want %q", got, want)
	}
}
