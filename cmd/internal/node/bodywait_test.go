package node

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// testGap is the body gap of these tests: short, so that a body that
// never arrives fails fast, and four times the pauses of a body that
// keeps arriving, so that a loaded machine's scheduling delays do not
// make an arriving body look stopped.
const testGap = time.Second

// serveBodyWait serves h behind bodyWait(testGap) on a loopback port
// until the test ends, and returns the address.
func serveBodyWait(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: bodyWait(h, testGap), ReadHeaderTimeout: readHeaderTimeout}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// send writes raw on a new connection to addr, then the parts of body
// with pause between them, and returns the answer and its body, or why
// there is none within answerTimeout.
func send(t *testing.T, addr, raw string, pause time.Duration, body ...string) (*http.Response, string, error) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	for _, part := range body {
		time.Sleep(pause) // the client's own pace, not a synchronisation
		if _, err := io.WriteString(c, part); err != nil {
			t.Fatal(err)
		}
	}
	_ = c.SetReadDeadline(time.Now().Add(answerTimeout))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil, "", err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b), err
}

// TestBodyWaitUnreadBody: a request announcing a body it never sends, to
// a handler that does not read it, is answered and its connection closed
// once the body has not arrived for the gap, instead of staying in a
// request for as long as the client keeps the connection.
func TestBodyWaitUnreadBody(t *testing.T) {
	addr := serveBodyWait(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	resp, _, err := send(t, addr, "POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n", 0)
	if err != nil {
		t.Fatalf("no answer within %v to a request whose body never comes: %v", answerTimeout, err)
	}
	if !resp.Close {
		t.Fatal("the connection of a request whose body never came is kept alive")
	}
}

// TestBodyWaitArrivingBody: a body that keeps arriving, each part within
// the gap, is read whole though it takes longer than the gap; and a
// handler that works longer than the gap after reading its body keeps
// its request's context.
func TestBodyWaitArrivingBody(t *testing.T) {
	addr := serveBodyWait(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		select {
		case <-r.Context().Done():
			http.Error(w, "context ended after the body", http.StatusInternalServerError)
		case <-time.After(3 * testGap / 2): // work longer than the gap
			_, _ = w.Write(b)
		}
	}))
	parts := []string{"ab", "cd", "ef", "gh", "ij", "kl"} // 6 pauses of a quarter of the gap: longer than the gap in all
	resp, body, err := send(t, addr, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 12\r\n\r\n", testGap/4, parts...)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || body != "abcdefghijkl" {
		t.Fatalf("a body arriving in time: %s %q", resp.Status, body)
	}
}
