package admin

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/functions"
)

// copyWait bounds how long a change of the settings or the keys waits for
// this node's copy (waitCopy) before it is answered.
const copyWait = 5 * time.Second

// serveSettings answers the settings and secrets routes:
//
//	GET    /$cairn/functions/<name>/settings        its settings and secrets (secrets by name only)
//	GET    /$cairn/functions/<name>/secrets         its secrets, by name only
//	POST   /$cairn/functions/<name>/settings/<key>  set a setting to the body
//	POST   /$cairn/functions/<name>/secrets/<key>   set a secret to the body
//	DELETE /$cairn/functions/<name>/settings/<key>  remove one (secrets/<key> likewise)
//
// No answer carries a secret's value, and no error quotes a value.
func (h *Handler) serveSettings(w http.ResponseWriter, r *http.Request, parts []string, reply func(any), fail func(int, error)) {
	fn, secret := parts[1], parts[2] == "secrets"
	s := h.rn.Settings()
	ctx := r.Context()
	switch {
	case len(parts) == 3 && r.Method == http.MethodGet:
		all, err := s.List(ctx, fn)
		if err != nil {
			fail(codedStatus(err), err)
			return
		}
		out := make([]functions.Setting, 0, len(all))
		for _, st := range all {
			if st.Secret || !secret {
				out = append(out, st)
			}
		}
		reply(out)
	case len(parts) == 4 && r.Method == http.MethodPost:
		body, err := io.ReadAll(io.LimitReader(r.Body, functions.MaxSettingValue+1))
		if err != nil {
			fail(http.StatusBadRequest, engine.Errorf(engine.CodeInvalidInput, "read the value: %v", err))
			return
		}
		st, rev, err := s.Set(ctx, fn, parts[3], string(body), secret)
		if err != nil {
			fail(codedStatus(err), err)
			return
		}
		h.waitCopy(ctx, func(ctx context.Context) error { return h.rn.WaitSettings(ctx, rev) })
		reply(st)
	case len(parts) == 4 && r.Method == http.MethodDelete:
		rev, err := s.Remove(ctx, fn, parts[3], secret)
		if err != nil {
			fail(codedStatus(err), err)
			return
		}
		h.waitCopy(ctx, func(ctx context.Context) error { return h.rn.WaitSettings(ctx, rev) })
		w.WriteHeader(http.StatusNoContent)
	default:
		fail(http.StatusMethodNotAllowed, errors.New("use GET on …/settings and …/secrets, POST or DELETE on …/settings/<name> and …/secrets/<name>"))
	}
}

// waitCopy lets this node's watched copy (of the settings, or of the
// keys) take a change just made, so that what this node does after the
// answer sees it; the other nodes see it when their watch delivers it.
// Past copyWait the change, which is stored, is answered all the same.
func (h *Handler) waitCopy(ctx context.Context, wait func(context.Context) error) {
	ctx, cancel := context.WithTimeout(ctx, copyWait)
	defer cancel()
	_ = wait(ctx)
}
