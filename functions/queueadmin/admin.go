package queueadmin

import (
	"log/slog"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/functions"
)

// Admin is the operators' side of the queue stream: what its queues
// hold, and what an operator does to them. It starts nothing and holds no
// goroutine; its methods may be called from many goroutines at once.
type Admin struct {
	q      *functions.Queues
	stream jetstream.Stream
	prefix string
	log    *slog.Logger
	cache  depthCache // the queues' depths for /metrics
}

// New returns the administration of q, a queue stream the runtime opened
// (functions.OpenQueues; the command-line tools open one with Replicas
// 0). log receives the failed reads of WriteMetrics (slog.Default() when
// nil).
func New(q *functions.Queues, log *slog.Logger) *Admin {
	if log == nil {
		log = slog.Default()
	}
	return &Admin{q: q, stream: q.Stream(), prefix: q.Prefix(), log: log}
}
