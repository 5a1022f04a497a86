package httpapi_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
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
	// others are the other hosts of a placed cluster (placed): the SDK
	// clients send each request to the next host in turn.
	others []*node.Node
	next   atomic.Uint64
}

// placed runs every test of the package against a cluster of 3 hosts,
// each holding two thirds of every table's shards, instead of one host:
// TestMain runs the tests once each way.
var placed bool

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 && profiling() {
		// A second pass would start its profiles anew over the first's
		// files: a profile is of one host, as its command means.
		fmt.Fprintln(os.Stderr, "httpapi: profiling, so the tests did not run again on a placed cluster")
	} else if code == 0 {
		placed = true
		code = m.Run()
	}
	os.Exit(code)
}

// profiling reports whether a profile was asked of this test binary.
func profiling() bool {
	for _, name := range []string{"test.cpuprofile", "test.memprofile", "test.blockprofile", "test.mutexprofile", "test.trace"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" {
			return true
		}
	}
	return false
}

// skipPlaced skips a test that looks into one host's insides in the
// placed run, saying why.
func skipPlaced(t testing.TB, why string) {
	t.Helper()
	if placed {
		t.Skip("not run on a placed cluster: " + why)
	}
}

// startServer starts a host with an embedded NATS server and the HTTP API
// on a free port; it stops when the test ends. In the placed run it is
// the first of 3 hosts, two holding each shard of a table.
func startServer(t testing.TB, api httpapi.Config) *server {
	t.Helper()
	if !placed {
		h, _ := nodetest.Start(t, node.Config{API: api})
		return &server{h: h, endpoint: h.HTTPURL() + "/" + httpapi.DevAccountName}
	}
	h, _ := nodetest.Start(t, node.Config{API: api, ViewReplicas: 2})
	s := &server{h: h, endpoint: h.HTTPURL() + "/" + httpapi.DevAccountName}
	for range 2 {
		o, _ := nodetest.Start(t, node.Config{API: api, ViewReplicas: 2, NATSURL: h.ClientURL(), NATSCreds: h.NATSCredsFile()})
		s.others = append(s.others, o)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range append([]*node.Node{h}, s.others...) {
		for len(n.Members().Live()) != 3 {
			if time.Now().After(deadline) {
				t.Fatal("the hosts do not see each other")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return s
}

// catalogSettled waits, in the placed run, until every host has applied
// the catalog as the first host has: a table created or deleted through
// one host is seen by the others once they have read its catalog record
// (as on any cluster), and the next request may go to any of them.
func (s *server) catalogSettled(t testing.TB) {
	t.Helper()
	if len(s.others) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	last := s.h.Views().CatalogSeq()
	for _, o := range s.others {
		if err := o.Views().WaitCatalog(ctx, last); err != nil {
			t.Fatal(err)
		}
	}
}

// clientOptions are the SDK's options for s: in the placed run, each
// request goes to the next host (the URL's host and port changed, which
// no signature covers).
func (s *server) clientOptions() *aztables.ClientOptions {
	o := &aztables.ClientOptions{ClientOptions: azcore.ClientOptions{
		InsecureAllowCredentialWithHTTP: true,
		Retry:                           policy.RetryOptions{MaxRetries: -1},
	}}
	if len(s.others) > 0 {
		o.Transport = rotating{s}
	}
	return o
}

// rotating sends each request to the next host of a placed cluster.
type rotating struct{ s *server }

func (r rotating) Do(req *http.Request) (*http.Response, error) {
	hosts := append([]*node.Node{r.s.h}, r.s.others...)
	h := hosts[r.s.next.Add(1)%uint64(len(hosts))]
	u, err := url.Parse(h.HTTPURL())
	if err != nil {
		return nil, err
	}
	req.URL.Host, req.Host = u.Host, u.Host
	return http.DefaultClient.Do(req)
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
	c, err := aztables.NewServiceClientWithSharedKey(s.endpoint, cred, s.clientOptions())
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
