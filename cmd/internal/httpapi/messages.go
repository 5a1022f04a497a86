package httpapi

import (
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/wire"
)

// MessagesHeader carries a write's outbox messages, Cairn's extension to
// the Azure protocol (which has none): a JSON array in the shape of the
// NATS protocol's "messages" field (docs/HTTP.md). The messages are
// committed in the journal record of the write, or of the whole $batch.
const MessagesHeader = "X-Cairn-Messages"

// MaxMessagesHeader bounds the header's value (64 KiB): larger messages
// go over NATS, whose requests carry up to 1 MiB per message.
const MaxMessagesHeader = 64 << 10

// messages reads the request's outbox messages (nil without the header)
// and checks them against the node's allowlist of subjects. A malformed
// header is InvalidInput, one too large RequestHeaderFieldsTooLarge (431),
// one sent with a shared access signature AuthorizationPermissionMismatch
// (a SAS grants table rights, not messages), and messages that
// engine.ValidateMessages refuses (more than engine.MaxCommandMessages, a
// bad destination) are InvalidInput before any operation of a $batch is
// looked at.
func (c *call) messages() ([]engine.Message, error) {
	values, ok := c.r.Header[MessagesHeader]
	if !ok {
		return nil, nil
	}
	if len(values) != 1 {
		return nil, engine.Errorf(engine.CodeInvalidInput, "%s is given %d times: send one header with a JSON array of the messages", MessagesHeader, len(values))
	}
	if len(values[0]) > MaxMessagesHeader {
		return nil, engine.Errorf(codeHeaderTooLarge, "%s is %d bytes; the limit is %d (64 KiB): send larger messages over NATS", MessagesHeader, len(values[0]), MaxMessagesHeader)
	}
	if c.sas != nil {
		return nil, engine.Errorf(codePermissionMismatch, "a shared access signature grants table rights, not outbox messages: sign a request with %s with the account key", MessagesHeader)
	}
	msgs, err := wire.DecodeMessagesJSON([]byte(values[0]))
	if err != nil {
		return nil, engine.Errorf(engine.CodeInvalidInput, "%s: %s", MessagesHeader, engine.AsError(err).Message)
	}
	if err := engine.ValidateMessages(msgs); err != nil {
		e := engine.AsError(err)
		return nil, engine.Errorf(e.Code, "%s: %s", MessagesHeader, e.Message)
	}
	if err := c.s.cfg.Outbox.Check(c.account, msgs); err != nil {
		return nil, engine.Errorf(engine.CodeInvalidInput, "%s: %s", MessagesHeader, engine.AsError(err).Message)
	}
	return msgs, nil
}

// noMessages refuses the header on a request that is not an entity write
// or a $batch: a message it carried would be dropped silently.
func (c *call) noMessages() error {
	if _, ok := c.r.Header[MessagesHeader]; ok {
		return engine.Errorf(engine.CodeInvalidInput, "%s is for entity writes (insert, update, merge, delete, upserts) and $batch, not %s %s", MessagesHeader, c.r.Method, c.r.URL.Path)
	}
	return nil
}
