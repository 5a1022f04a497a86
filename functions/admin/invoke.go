package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/functions"
)

// errInvokeTimeout is a test invocation that got no reply in time (504).
var errInvokeTimeout = errors.New("no reply in time")

// InvokeResult is the answer of POST /$cairn/functions/<name>/invoke: the
// function's reply, or the error its invocation ended with (Cairn-Error).
type InvokeResult struct {
	Output     []byte  `json:"output"`
	Error      string  `json:"error,omitempty"`
	DurationMs float64 `json:"durationMs"`
}

// testInvoke sends the request's body to a function's direct subject, as
// any client of <prefix>.fn.<name> does (one invocation, not retried, on
// whichever node takes it), and waits for the reply at most the
// function's timeout and 5 s. A bad name or a body over functions.MaxMessage is
// InvalidInput, a function this node does not run is not found: nothing
// is sent then.
func (h *Handler) testInvoke(ctx context.Context, name string, r *http.Request) (InvokeResult, error) {
	if err := functions.ValidateName("function", name); err != nil {
		return InvokeResult{}, engine.Errorf(engine.CodeInvalidInput, "%v", err)
	}
	m, ok := h.rn.Manifest(name)
	if !ok {
		return InvokeResult{}, fmt.Errorf("function %q does not run on this node (%w, or its module did not load here: see its loadError)", name, functions.ErrNotDeployed)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, functions.MaxMessage+1))
	if err != nil {
		return InvokeResult{}, engine.Errorf(engine.CodeInvalidInput, "read the body: %v", err)
	}
	if len(body) > functions.MaxMessage {
		return InvokeResult{}, engine.Errorf(engine.CodeInvalidInput, "a trigger body is at most %d bytes", functions.MaxMessage)
	}
	ctx, cancel := context.WithTimeout(ctx, m.Timeout.D()+5*time.Second)
	defer cancel()
	msg := nats.NewMsg(functions.DirectSubject(h.prefix, name))
	msg.Data = body
	start := time.Now()
	reply, err := h.nc.RequestMsgWithContext(ctx, msg)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return InvokeResult{}, fmt.Errorf("function %q: no node serves its direct subject now (%w)", name, functions.ErrNotDeployed)
	case errors.Is(err, context.DeadlineExceeded) && r.Context().Err() == nil:
		return InvokeResult{}, fmt.Errorf("function %q gave no reply within its timeout (%v) + 5 s: %w", name, m.Timeout.D(), errInvokeTimeout)
	case err != nil:
		return InvokeResult{}, fmt.Errorf("invoke %q: %w", name, err)
	}
	res := InvokeResult{Output: reply.Data, DurationMs: float64(time.Since(start).Microseconds()) / 1000}
	if reply.Header != nil {
		res.Error = reply.Header.Get(functions.HeaderReplyError)
	}
	if res.Output == nil {
		res.Output = []byte{}
	}
	return res, nil
}
