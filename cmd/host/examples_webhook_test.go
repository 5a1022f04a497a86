package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/functions/admin"
)

// queueBodies is what GET /$cairn/queues/<queue>/peek shows waiting on
// a queue, oldest first.
func queueBodies(t *testing.T, h *node.Node, queue string) []string {
	t.Helper()
	st, _, body := nodetest.HTTP(t, "GET", h.HTTPURL()+admin.Prefix+"queues/"+queue+"/peek", map[string]string{"Authorization": "Bearer " + h.OperatorToken()}, "")
	var ms []struct{ Body []byte }
	if err := json.Unmarshal([]byte(body), &ms); st != http.StatusOK || err != nil {
		t.Fatalf("peek %s: %d %v\n%s", queue, st, err, body)
	}
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = string(m.Body)
	}
	return out
}

// TestExamplesWebhook follows examples/webhook/README.md: the table made
// by the sender, the receiver deployed, a delivery before the secret is
// set (500), the secret set from stdin with the CLI, then deliveries over
// HTTP: signed ones stored and queued (202), the same delivery again
// stored once and queued once (200), and every unsigned, mis-signed or
// malformed one refused with its code, nothing stored and nothing queued.
func TestExamplesWebhook(t *testing.T) {
	ctx := context.Background()
	h, _ := nodetest.Start(t, node.Config{})
	url, creds := h.ClientURL(), h.NATSCredsFile()
	route := h.HTTPURL() + "/fn/webhook/events"
	sender := buildExample(t, "webhook/sender", "-nats-url", url, "-url", route)
	const secret = "webhook-secret-3f9a-never-printed"
	t.Setenv("WEBHOOK_SECRET", secret)

	same(t, "sender setup", sender.must("setup"), "table Events ready\n")
	out, err := runCLI(t, "deploy", "-nats-url", url, "-nats-creds", creds, "../../examples/webhook")
	if err != nil || !strings.Contains(out, "deployed webhook version 1") || !strings.Contains(out, "http POST /fn/webhook/events (anonymous)") {
		t.Fatalf("deploy: %v\n%s", err, out)
	}
	event := `{"type":"push","ref":"refs/heads/main","after":"9c1e2d"}`
	out, err = sender.run("send", "d-0001", event)
	refused(t, "send before the secret is set", out, err, "", `sender: HTTP 500: {"error":{"code":"SecretNotSet","message":"the receiver's secret WEBHOOK_SECRET is not set"}}`+"\n")

	withStdin(t, secret+"\n", func() {
		out, err = runCLI(t, "functions", "-nats-url", url, "-nats-creds", creds, "secrets", "webhook", "set", "WEBHOOK_SECRET")
	})
	if err != nil || !strings.Contains(out, "set secret WEBHOOK_SECRET of webhook") || strings.Contains(out, secret) {
		t.Fatalf("secrets set: %v\n%s", err, out)
	}
	eventually(t, 10*time.Second, "the host reads the secret", func() bool {
		v, ok, err := h.Functions().Setting("webhook", "WEBHOOK_SECRET")
		return err == nil && ok && v == secret
	})

	sign := func(key, body string) string {
		m := hmac.New(sha256.New, []byte(key))
		m.Write([]byte(body))
		return "sha256=" + hex.EncodeToString(m.Sum(nil))
	}
	for _, c := range []struct {
		what   string
		header map[string]string
		body   string
		status int
		code   string
	}{
		{"no signature", map[string]string{"X-Delivery-Id": "d-0002"}, event, 401, "SignatureInvalid"},
		{"signed with another secret", map[string]string{"X-Hub-Signature-256": sign("guessed", event), "X-Delivery-Id": "d-0002"}, event, 401, "SignatureInvalid"},
		{"another body's signature", map[string]string{"X-Hub-Signature-256": sign(secret, event), "X-Delivery-Id": "d-0002"}, strings.Replace(event, "main", "evil", 1), 401, "SignatureInvalid"},
		{"not sha256=", map[string]string{"X-Hub-Signature-256": strings.Replace(sign(secret, event), "sha256=", "sha1=", 1), "X-Delivery-Id": "d-0002"}, event, 401, "SignatureInvalid"},
		{"not hex", map[string]string{"X-Hub-Signature-256": "sha256=zz" + sign(secret, event)[9:], "X-Delivery-Id": "d-0002"}, event, 401, "SignatureInvalid"},
		{"no delivery id", map[string]string{"X-Hub-Signature-256": sign(secret, event)}, event, 400, "InvalidInput"},
		{"a delivery id with a slash", map[string]string{"X-Hub-Signature-256": sign(secret, event), "X-Delivery-Id": "d/0002"}, event, 400, "InvalidInput"},
		{"not JSON", map[string]string{"X-Hub-Signature-256": sign(secret, "push"), "X-Delivery-Id": "d-0002"}, "push", 400, "InvalidInput"},
		{"no type", map[string]string{"X-Hub-Signature-256": sign(secret, `{"ref":"x"}`), "X-Delivery-Id": "d-0002"}, `{"ref":"x"}`, 400, "InvalidInput"},
	} {
		st, hdr, body := nodetest.HTTP(t, "POST", route, c.header, c.body)
		if st != c.status || nodetest.ErrorCode(body) != c.code || hdr.Get("Content-Type") != "application/json" {
			t.Fatalf("%s: %d %s %s, want %d %s", c.what, st, hdr.Get("Content-Type"), body, c.status, c.code)
		}
	}

	same(t, "send", sender.must("send", "d-0001", event), `HTTP 202: {"deliveryId":"d-0001","queued":"events","stored":"Events/push/d-0001","type":"push"}`+"\n")
	same(t, "send again", sender.must("send", "d-0001", event), `HTTP 200: {"deliveryId":"d-0001","duplicate":true,"type":"push"}`+"\n")
	second := `{"type":"release","tag":"v1.2.0"}`
	same(t, "send another", sender.must("send", "d-0002", second), `HTTP 202: {"deliveryId":"d-0002","queued":"events","stored":"Events/release/d-0002","type":"release"}`+"\n")

	// The relay sends the outbox's messages in journal order: once the
	// second delivery's message is on the queue, anything the refused
	// deliveries or the repeated one had sent would be there before it.
	want := []string{
		`{"deliveryId":"d-0001","event":` + event + `,"type":"push"}`,
		`{"deliveryId":"d-0002","event":` + second + `,"type":"release"}`,
	}
	var got []string
	eventually(t, 30*time.Second, "the second delivery's message on the queue events", func() bool {
		got = queueBodies(t, h, "events")
		return len(got) > 0 && strings.Contains(got[len(got)-1], "d-0002")
	})
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("queue events holds\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := client.New(nc)
	var stored []string
	eventually(t, 10*time.Second, "both events in table Events", func() bool {
		stored = stored[:0]
		for qe, err := range c.QueryAll(ctx, "Events") {
			if err != nil {
				t.Fatal(err)
			}
			b, _ := qe.Entity.Get("Body")
			stored = append(stored, qe.Entity.PartitionKey+"/"+qe.Entity.RowKey+" "+b.Str())
		}
		return len(stored) == 2
	})
	if w := "push/d-0001 " + event + "\nrelease/d-0002 " + second; strings.Join(stored, "\n") != w {
		t.Fatalf("table Events holds\n%s\nwant\n%s", strings.Join(stored, "\n"), w)
	}
	e, _, err := c.Retrieve(ctx, "Events", "push", "d-0001")
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := e.Get("Received"); !ok || r.Type() != engine.TypeDateTime || time.Since(r.Time()) > time.Minute {
		t.Fatalf("Events push/d-0001 has no Received time of this minute: %#v", e)
	}
}
