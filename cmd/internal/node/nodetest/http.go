package nodetest

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// HTTP sends a request to url with the headers and body given and
// returns the answer's status, headers and body; a request that cannot
// be sent or read fails the test.
func HTTP(t testing.TB, method, url string, header map[string]string, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// ErrorCode is the code of a coded JSON refusal, {"error": {"code": …}}
// ("" for any other body).
func ErrorCode(body string) string {
	var e struct{ Error struct{ Code string } }
	_ = json.Unmarshal([]byte(body), &e)
	return e.Error.Code
}
