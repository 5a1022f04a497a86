package operator

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/cairn-dev/cairn/cmd/internal/cors"
)

func TestLoadToken(t *testing.T) {
	dir := t.TempDir()
	tok, path, created, loose, err := LoadToken(dir)
	if err != nil || !created || loose || len(tok) != 64 || path != filepath.Join(dir, TokenFile) {
		t.Fatalf("first load: %q %q created=%v loose=%v %v", tok, path, created, loose, err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v, want 0600 (%v)", st.Mode().Perm(), err)
	}
	again, _, created, _, err := LoadToken(dir)
	if err != nil || created || again != tok {
		t.Fatalf("second load: %q created=%v %v; want the first token", again, created, err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, _, loose, _ := LoadToken(dir); !loose {
		t.Error("a token file readable by others is not reported")
	}
	if err := os.WriteFile(path, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, _, _, err := LoadToken(dir); err == nil {
		t.Error("a token file with a short token accepted")
	}
}

func TestGuard(t *testing.T) {
	const token = "0123456789abcdef0123"
	origins, err := cors.Parse([]string{"https://dash.example", "*"})
	if err != nil {
		t.Fatal(err)
	}
	g := NewGuard(token, origins)
	var ran int
	h := g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ran++ }))
	for _, tc := range []struct {
		name, method, auth, origin string
		status                     int
		code                       string
	}{
		{"no token", "POST", "", "", 401, CodeAuthenticationFailed},
		{"wrong token", "POST", "Bearer 0123456789abcdef0124", "", 401, CodeAuthenticationFailed},
		{"token as basic", "POST", "Basic " + token, "", 401, CodeAuthenticationFailed},
		{"prefix of the token", "POST", "Bearer " + token[:16], "", 401, CodeAuthenticationFailed},
		{"foreign origin with the token", "POST", "Bearer " + token, "https://evil.example", 403, CodeOriginNotAllowed},
		{"wildcard does not open it", "GET", "Bearer " + token, "https://other.example", 403, CodeOriginNotAllowed},
		{"not a preflight", "OPTIONS", "", "", 403, CodePreflightFailure},
		{"token", "POST", "Bearer " + token, "", 200, ""},
		{"lower-case scheme", "DELETE", "bearer " + token, "", 200, ""},
		{"configured origin", "POST", "Bearer " + token, "https://dash.example", 200, ""},
		// The node's own origin (httptest's Host is example.com): its
		// pages' POSTs carry Origin, and still need the token.
		{"own origin", "POST", "Bearer " + token, "http://example.com", 200, ""},
		{"own origin without the token", "DELETE", "", "http://example.com", 401, CodeAuthenticationFailed},
		{"own host, other scheme", "POST", "Bearer " + token, "https://example.com", 403, CodeOriginNotAllowed},
		{"own host as a prefix", "POST", "Bearer " + token, "http://example.com.evil.example", 403, CodeOriginNotAllowed},
		{"own host, other port", "POST", "Bearer " + token, "http://example.com:8080", 403, CodeOriginNotAllowed},
	} {
		ran = 0
		r := httptest.NewRequest(tc.method, "/$cairn/queues/q", nil)
		if tc.auth != "" {
			r.Header.Set("Authorization", tc.auth)
		}
		if tc.origin != "" {
			r.Header.Set("Origin", tc.origin)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.status {
			t.Errorf("%s: %d, want %d", tc.name, w.Code, tc.status)
		}
		if tc.code == "" {
			if ran != 1 {
				t.Errorf("%s: the endpoint ran %d times", tc.name, ran)
			}
			continue
		}
		var e struct{ Code, Error string }
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Code != tc.code || e.Error == "" {
			t.Errorf("%s: body %s (%v), want code %s", tc.name, w.Body, err, tc.code)
		}
		if ran != 0 {
			t.Errorf("%s: refused, yet the endpoint ran", tc.name)
		}
		if got := w.Header().Get("Access-Control-Allow-Origin"); got != "" {
			t.Errorf("%s: Access-Control-Allow-Origin %q on a refusal", tc.name, got)
		}
	}
}

func TestGuardPreflight(t *testing.T) {
	origins, _ := cors.Parse([]string{"https://dash.example"})
	h := NewGuard("0123456789abcdef0123", origins).Wrap(http.NotFoundHandler())
	r := httptest.NewRequest("OPTIONS", "/metrics", nil)
	r.Header.Set("Origin", "https://dash.example")
	r.Header.Set("Access-Control-Request-Method", "GET")
	r.Header.Set("Access-Control-Request-Headers", "authorization")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusNoContent || w.Header().Get("Access-Control-Allow-Origin") != "https://dash.example" || w.Header().Get("Access-Control-Allow-Headers") == "" {
		t.Fatalf("preflight from a configured origin: %d %v", w.Code, w.Header())
	}
}
