package node

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/cmd/internal/natsauth"
)

// consumerAPI creates consumers for the service users who may consume
// from streams of the node account (natsauth.ConsumerCreateSubjects):
// their creations are imported as the node's subjects, which name the
// user, taken on the serving connection, and sent on to the JetStream API
// by the node user, once the configuration is one the user could be let
// create itself: a pull consumer. A push consumer's deliver subject is a
// subject of the node account, where it would publish the stream's
// messages as the node (to a queue, a bucket, a command subject); a
// creation that names one is refused, and the API never sees it. Each
// consumer is marked with its creator's name (ownerMetadata): a user may
// not change another's consumer of a stream they share, and holds at
// most maxUserConsumers of a stream. The answer goes back on the serving
// connection, which may publish replies only.
type consumerAPI struct {
	prefix string
	nc     *nats.Conn // the node user's: the JetStream API
	js     jetstream.JetStream
	serve  *nats.Conn
	log    *slog.Logger
}

// consumerAPIWait bounds the node's wait for the API's answer.
const consumerAPIWait = 5 * time.Second

// subscribe takes the creations until serve closes.
func (c *consumerAPI) subscribe() error {
	js, err := jetstream.New(c.nc)
	if err != nil {
		return err
	}
	c.js = js
	_, err = c.serve.Subscribe(natsauth.ConsumerAPIPrefix(c.prefix)+">", c.create)
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

// ownerMetadata is the metadata key of a consumer a user created: the
// user's name.
const ownerMetadata = "cairn_user"

// maxUserConsumers bounds the consumers one user holds on one stream: an
// ordered consumer takes one (and one more for a while each time it
// starts over), a durable one each, so a few dozen leave room for any
// reader, and a user cannot fill the server with consumers.
const maxUserConsumers = 32

// forward checks a creation and sends it to the API: the API's answer, or
// why it was refused.
func (c *consumerAPI) forward(m *nats.Msg) ([]byte, error) {
	user, rest, _ := strings.Cut(strings.TrimPrefix(m.Subject, natsauth.ConsumerAPIPrefix(c.prefix)), ".")
	stream, name, ok := createdConsumer(rest)
	if !ok || user == "" {
		return nil, fmt.Errorf("%s is not a consumer creation", m.Subject)
	}
	var req server.CreateConsumerRequest
	if err := json.Unmarshal(m.Data, &req); err != nil {
		return nil, fmt.Errorf("a consumer creation's body: %v", err)
	}
	if req.Config.DeliverSubject != "" || req.Config.DeliverGroup != "" {
		return nil, fmt.Errorf("a push consumer (deliver_subject %q) would deliver as the node: create a pull consumer", req.Config.DeliverSubject)
	}
	if name == "" {
		name = cmp.Or(req.Config.Name, req.Config.Durable)
	}
	ctx, cancel := context.WithTimeout(context.Background(), consumerAPIWait)
	defer cancel()
	exists, err := c.mayCreate(ctx, user, stream, name)
	if err != nil {
		return nil, err
	}
	if !exists && name != "" {
		// Created, never updated: another user's creation of the same
		// name between the check and now is refused by the server, not
		// taken over.
		req.Action = server.ActionCreate
	}
	if req.Config.Metadata == nil {
		req.Config.Metadata = map[string]string{}
	}
	req.Config.Metadata[ownerMetadata] = user
	// What is sent is what was checked: the body as the server reads it.
	data, err := json.Marshal(&req)
	if err != nil {
		return nil, err
	}
	r, err := c.nc.RequestWithContext(ctx, "$JS.API."+rest, data)
	if err != nil {
		return nil, fmt.Errorf("the JetStream API did not answer: %v", err)
	}
	return r.Data, nil
}

// createdConsumer reads the stream and the consumer's name (if the
// subject gives it) of a creation's API subject after "$JS.API.".
func createdConsumer(rest string) (stream, name string, ok bool) {
	if r, found := strings.CutPrefix(rest, "CONSUMER.DURABLE.CREATE."); found {
		stream, name, ok = strings.Cut(r, ".")
		return stream, name, ok && stream != "" && name != ""
	}
	if r, found := strings.CutPrefix(rest, "CONSUMER.CREATE."); found {
		tokens := strings.SplitN(r, ".", 3)
		if len(tokens) > 1 {
			name = tokens[1]
		}
		return tokens[0], name, tokens[0] != ""
	}
	return "", "", false
}

// mayCreate checks that user may create or update consumer name (""
// when the server names it) of stream, and reports whether it exists: a
// consumer of that name is the user's own or has no owner, or there is
// none and the user holds fewer than maxUserConsumers of the stream. Two
// creations at once may both pass the count, so a user may briefly hold
// a few more.
func (c *consumerAPI) mayCreate(ctx context.Context, user, stream, name string) (exists bool, err error) {
	if name != "" {
		cons, err := c.js.Consumer(ctx, stream, name)
		switch {
		case err == nil:
			// A consumer without an owner was made before owners were
			// kept (or by the operator): its first creator since takes it.
			if owner := cons.CachedInfo().Config.Metadata[ownerMetadata]; owner != "" && owner != user {
				return true, fmt.Errorf("consumer %q of stream %s is another user's: choose another name", name, stream)
			}
			return true, nil
		case !errors.Is(err, jetstream.ErrConsumerNotFound):
			return false, fmt.Errorf("look up consumer %q of stream %s: %v", name, stream, err)
		}
	}
	s, err := c.js.Stream(ctx, stream)
	if err != nil {
		return false, fmt.Errorf("look up stream %s: %v", stream, err)
	}
	held := 0
	infos := s.ListConsumers(ctx)
	for info := range infos.Info() {
		if info.Config.Metadata[ownerMetadata] == user {
			held++
		}
	}
	if err := infos.Err(); err != nil {
		return false, fmt.Errorf("list the consumers of stream %s: %v", stream, err)
	}
	if held >= maxUserConsumers {
		return false, fmt.Errorf("user %s holds %d consumers of stream %s, the most a user may: reuse one (a durable consumer by its name) or let an unused one expire", user, held, stream)
	}
	return false, nil
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
