//go:build wasip1

// Command webhook is a Cairn function behind an HTTP route: a webhook
// receiver. A sender POSTs an event to /fn/webhook/events, signed the way
// GitHub signs its deliveries (X-Hub-Signature-256: sha256=<hex HMAC-SHA256
// of the raw body>, keyed by a secret both sides hold); the function checks
// the signature, stores the event in table Events and sends it on the
// queue events, both or neither. Deploy it with
//
//	go run ./cmd/host deploy ./examples/webhook
//
// and give it the secret with host functions secrets webhook set
// WEBHOOK_SECRET. See README.md.
package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/functions/sdk"
)

func init() { sdk.Handle(receive) }

func main() {}

// Where the events go, and the names the sender and the operator use.
const (
	table           = "Events"
	queue           = "events"
	secretName      = "WEBHOOK_SECRET"
	signatureHeader = "X-Hub-Signature-256"
	deliveryHeader  = "X-Delivery-Id"
)

// event is what the function needs of a delivery's body; the body itself
// is stored and sent on as it came.
type event struct {
	Type string `json:"type"`
}

// receive handles one delivery. The route is anonymous (a webhook's
// sender holds no function key), so the signature is the only proof of
// who sent it: it is checked first, against the raw body, before anything
// else is read. A refusal writes nothing and sends nothing: the function
// returns nil having made no write, and its reply says why.
//
// The event is inserted under (type, delivery id): a sender that delivers
// again (it saw no answer) finds it stored, and the function answers 200
// without a second message. Insert and Enqueue commit together: the
// message is in the journal record that stores the event, and the outbox
// relay sends it.
func receive(ctx *sdk.Context) error {
	req := ctx.HTTP()
	if req == nil {
		return respond(ctx, http.StatusBadRequest, map[string]any{"error": coded("InvalidInput", "this function answers HTTP requests only")})
	}
	secret, ok := ctx.Setting(secretName)
	if !ok || secret == "" {
		ctx.Logf("%s is not set: host functions secrets webhook set %s", secretName, secretName)
		return respond(ctx, http.StatusInternalServerError, map[string]any{"error": coded("SecretNotSet", "the receiver's secret "+secretName+" is not set")})
	}
	body := ctx.Trigger().Body
	if !signed(req.HeaderValue(signatureHeader), body, secret) {
		return respond(ctx, http.StatusUnauthorized, map[string]any{"error": coded("SignatureInvalid", signatureHeader+" is missing or is not sha256=<hex HMAC-SHA256 of the body>")})
	}
	id := req.HeaderValue(deliveryHeader)
	if !validKey(id) {
		return respond(ctx, http.StatusBadRequest, map[string]any{"error": coded("InvalidInput", deliveryHeader+" must be 1 to 64 letters, digits, '-', '_' or '.'")})
	}
	var ev event
	if err := json.Unmarshal(body, &ev); err != nil || !validKey(ev.Type) {
		return respond(ctx, http.StatusBadRequest, map[string]any{"error": coded("InvalidInput", `the body must be a JSON object with "type": 1 to 64 letters, digits, '-', '_' or '.'`)})
	}
	e := engine.NewEntity(ev.Type, id,
		engine.Property{Name: "Body", Value: engine.String(string(body))},
		engine.Property{Name: "Received", Value: engine.DateTimeTicks(ctx.Trigger().Time)},
	)
	if err := ctx.Insert(table, e); engine.ErrorCode(err) == engine.CodeEntityAlreadyExists {
		ctx.Logf("delivery %s of a %s event received again: already stored", id, ev.Type)
		return respond(ctx, http.StatusOK, map[string]any{"deliveryId": id, "type": ev.Type, "duplicate": true})
	} else if err != nil {
		return err // 500 FunctionFailed; the reason goes to the function's log
	}
	msg, err := json.Marshal(map[string]any{"deliveryId": id, "type": ev.Type, "event": json.RawMessage(body)})
	if err != nil {
		return err
	}
	if err := ctx.Enqueue(queue, msg); err != nil {
		return err
	}
	ctx.Logf("delivery %s: a %s event stored and queued", id, ev.Type)
	return respond(ctx, http.StatusAccepted, map[string]any{"deliveryId": id, "type": ev.Type, "stored": table + "/" + ev.Type + "/" + id, "queued": queue})
}

// signed reports whether sig is "sha256=" and the hex HMAC-SHA256 of body
// keyed by secret, compared in constant time.
func signed(sig string, body []byte, secret string) bool {
	hexSum, ok := strings.CutPrefix(sig, "sha256=")
	if !ok {
		return false
	}
	got, err := hex.DecodeString(hexSum)
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return hmac.Equal(got, mac.Sum(nil))
}

// validKey reports whether s may be a key of the Events table as this
// receiver makes them: 1 to 64 letters, digits, '-', '_' or '.'.
func validKey(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// coded is the body of a refusal, as the host's own refusals are.
func coded(code, msg string) map[string]string {
	return map[string]string{"code": code, "message": msg}
}

// respond sets the reply's status and its JSON body.
func respond(ctx *sdk.Context, status int, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // "<hex …>", not "\u003chex …\u003e"
	if err := enc.Encode(v); err != nil {
		return err
	}
	if err := ctx.Respond(status, map[string][]string{"Content-Type": {"application/json"}}); err != nil {
		return err
	}
	return ctx.Reply(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}
