// Command echo is the test guest of functions/wasm: it echoes its trigger's
// body, and on some bodies exercises one part of the ABI.
package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/functions/sdk"
)

func init() { sdk.Handle(run) }

// mainRan tells whether main.main ran (it does not in a c-shared module).
var mainRan bool

func main() { mainRan = true }

// inside counts the invocations running in this instance: more than one
// means two goroutines entered it at once.
var inside int

// hoard keeps what "bomb" allocates.
var hoard [][]byte

func run(c *sdk.Context) error {
	inside++
	defer func() { inside-- }()
	body := string(c.Trigger().Body)
	switch body {
	case "get":
		e, etag, err := c.Get("T", "p", "r")
		if err != nil {
			return err
		}
		if e == nil {
			return c.Reply([]byte("absent"))
		}
		v, _ := e.Get("V")
		return c.Reply([]byte(v.Str() + " " + etag))
	case "big":
		e, _, err := c.Get("T", "p", "big")
		if err != nil || e == nil {
			return errors.New("no big entity")
		}
		v, _ := e.Get("V")
		return c.Reply([]byte(v.Str()))
	case "write":
		if err := c.InsertOrReplace("T", engine.NewEntity("p", "r", engine.Property{Name: "V", Value: engine.String("x")})); err != nil {
			return err
		}
		return c.Enqueue("q", []byte("m"))
	case "ops":
		return ops(c)
	case "http":
		req := c.HTTP()
		if req == nil {
			return errors.New("no HTTP request in the trigger")
		}
		if err := c.Respond(201, map[string][]string{"X-Order": {req.Params["id"]}}); err != nil {
			return err
		}
		return c.Reply([]byte(req.Method + " " + req.Route + " " + req.Query))
	case "fail":
		return errors.New("no good")
	case "panic":
		panic("boom")
	case "loop":
		for {
		}
	case "bomb":
		for {
			b := make([]byte, 1<<20)
			for i := range b {
				b[i] = byte(i)
			}
			hoard = append(hoard, b)
		}
	case "grow":
		// 32 MiB, touched and dropped: the memory stays grown.
		b := make([]byte, 32<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		return c.Reply([]byte(fmt.Sprint(len(b))))
	case "main":
		if mainRan {
			return c.Reply([]byte("main ran"))
		}
		return c.Reply([]byte("main did not run"))
	case "rand":
		var b [8]byte
		_, _ = rand.Read(b[:])
		return c.Reply([]byte(hex.EncodeToString(b[:])))
	case "print":
		fmt.Println("to stdout", 1)
		fmt.Fprintln(os.Stderr, "to stderr", 2)
		return nil
	case "conc":
		// A second call to the host gives another goroutine time to enter.
		c.Logf("inside %d", inside)
		if inside != 1 {
			return errors.New("two invocations in one instance")
		}
		return c.Reply([]byte("alone"))
	}
	c.Logf("echo %d bytes", len(body))
	return c.Reply([]byte(body))
}

// ops runs every write operation and a query, and replies with what it saw.
func ops(c *sdk.Context) error {
	var out []string
	e := engine.NewEntity("p", "a", engine.Property{Name: "V", Value: engine.String("1")})
	if err := c.Insert("T", e); err != nil {
		return err
	}
	err := c.Insert("T", e)
	if !errors.Is(err, &engine.Error{Code: engine.CodeEntityAlreadyExists}) {
		return errors.New("second insert: want EntityAlreadyExists, got " + errString(err))
	}
	out = append(out, "conflict:"+string(engine.ErrorCode(err)))
	steps := []error{
		c.Replace("T", engine.NewEntity("p", "a", engine.Property{Name: "V", Value: engine.String("2")}), "*"),
		c.Merge("T", engine.NewEntity("p", "a", engine.Property{Name: "W", Value: engine.Int32(3)}), "*"),
		c.InsertOrMerge("T", engine.NewEntity("p", "b", engine.Property{Name: "V", Value: engine.String("b")})),
		c.InsertOrReplace("T", engine.NewEntity("p", "c")),
		c.Delete("T", "p", "c", "*"),
	}
	for _, err := range steps {
		if err != nil {
			return err
		}
	}
	es, err := c.Query("T", "p", "V ne ''", 10)
	if err != nil {
		return err
	}
	for _, e := range es {
		v, _ := e.Get("V")
		out = append(out, e.RowKey+"="+v.Str())
	}
	return c.Reply([]byte(strings.Join(out, " ")))
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}
