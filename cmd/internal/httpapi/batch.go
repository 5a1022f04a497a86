package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"

	"github.com/nats-io/nuid"

	"github.com/cairn-dev/cairn/engine"
)

// batchPart is one operation of a $batch change set.
type batchPart struct {
	method    string
	resource  string // the path after the account
	header    http.Header
	body      []byte
	contentID string // the part's Content-ID, echoed in its response
}

// errBatchFormat marks a malformed $batch body.
func errBatchFormat(format string, args ...any) *engine.Error {
	return engine.Errorf(engine.CodeInvalidInput, "$batch: "+format, args...)
}

// boundaryOf returns the boundary of a multipart/mixed Content-Type.
func boundaryOf(contentType string) (string, error) {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || !strings.HasPrefix(mt, "multipart/") || params["boundary"] == "" {
		return "", errBatchFormat("the Content-Type must be multipart/mixed with a boundary, not %q", contentType)
	}
	return params["boundary"], nil
}

// maxBatchParts bounds the parts read from a change set: one more than the
// limit, so that a batch of 101 gets the engine's clear error.
const maxBatchParts = engine.MaxBatchOps + 1

// parseBatch reads a $batch body: one change set of HTTP requests. It
// accepts both SDKs' framing: the Go SDK's empty header values, the
// JavaScript SDK's lowercase headers, extra blank lines and missing
// Content-Length.
func parseBatch(body []byte, contentType string) ([]batchPart, error) {
	boundary, err := boundaryOf(contentType)
	if err != nil {
		return nil, err
	}
	outer := multipart.NewReader(bytes.NewReader(body), boundary)
	cs, err := outer.NextPart()
	if err != nil {
		return nil, errBatchFormat("no change set in the body: %v", err)
	}
	csBoundary, err := boundaryOf(cs.Header.Get("Content-Type"))
	if err != nil {
		return nil, err
	}
	inner := multipart.NewReader(cs, csBoundary)
	var parts []batchPart
	for {
		p, err := inner.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, errBatchFormat("reading the change set: %v", err)
		}
		if len(parts) == maxBatchParts {
			break
		}
		raw, err := io.ReadAll(p)
		if err != nil {
			return nil, errBatchFormat("reading operation %d: %v", len(parts), err)
		}
		bp, err := parseBatchRequest(raw)
		if err != nil {
			return nil, engine.AsError(err).AtIndex(len(parts))
		}
		bp.contentID = p.Header.Get("Content-ID")
		parts = append(parts, bp)
	}
	if len(parts) == 0 {
		return nil, errBatchFormat("the change set has no operations")
	}
	if _, err := outer.NextPart(); err != nil && !errors.Is(err, io.EOF) {
		return nil, errBatchFormat("after the change set: %v", err)
	} else if err == nil {
		return nil, errBatchFormat("only one change set per batch is supported")
	}
	return parts, nil
}

// parseBatchRequest parses "VERB URL HTTP/1.1", headers, a blank line and
// the body.
func parseBatchRequest(raw []byte) (batchPart, error) {
	var bp batchPart
	// nextLine returns the next line without its CR LF (or LF) and the rest.
	nextLine := func(b []byte) (line, rest []byte, ok bool) {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return bytes.TrimRight(b, "\r"), nil, len(b) > 0
		}
		return bytes.TrimRight(b[:i], "\r"), b[i+1:], true
	}
	var line []byte
	rest, ok := raw, true
	for len(bytes.TrimSpace(line)) == 0 {
		if line, rest, ok = nextLine(rest); !ok {
			return bp, errBatchFormat("an operation has no request line")
		}
	}
	f := strings.Fields(string(line))
	if len(f) != 3 || !strings.HasPrefix(f[2], "HTTP/") {
		return bp, errBatchFormat("bad request line %q: want VERB URL HTTP/1.1", line)
	}
	bp.method = f[0]
	u, err := url.Parse(f[1])
	if err != nil {
		return bp, errBatchFormat("bad URL %q: %v", f[1], err)
	}
	path := strings.TrimPrefix(u.Path, "/")
	_, bp.resource, _ = strings.Cut(path, "/") // drop the account
	bp.header = http.Header{}
	for {
		if line, rest, ok = nextLine(rest); !ok || len(line) == 0 {
			break
		}
		k, v, found := bytes.Cut(line, []byte(":"))
		if !found {
			return bp, errBatchFormat("bad header line %q", line)
		}
		if v = bytes.TrimSpace(v); len(v) > 0 {
			bp.header[textproto.CanonicalMIMEHeaderKey(string(bytes.TrimSpace(k)))] = []string{string(v)}
		}
	}
	bp.body = bytes.TrimSpace(rest)
	return bp, nil
}

