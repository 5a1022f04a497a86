package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/nats-io/nuid"

	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
)

// tablesClient is what the HTTP workloads do to a server. Two clients
// implement it: the official Go SDK, and a lean client that costs the
// machine little, so that on a small machine the figures are the server's
// rather than the client's (the SDK decodes every entity into a map and
// encodes it again).
type tablesClient interface {
	CreateTable(ctx context.Context, name string) error
	DeleteTable(ctx context.Context, name string) error
	Insert(ctx context.Context, table string, entity []byte) error
	// Upsert inserts or replaces the entity (pk, rk) unconditionally.
	Upsert(ctx context.Context, table, pk, rk string, entity []byte) error
	// Batch inserts entities (of one partition) in one transaction.
	Batch(ctx context.Context, table string, entities [][]byte) error
	Get(ctx context.Context, table, pk, rk string) error
	// Query pages through the entities matching filter and counts them.
	Query(ctx context.Context, table, filter string) (int, error)
}

// sdkClient is the official Go SDK, signing with the development key and
// never retrying, so that every error surfaces.
type sdkClient struct{ svc *aztables.ServiceClient }

func newSDKClient(endpoint string, doer *http.Client) (*sdkClient, error) {
	cred, err := aztables.NewSharedKeyCredential(httpapi.DevAccountName, httpapi.DevAccountKey)
	if err != nil {
		return nil, err
	}
	svc, err := aztables.NewServiceClientWithSharedKey(endpoint, cred, &aztables.ClientOptions{ClientOptions: azcore.ClientOptions{
		InsecureAllowCredentialWithHTTP: true,
		Retry:                           policy.RetryOptions{MaxRetries: -1},
		Transport:                       doer,
	}})
	if err != nil {
		return nil, err
	}
	return &sdkClient{svc: svc}, nil
}

func (c *sdkClient) CreateTable(ctx context.Context, name string) error {
	_, err := c.svc.CreateTable(ctx, name, nil)
	return err
}

func (c *sdkClient) DeleteTable(ctx context.Context, name string) error {
	_, err := c.svc.DeleteTable(ctx, name, nil)
	return err
}

func (c *sdkClient) Insert(ctx context.Context, table string, entity []byte) error {
	_, err := c.svc.NewClient(table).AddEntity(ctx, entity, nil)
	return err
}

func (c *sdkClient) Upsert(ctx context.Context, table, _, _ string, entity []byte) error {
	_, err := c.svc.NewClient(table).UpsertEntity(ctx, entity, &aztables.UpsertEntityOptions{UpdateMode: aztables.UpdateModeReplace})
	return err
}

func (c *sdkClient) Batch(ctx context.Context, table string, entities [][]byte) error {
	actions := make([]aztables.TransactionAction, len(entities))
	for i, e := range entities {
		actions[i] = aztables.TransactionAction{ActionType: aztables.TransactionTypeAdd, Entity: e}
	}
	_, err := c.svc.NewClient(table).SubmitTransaction(ctx, actions, nil)
	return err
}

func (c *sdkClient) Get(ctx context.Context, table, pk, rk string) error {
	_, err := c.svc.NewClient(table).GetEntity(ctx, pk, rk, nil)
	return err
}

func (c *sdkClient) Query(ctx context.Context, table, filter string) (int, error) {
	pager := c.svc.NewClient(table).NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: &filter})
	n := 0
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return n, err
		}
		n += len(page.Entities)
	}
	return n, nil
}

// leanClient speaks the same protocol with as little work as it can: it
// writes each request by hand on a kept-alive connection of its own (no
// transport goroutines), signs it with SharedKeyLite, and counts the
// entities of a query page instead of decoding them.
type leanClient struct {
	addr    string // host:port
	prefix  string // "/devstoreaccount1"
	key     []byte
	mu      sync.Mutex
	idle    []*leanConn
	dialer  net.Dialer
	timeout time.Duration
}

type leanConn struct {
	c net.Conn
	r *bufio.Reader
	w *bufio.Writer
}

func newLeanClient(endpoint string) (*leanClient, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, err
	}
	key, err := base64.StdEncoding.DecodeString(httpapi.DevAccountKey)
	if err != nil {
		return nil, err
	}
	return &leanClient{addr: u.Host, prefix: strings.TrimSuffix(u.Path, "/"), key: key, timeout: time.Minute}, nil
}

// conn returns an idle connection (reused true) or a new one.
func (c *leanClient) conn(ctx context.Context, fresh bool) (lc *leanConn, reused bool, err error) {
	c.mu.Lock()
	if n := len(c.idle); n > 0 && !fresh {
		lc := c.idle[n-1]
		c.idle = c.idle[:n-1]
		c.mu.Unlock()
		return lc, true, nil
	}
	c.mu.Unlock()
	nc, err := c.dialer.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return nil, false, err
	}
	return &leanConn{c: nc, r: bufio.NewReaderSize(nc, 64<<10), w: bufio.NewWriterSize(nc, 64<<10)}, false, nil
}

