package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"

	"github.com/cairn-dev/cairn/engine"
)

// refusal is the host's answer inside an Azure SDK error: the response
// error and the first line of the message in its body ("" when it has
// none). The host adds the request's id and time on the next lines, as
// Azure does, which the SDK prints with the status, the headers and the
// body: several lines for one refusal.
func refusal(err error) (*azcore.ResponseError, string) {
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		return nil, ""
	}
	var body struct {
		Error struct {
			Message struct{ Value string } `json:"message"`
		} `json:"odata.error"`
	}
	if re.RawResponse == nil {
		return re, ""
	}
	raw, rerr := runtime.Payload(re.RawResponse)
	if rerr != nil || json.Unmarshal(raw, &body) != nil {
		return re, ""
	}
	msg, _, _ := strings.Cut(body.Error.Message.Value, "\n")
	return re, msg
}

// Coded turns the Azure SDK's error for a refusal of the host into the
// host's coded error: its code and the first line of its message (the
// status's text if the body has none), as engine.ErrorCode reads it.
// Any other error (no host listening) is returned as it is.
func Coded(err error) error {
	re, msg := refusal(err)
	if re == nil || re.ErrorCode == "" {
		return err
	}
	if msg == "" {
		msg = http.StatusText(re.StatusCode)
	}
	return engine.Errorf(engine.Code(re.ErrorCode), "%s", msg)
}

// WithStatus turns the Azure SDK's error for a refusal into one line: the
// HTTP status, the host's code and the first line of its message ("HTTP
// 403 AuthorizationFailure: …"). Any other error is returned as it is.
func WithStatus(err error) error {
	re, msg := refusal(err)
	switch {
	case re == nil:
		return err
	case msg == "":
		return fmt.Errorf("HTTP %d %s", re.StatusCode, re.ErrorCode)
	}
	return fmt.Errorf("HTTP %d %s: %s", re.StatusCode, re.ErrorCode, msg)
}

// ReadOperatorToken reads the operator token a node writes in its data
// directory (<data>/operator.token).
func ReadOperatorToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// Metrics reads the host's /metrics (hostURL as Account.HostURL gives
// it), which answers only with the operator token. A refusal is an error
// with the status and the host's code.
func Metrics(ctx context.Context, hostURL, token string) (string, error) {
	body, err := Get(ctx, hostURL+"/metrics", token)
	return string(body), err
}

// Get sends GET u, with a bearer token if one is given, and returns the
// body of a 200 answer; another status is an error with the status and
// the host's code (from x-ms-error-code, else the body's "Code").
func Get(ctx context.Context, u, bearer string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		code := resp.Header.Get("x-ms-error-code")
		if code == "" {
			var op struct{ Code string }
			_ = json.Unmarshal(body, &op)
			code = op.Code
		}
		path, _, _ := strings.Cut(u, "?")
		return nil, fmt.Errorf("GET %s: HTTP %d %s", path, resp.StatusCode, code)
	}
	return body, nil
}