// toOperation turns a part into an operation on its table and checks the
// request's SAS grants it.
func (c *call) toOperation(bp *batchPart) (string, engine.Operation, error) {
	table, k, err := parseEntityPath(bp.resource)
	if err != nil {
		return "", engine.Operation{}, err
	}
	var op engine.Operation
	if _, ok := bp.header[MessagesHeader]; ok {
		// The part's messages would be dropped: the transaction's go on
		// the $batch request, into its one record.
		return "", op, engine.Errorf(engine.CodeInvalidInput, "%s goes on the $batch request, not on its parts", MessagesHeader)
	}
	ifMatch := bp.header.Get("If-Match")
	parse := func() (*engine.Entity, error) { return parseEntityBody(bp.body, k) }
	perm := byte('u')
	switch {
	case bp.method == http.MethodPost && k == nil:
		op.Op, perm = engine.OpInsert, 'a'
	case k == nil:
		return "", op, errBatchFormat("%s %s needs the entity's keys in the URL", bp.method, bp.resource)
	case bp.method == http.MethodDelete:
		if ifMatch == "" {
			return "", op, engine.Errorf(codeMissingRequiredHeader, "a delete needs If-Match: the entity's ETag, or *")
		}
		op = engine.Operation{Op: engine.OpDelete, Entity: engine.NewEntity(k.pk, k.rk), IfMatch: ifMatch}
		perm = 'd'
	case bp.method == http.MethodPut:
		op.Op = engine.OpReplace
		if ifMatch == "" {
			op.Op = engine.OpInsertOrReplace
		}
	case bp.method == http.MethodPatch || bp.method == "MERGE":
		op.Op = engine.OpMerge
		if ifMatch == "" {
			op.Op = engine.OpInsertOrMerge
		}
	default:
		return "", op, errBatchFormat("%s is not an operation of a change set (POST, PUT, PATCH, MERGE, DELETE)", bp.method)
	}
	if op.Op != engine.OpDelete {
		e, err := parse()
		if err != nil {
			return "", op, err
		}
		op.Entity, op.IfMatch = e, ifMatch
	}
	if err := c.allow(table, perm); err != nil {
		return "", op, err
	}
	if ifMatch == "" && perm == 'u' {
		if err := c.allow(table, 'a'); err != nil {
			return "", op, err
		}
	}
	return table, op, c.checkKey(op.Entity.PartitionKey, op.Entity.RowKey)
}

