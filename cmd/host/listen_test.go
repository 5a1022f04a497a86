package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/cairn-dev/cairn/cmd/internal/node"
)

// TestBusyPortNamesItsFlag: host serve on a port another listener holds
// fails at once with the flag and the address, for each listener flag
// (-http, -nats-listen), and the error is still the address in use.
func TestBusyPortNamesItsFlag(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	addr := busy.Addr().String()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-http", addr}, fmt.Sprintf("-http %s: address already in use (another host?): choose another with -http", addr)},
		{[]string{"-http", "127.0.0.1:0", "-nats-listen", addr}, fmt.Sprintf("-nats-listen %s: address already in use (another host?): choose another with -nats-listen", addr)},
	} {
		err := run(append([]string{"serve", "-data", t.TempDir()}, c.args...))
		if err == nil || err.Error() != c.want || !errors.Is(err, syscall.EADDRINUSE) {
			t.Errorf("%q: %v, want %q", c.args, err, c.want)
		}
	}
}

// TestExplainListen: the error of a listen on a well-known port names
// who else may be there; an address no flag gives, or another error, is
// left as it is; a listen failing otherwise still names its flag.
func TestExplainListen(t *testing.T) {
	listenErr := func(addr string, errno syscall.Errno) error {
		a, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		// The shape net.Listen returns, wrapped as the node wraps it.
		return fmt.Errorf("node: http: %w", &net.OpError{Op: "listen", Net: "tcp", Addr: a, Err: os.NewSyscallError("bind", errno)})
	}
	cfg := &node.Config{HTTP: "127.0.0.1:10002", NATSListen: "127.0.0.1:4222"}
	for _, c := range []struct {
		cfg  *node.Config
		err  error
		want string
	}{
		{cfg, listenErr("127.0.0.1:10002", syscall.EADDRINUSE), "-http 127.0.0.1:10002: address already in use (another host, or Azurite, which uses 10002 too): choose another with -http"},
		{cfg, listenErr("127.0.0.1:4222", syscall.EADDRINUSE), "-nats-listen 127.0.0.1:4222: address already in use (another host's embedded NATS server, or a NATS server): choose another with -nats-listen"},
		{&node.Config{HTTP: ":10002", NATSListen: "127.0.0.1:4222"}, listenErr(":10002", syscall.EADDRINUSE), "-http :10002: address already in use (another host, or Azurite, which uses 10002 too): choose another with -http"},
		{cfg, listenErr("127.0.0.1:80", syscall.EACCES), "node: http: listen tcp 127.0.0.1:80: bind: permission denied"},
		{&node.Config{HTTP: "127.0.0.1:80", NATSListen: "127.0.0.1:4222"}, listenErr("127.0.0.1:80", syscall.EACCES), "-http 127.0.0.1:80: bind: permission denied"},
		// -nats-url: the node listens for no NATS client.
		{&node.Config{HTTP: "off", NATSURL: "nats://h:4222", NATSListen: "127.0.0.1:4222"}, listenErr("127.0.0.1:4222", syscall.EADDRINUSE), "node: http: listen tcp 127.0.0.1:4222: bind: address already in use"},
		{cfg, errors.New("node: something else"), "node: something else"},
	} {
		if got := explainListen(c.err, c.cfg); got.Error() != c.want {
			t.Errorf("%v: %q, want %q", c.err, got, c.want)
		}
	}
	if explainListen(nil, cfg) != nil {
		t.Error("no error made one")
	}
}
