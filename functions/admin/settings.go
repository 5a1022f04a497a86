package admin

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/functions"
)

// settingsWait bounds how long a change waits for this node's copy of the
// settings (Runner.WaitSettings) before it is answered; past it the
// change, which is stored, is answered all the same.
const settingsWait = 5 * time.Second

// serveSettings answers the settings and secrets routes:
//
//	GET    /$cairn/functions/<name>/settings        its settings and secrets (secrets by name only)
//	GET    /$cairn/functions/<name>/secrets         its secrets, by name only
//	POST   /$cairn/functions/<name>/settings/<key>  set a setting to the body
//	POST   /$cairn/functions/<name>/secrets/<key>   set a secret to the body
//	DELETE /$cairn/functions/<name>/settings/<key>  remove one (secrets/<key> likewise)
//
// No answer carries a secret's value, and no error quotes a value.
func (h *Handler) serveSettings(w http.ResponseWriter, r *http.Request, parts []string) {
	fn, secret := parts[1], parts[2] == "secrets"
	s := h.rn.Settings()
	ctx := r.Context()
	switch {
	case len(parts) == 3 && r.Method == http.MethodGet:
		all, err := s.List(ctx, fn)
		if err != nil {
			settingsFail(w, err)
			return
		}
		out := make([]functions.Setting, 0, len(all))
		for _, st := range all {
			if st.Secret || !secret {
				out = append(out, st)
			}
		}
		writeJSON(w, http.StatusOK, out)
	case len(parts) == 4 && r.Method == http.MethodPost:
		body, err := io.ReadAll(io.LimitReader(r.Body, functions.MaxSettingValue+1))
		if err != nil {
			settingsFail(w, engine.Errorf(engine.CodeInvalidInput, "read the value: %v", err))
			return
		}
		st, rev, err := s.Set(ctx, fn, parts[3], string(body), secret)
		if err != nil {
			settingsFail(w, err)
			return
		}
		h.waitSettings(ctx, rev)
		writeJSON(w, http.StatusOK, st)
	case len(parts) == 4 && r.Method == http.MethodDelete:
		rev, err := s.Remove(ctx, fn, parts[3], secret)
		if err != nil {
			settingsFail(w, err)
			return
		}
		h.waitSettings(ctx, rev)
		w.WriteHeader(http.StatusNoContent)
	default:
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"code": "UnsupportedHttpVerb", "error": "use GET on …/settings and …/secrets, POST or DELETE on …/settings/<name> and …/secrets/<name>"})
	}
}

// waitSettings lets this node's copy reach rev, so that an invocation
// started here after the answer sees the change.
func (h *Handler) waitSettings(ctx context.Context, rev uint64) {
	ctx, cancel := context.WithTimeout(ctx, settingsWait)
	defer cancel()
	_ = h.rn.WaitSettings(ctx, rev)
}

// settingsFail answers a coded error with its status: the caller's
// (400, 404, 413), a race to retry (503), else the node's (500).
func settingsFail(w http.ResponseWriter, err error) {
	code := engine.ErrorCode(err)
	status := http.StatusInternalServerError
	switch code {
	case engine.CodeInvalidInput:
		status = http.StatusBadRequest
	case engine.CodeResourceNotFound:
		status = http.StatusNotFound
	case engine.CodeRequestBodyTooLarge:
		status = http.StatusRequestEntityTooLarge
	case engine.CodeServerBusy:
		status = http.StatusServiceUnavailable
	default:
		code = engine.CodeInternalError
	}
	writeJSON(w, status, map[string]string{"code": string(code), "error": err.Error()})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
