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
package console

import (
	"embed"
	"io/fs"
	"net/http"
)

// Path is where the node serves the console.
const Path = "/$cairn/console/"

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
