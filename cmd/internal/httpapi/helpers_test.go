package httpapi_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
)

// server is a host started for a test, with its HTTP endpoint.
type server struct {
	h        *node.Node
	endpoint string // http://127.0.0.1:port/devstoreaccount1
}

// startServer starts a host with an embedded NATS server and the HTTP API
// on a free port; it stops when the test ends.
func startServer(t testing.TB, api httpapi.Config) *server {
	t.Helper()
	h, _ := nodetest.Start(t, node.Config{API: api})
	return &server{h: h, endpoint: h.HTTPURL() + "/" + httpapi.DevAccountName}
}

func clientOptions() *aztables.ClientOptions {
	return &aztables.ClientOptions{ClientOptions: azcore.ClientOptions{
		InsecureAllowCredentialWithHTTP: true,
		Retry:                           policy.RetryOptions{MaxRetries: -1},
	}}
}

// service returns an SDK client signing with key (the development key when
// empty).
func (s *server) service(t testing.TB, key string) *aztables.ServiceClient {
	t.Helper()
	if key == "" {
		key = httpapi.DevAccountKey
	}
	cred, err := aztables.NewSharedKeyCredential(httpapi.DevAccountName, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := aztables.NewServiceClientWithSharedKey(s.endpoint, cred, clientOptions())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// table creates a table and returns its SDK client.
func (s *server) table(t testing.TB, name string) *aztables.Client {
	t.Helper()
	svc := s.service(t, "")
	if _, err := svc.CreateTable(context.Background(), name, nil); err != nil {
		t.Fatalf("create table %s: %v", name, err)
	}
	return svc.NewClient(name)
}

// code returns the Azure error code of an SDK error ("" if none).
func code(err error) string {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re.ErrorCode
	}
	return ""
}

func status(err error) int {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode
	}
	return 0
}

func entity(pk, rk string, props map[string]any) []byte {
	b, err := json.Marshal(aztables.EDMEntity{Entity: aztables.Entity{PartitionKey: pk, RowKey: rk}, Properties: props})
	if err != nil {
		panic(err)
	}
	return b
}

// rawClient keeps connections for many requests in flight.
var rawClient = &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 64}}

// raw sends a request signed with SharedKey (not Lite, which the SDK uses)
// and returns the response with its body read.
func (s *server) raw(t testing.TB, method, path string, body []byte, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, s.endpoint+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-ms-date", time.Now().UTC().Format(http.TimeFormat))
	req.Header.Set("Accept", "application/json;odata=minimalmetadata")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if _, ok := header["Authorization"]; !ok {
		sign(req)
	}
	resp, err := rawClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// sign signs req with SharedKey and the development account's key.
func sign(req *http.Request) {
	key, _ := base64.StdEncoding.DecodeString(httpapi.DevAccountKey)
	res := "/" + httpapi.DevAccountName + req.URL.EscapedPath()
	if comp := req.URL.Query().Get("comp"); comp != "" {
		res += "?comp=" + comp
	}
	sts := strings.Join([]string{req.Method, "", req.Header.Get("Content-Type"), req.Header.Get("x-ms-date"), res}, "\n")
	m := hmac.New(sha256.New, key)
	m.Write([]byte(sts))
	req.Header.Set("Authorization", "SharedKey "+httpapi.DevAccountName+":"+base64.StdEncoding.EncodeToString(m.Sum(nil)))
}

// metrics returns a node's /metrics, read with its operator token.
func metrics(t testing.TB, h *node.Node) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, h.HTTPURL()+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+h.OperatorToken())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// list pages through a query with the SDK and returns the entities.
func list(t testing.TB, c *aztables.Client, opts *aztables.ListEntitiesOptions) []aztables.EDMEntity {
	t.Helper()
	return listCtx(t, context.Background(), c, opts)
}

func listCtx(t testing.TB, ctx context.Context, c *aztables.Client, opts *aztables.ListEntitiesOptions) []aztables.EDMEntity {
	t.Helper()
	var out []aztables.EDMEntity
	p := c.NewListEntitiesPager(opts)
	for p.More() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		for _, raw := range page.Entities {
			var e aztables.EDMEntity
			if err := json.Unmarshal(raw, &e); err != nil {
				t.Fatalf("entity %s: %v", raw, err)
			}
			out = append(out, e)
		}
	}
	return out
}

func ptr[T any](v T) *T { return &v }

func readAll(t testing.TB, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
