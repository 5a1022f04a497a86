package client

import (
	"runtime"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// TestOneWatchPerConnection: Clients made on one connection share the
// goroutine that follows its status, and it ends with the connection.
func TestOneWatchPerConnection(t *testing.T) {
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	defer func() { s.Shutdown(); s.WaitForShutdown() }()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	first := New(nc).connection()
	for range 200 {
		if New(nc).connection() != first {
			t.Fatal("a Client on the same connection follows it with a watch of its own")
		}
	}
	if grew := runtime.NumGoroutine() - before; grew > 20 {
		t.Fatalf("%d goroutines more after 201 Clients on one connection", grew)
	}
	nc.Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, ok := watches.Load(nc); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the connection's watch outlived it")
		}
		time.Sleep(time.Millisecond)
	}
	if first.Err() != nil {
		t.Error("closing the connection counted as losing it")
	}
}
