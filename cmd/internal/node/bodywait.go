package node

import (
	"io"
	"net/http"
	"time"
)

// bodyGap is the longest a request body may go without a byte arriving
// at the front door, as the Tables API waits for its bodies
// (httpapi.Config.BodyTimeout). It matters most for a body that no
// handler reads: net/http reads up to 256 KiB of it before it answers,
// with no deadline of its own, so a client announcing a body it never
// sends (to /healthz, or to any refusal) would otherwise keep its
// connection in a request for as long as it liked.
const bodyGap = 10 * time.Second

// bodyWait serves h, making each request body keep arriving: a read
// deadline gap after the request starts, moved on by each read of the
// body, and lifted once the body is read to its end (nothing of it is
// left to wait for). A handler that sets its own deadlines (httpapi)
// overrides these before each read. A request without a body is
// untouched. A body that stops arriving fails its reads; the server then
// closes the connection after its answer. Unlike http.Server's
// ReadTimeout, which bounds header and body by one fixed time, the wait
// follows the body's progress: an operator's slow but steady upload is
// not cut off. The cost is a deadline update per read.
func bodyWait(h http.Handler, gap time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(gap)); err == nil {
			r.Body = &arrivingBody{ReadCloser: r.Body, rc: rc, gap: gap}
		}
		h.ServeHTTP(w, r)
	})
}

// arrivingBody moves its connection's read deadline on with each read.
type arrivingBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	gap  time.Duration
	done bool // read to its end: the deadline is lifted
}

func (b *arrivingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case b.done:
	case err == io.EOF:
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	case err == nil:
		_ = b.rc.SetReadDeadline(time.Now().Add(b.gap))
	}
	return n, err
}