func (c *leanClient) release(lc *leanConn) {
	c.mu.Lock()
	c.idle = append(c.idle, lc)
	c.mu.Unlock()
}

// leanResponse is what the workloads need of a response.
type leanResponse struct {
	status   int
	npk, nrk string // the continuation headers of a query page
	body     []byte
}

// do sends one request: path is after the account, already escaped. A
// kept-alive connection the server has closed meanwhile (node closes idle
// ones after 5 s) fails at once; the request is then sent again on a new
// one.
func (c *leanClient) do(ctx context.Context, method, path string, header map[string]string, body []byte) (*leanResponse, error) {
	r, reused, err := c.try(ctx, method, path, header, body, false)
	if err != nil && reused && r == nil {
		r, _, err = c.try(ctx, method, path, header, body, true)
	}
	return r, err
}

func (c *leanClient) try(ctx context.Context, method, path string, header map[string]string, body []byte, fresh bool) (_ *leanResponse, reused bool, _ error) {
	lc, reused, err := c.conn(ctx, fresh)
	if err != nil {
		return nil, false, err
	}
	full := c.prefix + path
	date := time.Now().UTC().Format(http.TimeFormat)
	res, _, _ := strings.Cut(full, "?")
	m := hmac.New(sha256.New, c.key)
	m.Write([]byte(date + "\n/" + httpapi.DevAccountName + res))
	var sig [sha256.Size]byte
	w := lc.w
	for _, part := range []string{method, " ", full, " HTTP/1.1\r\nHost: ", c.addr, "\r\nx-ms-date: ", date,
		"\r\nx-ms-version: 2019-02-02\r\nDataServiceVersion: 3.0\r\nAccept: application/json;odata=nometadata\r\nAuthorization: SharedKeyLite ",
		httpapi.DevAccountName, ":", base64.StdEncoding.EncodeToString(m.Sum(sig[:0])), "\r\nContent-Length: ", strconv.Itoa(len(body)), "\r\n"} {
		w.WriteString(part)
	}
	for k, v := range header {
		w.WriteString(k)
		w.WriteString(": ")
		w.WriteString(v)
		w.WriteString("\r\n")
	}
	w.WriteString("\r\n")
	w.Write(body)
	_ = lc.c.SetDeadline(time.Now().Add(c.timeout))
	if err := w.Flush(); err != nil {
		lc.c.Close()
		return nil, reused, err
	}
	resp, keep, err := readResponse(lc.r, method)
	if err != nil {
		lc.c.Close()
		return nil, reused, err
	}
	if keep {
		c.release(lc)
	} else {
		lc.c.Close()
	}
	return resp, false, nil
}

// readResponse reads one HTTP/1.1 response: the status, the headers the
// workloads need, and the body (Content-Length or chunked). keep is false
// when the server closes the connection.
func readResponse(r *bufio.Reader, method string) (resp *leanResponse, keep bool, err error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return nil, false, err
	}
	f := strings.Fields(string(line))
	if len(f) < 2 || !strings.HasPrefix(f[0], "HTTP/1.") {
		return nil, false, fmt.Errorf("bad status line %q", line)
	}
	resp = &leanResponse{}
	if resp.status, err = strconv.Atoi(f[1]); err != nil {
		return nil, false, fmt.Errorf("bad status line %q", line)
	}
	keep = f[0] == "HTTP/1.1"
	length, chunked := -1, false
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return nil, false, err
		}
		k, v, ok := bytes.Cut(bytes.TrimRight(line, "\r\n"), []byte(":"))
		if !ok {
			break // the blank line
		}
		v = bytes.TrimSpace(v)
		switch {
		case bytes.EqualFold(k, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(v)); err != nil {
				return nil, false, fmt.Errorf("bad Content-Length %q", v)
			}
		case bytes.EqualFold(k, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(v, []byte("chunked"))
		case bytes.EqualFold(k, []byte("Connection")):
			keep = keep && !bytes.EqualFold(v, []byte("close"))
		case bytes.EqualFold(k, []byte("x-ms-continuation-NextPartitionKey")):
			resp.npk = string(v)
		case bytes.EqualFold(k, []byte("x-ms-continuation-NextRowKey")):
			resp.nrk = string(v)
		}
	}
	switch {
	case method == "HEAD" || resp.status == http.StatusNoContent || resp.status == http.StatusNotModified:
	case chunked:
		resp.body, err = io.ReadAll(httputil.NewChunkedReader(r))
		if err == nil {
			_, err = r.ReadString('\n') // the trailer's blank line
		}
	case length >= 0:
		resp.body = make([]byte, length)
		_, err = io.ReadFull(r, resp.body)
	default:
		resp.body, err = io.ReadAll(r)
		keep = false
	}
	return resp, keep && err == nil, err
}

