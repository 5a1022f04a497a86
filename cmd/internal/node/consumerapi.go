package node

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/cmd/internal/natsauth"
)

// consumerAPI creates consumers for the service users who may consume
// from streams of the node account (natsauth.ConsumerCreateSubjects):
// their creations are imported as the node's subjects, taken on the
// serving connection, and sent on to the JetStream API by the node user,
// once the configuration is one the user could be let create itself: a
// pull consumer. A push consumer's deliver subject is a subject of the
// node account, where it would publish the stream's messages as the node
// (to a queue, a bucket, a command subject); a creation that names one is
// refused, and the API never sees it. The answer goes back on the serving
// connection, which may publish replies only.
type consumerAPI struct {
	prefix string
	nc     *nats.Conn // the node user's: the JetStream API
	serve  *nats.Conn
	log    *slog.Logger
}

// consumerAPIWait bounds the node's wait for the API's answer.
const consumerAPIWait = 5 * time.Second

// subscribe takes the creations until serve closes.
func (c *consumerAPI) subscribe() error {
	_, err := c.serve.Subscribe(natsauth.ConsumerAPIPrefix(c.prefix)+">", c.create)
	return err
}

func (c *consumerAPI) create(m *nats.Msg) {
	if m.Reply == "" {
		return
	}
	answer, err := c.forward(m)
	if err != nil {
		answer = apiError(err)
	}
	if err := m.Respond(answer); err != nil {
		c.log.Warn("answer a consumer creation", "subject", m.Subject, "err", err)
	}
}

// forward checks a creation and sends it to the API: the API's answer, or
// why it was refused.
func (c *consumerAPI) forward(m *nats.Msg) ([]byte, error) {
	rest := strings.TrimPrefix(m.Subject, natsauth.ConsumerAPIPrefix(c.prefix))
	if !strings.HasPrefix(rest, "CONSUMER.CREATE.") && !strings.HasPrefix(rest, "CONSUMER.DURABLE.CREATE.") {
		return nil, fmt.Errorf("%s is not a consumer creation", m.Subject)
	}
	var req server.CreateConsumerRequest
	if err := json.Unmarshal(m.Data, &req); err != nil {
		return nil, fmt.Errorf("a consumer creation's body: %v", err)
	}
	if req.Config.DeliverSubject != "" || req.Config.DeliverGroup != "" {
		return nil, fmt.Errorf("a push consumer (deliver_subject %q) would deliver as the node: create a pull consumer", req.Config.DeliverSubject)
	}
	// What is sent is what was checked: the body as the server reads it.
	data, err := json.Marshal(&req)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), consumerAPIWait)
	defer cancel()
	r, err := c.nc.RequestWithContext(ctx, "$JS.API."+rest, data)
	if err != nil {
		return nil, fmt.Errorf("the JetStream API did not answer: %v", err)
	}
	return r.Data, nil
}

// apiError is an answer in the JetStream API's form, which the clients'
// libraries read as an error.
func apiError(err error) []byte {
	b, _ := json.Marshal(map[string]any{
		"type":  "io.nats.jetstream.api.v1.consumer_create_response",
		"error": map[string]any{"code": 400, "err_code": 10003, "description": err.Error()},
	})
	return b
}