// batch serves POST /$batch: an entity group transaction. Azure answers 202
// even when the transaction fails; the failure is one response part naming
// the failing operation (Content-ID, 1-based) with a message prefixed by
// its 0-based index.
func (c *call) batch() {
	c.op = "Batch"
	body, err := c.body()
	if err != nil {
		c.fail(err)
		return
	}
	parts, err := parseBatch(body, c.r.Header.Get("Content-Type"))
	if err != nil {
		if e := engine.AsError(err); e.Index >= 0 {
			c.batchFailure(e)
			return
		}
		c.fail(err)
		return
	}
	// The request's messages go with the whole transaction: one command,
	// one journal record.
	msgs, err := c.messages()
	if err != nil {
		c.fail(err)
		return
	}
	cmd := &engine.Command{ID: c.commandID(), Batch: true, Ops: make([]engine.Operation, len(parts)), Messages: msgs}
	for i := range parts {
		table, op, err := c.toOperation(&parts[i])
		if err != nil {
			c.batchFailure(engine.AsError(err).AtIndex(i))
			return
		}
		full, err := c.fullName(table)
		if err != nil {
			c.batchFailure(engine.AsError(err).AtIndex(i))
			return
		}
		if i == 0 {
			cmd.Table, c.table = full, full
		} else if !strings.EqualFold(full, cmd.Table) {
			first := engine.ShownTable(cmd.Table)
			c.batchFailure(engine.Errorf(engine.CodeInvalidInput, "all operations of a batch must be on one table: %s, then %s", first, table).AtIndex(i))
			return
		}
		cmd.Ops[i] = op
	}
	reply, err := c.commit(cmd)
	if err != nil {
		e := engine.AsError(err)
		if e.Code == engine.CodeInternalError || e.Code == engine.CodeOperationTimedOut {
			c.fail(err)
			return
		}
		c.batchFailure(e)
		return
	}
	var b bytes.Buffer
	cs := c.batchStart(&b)
	for i := range parts {
		res := reply.Results[i]
		op := cmd.Ops[i]
		fmt.Fprintf(&b, "--%s\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n", cs)
		var entity []byte
		code := http.StatusNoContent
		if op.Op == engine.OpInsert && parts[i].header.Get("Prefer") != "return-no-content" {
			code = http.StatusCreated
			e := *op.Entity
			e.Timestamp = res.Timestamp
			entity = c.appendEntity(nil, cmd.Table, &e, res.ETag, true)
		}
		fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\n", code, http.StatusText(code))
		if id := parts[i].contentID; id != "" {
			fmt.Fprintf(&b, "Content-ID: %s\r\n", id)
		}
		b.WriteString("X-Content-Type-Options: nosniff\r\nCache-Control: no-cache\r\nDataServiceVersion: 3.0;\r\n")
		if op.Op == engine.OpInsert {
			fmt.Fprintf(&b, "Location: %s/%s\r\n", c.base(), keyPath(cmd.Table, op.Entity.PartitionKey, op.Entity.RowKey))
		}
		if res.ETag != "" {
			fmt.Fprintf(&b, "ETag: %s\r\n", res.ETag)
		}
		if entity != nil {
			fmt.Fprintf(&b, "Content-Type: %s\r\n\r\n", contentType(c.meta))
			b.Write(entity)
			b.WriteString("\r\n")
		} else {
			// The blank line ending the headers, then the CRLF that
			// belongs to the next boundary.
			b.WriteString("\r\n\r\n")
		}
	}
	c.batchEnd(&b, cs)
}

// batchStart writes the reply's headers and opens the change set response;
// it returns the change set boundary.
func (c *call) batchStart(b *bytes.Buffer) string {
	id := nuid.Next()
	outer, cs := "batchresponse_"+id, "changesetresponse_"+id
	c.w.Header().Set("Content-Type", "multipart/mixed; boundary="+outer)
	c.w.Header().Set("DataServiceVersion", "3.0;")
	fmt.Fprintf(b, "--%s\r\nContent-Type: multipart/mixed; boundary=%s\r\n\r\n", outer, cs)
	return cs
}

func (c *call) batchEnd(b *bytes.Buffer, cs string) {
	outer := strings.TrimPrefix(c.w.Header().Get("Content-Type"), "multipart/mixed; boundary=")
	fmt.Fprintf(b, "--%s--\r\n--%s--\r\n", cs, outer)
	c.w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	c.w.WriteHeader(http.StatusAccepted)
	_, _ = c.w.Write(b.Bytes())
}

// batchFailure answers a failed transaction: 202 with one part, the failing
// operation's status and Azure's error JSON.
func (c *call) batchFailure(e *engine.Error) {
	index := max(e.Index, 0)
	c.s.metrics.failure(e.Code)
	var b bytes.Buffer
	cs := c.batchStart(&b)
	code := status(e.Code)
	fmt.Fprintf(&b, "--%s\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n", cs)
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\nContent-ID: %d\r\nX-Content-Type-Options: nosniff\r\nCache-Control: no-cache\r\nDataServiceVersion: 3.0;\r\n", code, http.StatusText(code), index+1)
	fmt.Fprintf(&b, "x-ms-error-code: %s\r\nContent-Type: application/json;odata=minimalmetadata;streaming=true;charset=utf-8\r\n\r\n", e.Code)
	b.Write(errorBody(e, c.id, index))
	b.WriteString("\r\n")
	c.batchEnd(&b, cs)
}
