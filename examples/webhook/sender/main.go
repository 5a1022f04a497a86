// Command sender plays the other side of the webhook example: it creates
// the table the receiver stores events in, and delivers events signed as
// a webhook sender signs them.
//
//	go run ./examples/webhook/sender setup                      create table Events (over NATS)
//	go run ./examples/webhook/sender send <delivery-id> <json>  POST the event to /fn/webhook/events, signed
//
// send reads the secret from the environment variable WEBHOOK_SECRET
// (never from the command line, where the shell's history keeps it),
// signs the body (X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the
// body>), sends the delivery id in X-Delivery-Id, and prints the answer's
// status and body. An answer that is not 2xx exits 1 with them on stderr.
package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/examples/internal/demo"
)

func main() { demo.Main("sender", run) }

func run(args []string) error {
	fs := demo.NewFlags("sender", "setup | send <delivery-id> <json>")
	var host demo.Host
	host.NATSFlags(fs, "the host's NATS server (setup)")
	url := fs.String("url", "http://127.0.0.1:10002/fn/webhook/events", "send: the receiver's route")
	cmd, rest, err := demo.Parse(fs, args, map[string]int{"setup": 0, "send": 2})
	if err != nil {
		return err
	}
	ctx, cancel := demo.Context()
	defer cancel()
	if cmd == "setup" {
		nc, err := host.Connect()
		if err != nil {
			return err
		}
		defer nc.Close()
		if _, err := client.New(nc).CreateTable(ctx, "Events"); err != nil && engine.ErrorCode(err) != engine.CodeTableAlreadyExists {
			return err
		}
		fmt.Println("table Events ready")
		return nil
	}
	secret := os.Getenv("WEBHOOK_SECRET")
	if secret == "" {
		return errors.New("send: set WEBHOOK_SECRET to the secret the receiver holds")
	}
	body := []byte(rest[1])
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, *url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	req.Header.Set("X-Delivery-Id", rest[0])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	line := fmt.Sprintf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(answer)))
	if resp.StatusCode/100 != 2 {
		return errors.New(line)
	}
	fmt.Println(line)
	return nil
}
