package console_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/cmd/internal/console"
)

// TestHandler: the assets are served with GET and HEAD only, each with the
// Content-Security-Policy and the framing refusal, with their types; a
// missing one is 404.
func TestHandler(t *testing.T) {
	h := console.Handler()
	for _, tc := range []struct {
		method, path string
		status       int
		ctype, body  string
	}{
		{"GET", console.Path, 200, "text/html", `<script type="module" src="app.js">`},
		{"GET", console.Path + "app.js", 200, "javascript", "import"},
		{"GET", console.Path + "app.css", 200, "text/css", ":root"},
		{"HEAD", console.Path + "tables.js", 200, "javascript", ""},
		{"GET", console.Path + "missing.js", 404, "", ""},
		{"GET", console.Path + "../console.go", 404, "", ""},
		{"POST", console.Path, 405, "", ""},
		{"DELETE", console.Path + "app.js", 405, "", ""},
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(tc.method, tc.path, nil))
		if w.Code != tc.status {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, w.Code, tc.status)
			continue
		}
		hd := w.Header()
		if csp := hd.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") || strings.Contains(csp, "unsafe") {
			t.Errorf("%s %s: Content-Security-Policy %q", tc.method, tc.path, csp)
		}
		if hd.Get("X-Frame-Options") != "DENY" || hd.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s %s: headers %v", tc.method, tc.path, hd)
		}
		if tc.ctype != "" && !strings.Contains(hd.Get("Content-Type"), tc.ctype) {
			t.Errorf("%s %s: Content-Type %q, want %s", tc.method, tc.path, hd.Get("Content-Type"), tc.ctype)
		}
		if !strings.Contains(w.Body.String(), tc.body) {
			t.Errorf("%s %s: the body lacks %q", tc.method, tc.path, tc.body)
		}
	}
}
