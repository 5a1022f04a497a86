package main

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"

	"github.com/cairn-dev/cairn/cmd/internal/node"
)

// busyHints say who else is likely on a well-known port, for the message
// of a listener whose port is in use.
var busyHints = map[int]string{
	10002: "another host, or Azurite, which uses 10002 too",
	4222:  "another host's embedded NATS server, or a NATS server",
}

// listener is a flag of serve that names an address the node listens on.
type listener struct{ flag, addr string }

// listeners returns the addresses cfg has the node listen on, by flag.
func listeners(cfg *node.Config) []listener {
	var ls []listener
	if cfg.HTTP != "off" {
		ls = append(ls, listener{"http", cfg.HTTP})
	}
	if cfg.NATSURL == "" {
		ls = append(ls, listener{"nats-listen", cfg.NATSListen})
	}
	return ls
}

// listenError is a listener that could not listen, told by its flag.
type listenError struct {
	l    listener
	busy bool
	err  error // the node's error, wrapping the *net.OpError
	op   *net.OpError
}

func (e *listenError) Error() string {
	if !e.busy {
		return fmt.Sprintf("-%s %s: %v", e.l.flag, e.l.addr, e.op.Err)
	}
	hint := "another host?"
	if a, ok := e.op.Addr.(*net.TCPAddr); ok && busyHints[a.Port] != "" {
		hint = busyHints[a.Port]
	}
	return fmt.Sprintf("-%s %s: address already in use (%s): choose another with -%s", e.l.flag, e.l.addr, hint, e.l.flag)
}

func (e *listenError) Unwrap() error { return e.err }

// explainListen returns err, from a node that could not start, naming
// the flag of the listener that failed when err is a failure to listen
// on one of cfg's addresses; any other err is returned as it is.
func explainListen(err error, cfg *node.Config) error {
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "listen" || op.Addr == nil {
		return err
	}
	l, ok := failedListener(op.Addr, listeners(cfg))
	if !ok {
		return err
	}
	return &listenError{l: l, busy: errors.Is(err, syscall.EADDRINUSE), err: err, op: op}
}

// failedListener finds the listener whose address is addr: the one that
// resolves to it, else the only one on its port.
func failedListener(addr net.Addr, ls []listener) (listener, bool) {
	var onPort []listener
	for _, l := range ls {
		a, err := net.ResolveTCPAddr("tcp", l.addr)
		if err != nil {
			continue
		}
		if a.String() == addr.String() {
			return l, true
		}
		if _, port, err := net.SplitHostPort(addr.String()); err == nil && port == strconv.Itoa(a.Port) {
			onPort = append(onPort, l)
		}
	}
	if len(onPort) == 1 {
		return onPort[0], true
	}
	return listener{}, false
}
