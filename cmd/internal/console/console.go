// Package console serves the web console: one page and its script and
// style sheet, embedded in the binary (no build step, nothing fetched from
// elsewhere), at /$cairn/console/.
//
// The assets hold no data and are served to anyone. Everything the page
// shows it reads from the operators' API with the operator token, which
// it asks the operator for once and keeps in the tab's sessionStorage:
// the functions and queues API (/$cairn/functions, /$cairn/queues), the
// projections (/$cairn/projections), the outbox (/$cairn/outbox) and the
// Tables API's operator door (/$cairn/tables/<account>/…). docs/CONSOLE.md
// describes the pages.
//
// Every response carries a Content-Security-Policy that allows scripts,
// styles and requests to this origin only and forbids framing, so a
// value shown in the page (an entity's property, a message body) cannot
// run as script or send the token elsewhere, and no other site can frame
// the console to trick clicks. Cost: the assets (tens of KiB) live in the
// binary; serving one is a map lookup.
//
// Two more doors belong to it, outside Path: the node's icon at
// FaviconPath, which browsers ask for on every page of the node and which
// is served without the operator token and under any Host (it is the same
// public image for everyone), and GET / (Root), which sends a browser to
// the console and tells anyone else where the APIs are.
package console

import (
	"embed"
	"io"
	"io/fs"
	"net/http"
	"strconv"
)

// Path is where the node serves the console.
const Path = "/$cairn/console/"

// FaviconPath is where browsers look for a site's icon.
const FaviconPath = "/favicon.ico"

// faviconMaxAge is how long a browser may keep the icon without asking
// again: it changes only with the binary.
const faviconMaxAge = "public, max-age=86400"

//go:embed assets
var assets embed.FS

// csp allows this origin's script, style and requests only, and no
// framing.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"form-action 'none'; base-uri 'none'; frame-ancestors 'none'"

// Handler serves the console's assets under Path: GET and HEAD only.
func Handler() http.Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree always has it
	}
	files := http.StripPrefix(Path, http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "the console's assets are read with GET", http.StatusMethodNotAllowed)
			return
		}
		files.ServeHTTP(w, r)
	})
}

// Favicon serves the node's icon (a 32×32 image, under 1 KiB) at
// FaviconPath: GET and HEAD, to anyone, under any Host. It holds nothing
// but the image, which is why the node serves it outside the operator
// token and the Host check: a browser asks for it on every page, and a
// refusal there was only noise in its console and the node's metrics.
func Favicon() http.Handler {
	icon, err := assets.ReadFile("assets/favicon.ico")
	if err != nil {
		panic(err) // embedded
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "the icon is read with GET", http.StatusMethodNotAllowed)
			return
		}
		h.Set("Content-Type", "image/x-icon")
		h.Set("Cache-Control", faviconMaxAge)
		h.Set("Content-Length", strconv.Itoa(len(icon)))
		if r.Method == http.MethodGet {
			_, _ = w.Write(icon)
		}
	})
}

// RootPattern is the pattern of Root's requests on a ServeMux: GET (and
// HEAD) of / itself. Every other path, and / with another method, stays
// the Tables API's, whose paths all start with an account.
const RootPattern = "GET /{$}"

// rootText tells a client that does not follow redirects where things
// are.
const rootText = "This is a Cairn node.\n" +
	"The web console: " + Path + " (sign in with the operator token).\n" +
	"The Tables API: /<account>/Tables, /<account>/<table>() (as Azure Table storage; the development account is devstoreaccount1).\n" +
	"The operators' API: /$cairn/ (Authorization: Bearer <operator token>). Health: /healthz, /readyz.\n"

// Root answers GET / with a redirect (302) to the console, whose page
// asks for the token, and a short text saying where the console and the
// APIs are. The Azure SDKs never read / (their paths start with the
// account), so the Tables API is unaffected; a / with a query string (a
// client configured without its account, asking for the service's
// properties) is not a browser opening the node, and goes to api, which
// says what is wrong with it.
func Root(api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.RawQuery != "" {
			api.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Set("Location", Path)
		h.Set("Content-Type", "text/plain; charset=utf-8")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusFound)
		if r.Method == http.MethodGet {
			_, _ = io.WriteString(w, rootText)
		}
	})
}