// expect sends a request and turns an unexpected status into an error
// with the body.
func (c *leanClient) expect(ctx context.Context, method, path string, header map[string]string, body []byte, want ...int) (*leanResponse, error) {
	r, err := c.do(ctx, method, path, header, body)
	if err != nil {
		return nil, err
	}
	for _, w := range want {
		if r.status == w {
			return r, nil
		}
	}
	return nil, fmt.Errorf("status %d: %.300s", r.status, r.body)
}

func (c *leanClient) CreateTable(ctx context.Context, name string) error {
	_, err := c.expect(ctx, "POST", "/Tables", map[string]string{"Content-Type": "application/json", "Prefer": "return-no-content"},
		[]byte(`{"TableName":"`+name+`"}`), http.StatusNoContent, http.StatusCreated)
	return err
}

func (c *leanClient) DeleteTable(ctx context.Context, name string) error {
	_, err := c.expect(ctx, "DELETE", "/Tables('"+name+"')", nil, nil, http.StatusNoContent)
	return err
}

func (c *leanClient) Insert(ctx context.Context, table string, entity []byte) error {
	_, err := c.expect(ctx, "POST", "/"+table, map[string]string{"Content-Type": "application/json", "Prefer": "return-no-content"}, entity,
		http.StatusNoContent, http.StatusCreated)
	return err
}

func (c *leanClient) Upsert(ctx context.Context, table, pk, rk string, entity []byte) error {
	_, err := c.expect(ctx, "PUT", "/"+table+"(PartitionKey='"+url.PathEscape(pk)+"',RowKey='"+url.PathEscape(rk)+"')",
		map[string]string{"Content-Type": "application/json"}, entity, http.StatusNoContent)
	return err
}

func (c *leanClient) Batch(ctx context.Context, table string, entities [][]byte) error {
	id := nuid.Next()
	var b bytes.Buffer
	fmt.Fprintf(&b, "--batch_%s\r\nContent-Type: multipart/mixed; boundary=changeset_%s\r\n\r\n", id, id)
	for _, e := range entities {
		fmt.Fprintf(&b, "--changeset_%s\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n", id)
		fmt.Fprintf(&b, "POST http://%s%s/%s HTTP/1.1\r\nContent-Type: application/json\r\nAccept: application/json;odata=nometadata\r\nPrefer: return-no-content\r\nDataServiceVersion: 3.0\r\n\r\n", c.addr, c.prefix, table)
		b.Write(e)
		b.WriteString("\r\n")
	}
	fmt.Fprintf(&b, "--changeset_%s--\r\n--batch_%s--\r\n", id, id)
	r, err := c.expect(ctx, "POST", "/$batch", map[string]string{"Content-Type": "multipart/mixed; boundary=batch_" + id}, b.Bytes(), http.StatusAccepted)
	if err != nil {
		return err
	}
	if got := bytes.Count(r.body, []byte("HTTP/1.1 204")) + bytes.Count(r.body, []byte("HTTP/1.1 201")); got != len(entities) {
		return fmt.Errorf("the transaction failed: %.500s", r.body)
	}
	return nil
}

func (c *leanClient) Get(ctx context.Context, table, pk, rk string) error {
	_, err := c.expect(ctx, "GET", "/"+table+"(PartitionKey='"+url.PathEscape(pk)+"',RowKey='"+url.PathEscape(rk)+"')", nil, nil, http.StatusOK)
	return err
}

// rowKeyField occurs once per entity in a nometadata query page.
var rowKeyField = []byte(`"RowKey":`)

func (c *leanClient) Query(ctx context.Context, table, filter string) (int, error) {
	q := url.Values{"$filter": {filter}}
	n := 0
	for {
		r, err := c.expect(ctx, "GET", "/"+table+"()?"+strings.ReplaceAll(q.Encode(), "+", "%20"), nil, nil, http.StatusOK)
		if err != nil {
			return n, err
		}
		n += bytes.Count(r.body, rowKeyField)
		npk, nrk := r.npk, r.nrk
		if npk == "" && nrk == "" {
			return n, nil
		}
		q.Set("NextPartitionKey", npk)
		q.Set("NextRowKey", nrk)
	}
}

// errClient names the client kinds of -client.
var errClient = errors.New("-client must be lean or sdk")

// newTablesClient returns the client -client names for endpoint.
func newTablesClient(kind, endpoint string, doer *http.Client) (tablesClient, error) {
	switch kind {
	case "lean":
		return newLeanClient(endpoint)
	case "sdk":
		return newSDKClient(endpoint, doer)
	}
	return nil, fmt.Errorf("%w, not %q", errClient, kind)
}
