package httpapi

import (
	"net/http"
	"strings"

	"github.com/cairn-dev/cairn/engine"
)

// OperatorPrefix is where the node serves the Tables API to operators
// (the web console): /$cairn/tables/<account>/<resource> is served as
// /<account>/<resource> is on the Tables API.
const OperatorPrefix = "/$cairn/tables/"

// OperatorHandler returns the Tables API for operators. It authenticates
// nobody: the node serves it behind the operator token
// (cmd/internal/operator), which stands for every account's key, so a
// request needs no signature and may name any account (a valid account
// name; its tables may have been made over NATS or by functions). Only
// authentication differs: every request is routed, validated and
// written through the committer exactly as a signed one (ETags,
// conflicts, limits, coded errors), with the rights of an account key.
// The guard has already judged the Origin header, so the Tables API's
// own CORS check is not applied. Cost: as the Tables API.
func (s *Server) OperatorHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := s.newCall(w, r)
		defer func() { s.metrics.request(c.op, s.metricTable(c.table)) }()
		rest, ok := strings.CutPrefix(r.URL.Path, OperatorPrefix)
		account, resource, _ := strings.Cut(rest, "/")
		if !ok || account == "" {
			c.fail(errInvalidURI("the path must be %s<account>/<resource>, as in %s%s/Tables", OperatorPrefix, OperatorPrefix, DevAccountName))
			return
		}
		if err := engine.ValidateAccountName(account); err != nil {
			c.fail(err)
			return
		}
		c.account, c.operator = account, true
		c.serve(resource)
	})
}
