//go:build wasip1

// Command guest is the test functions' WebAssembly guest; the trigger's
// body chooses what it does.
package main

import (
	"errors"
	"strings"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/functions/sdk"
)

// version is set with -ldflags "-X main.version=…" to tell builds apart.
var version = "1"

func init() { sdk.Handle(run) }

func main() {}

var hoard [][]byte

func run(ctx *sdk.Context) error {
	t := ctx.Trigger()
	if name, ok := strings.CutPrefix(string(t.Body), "setting:"); ok {
		// Reply "=" and the value of a setting or secret, or "unset".
		v, set := ctx.Setting(name)
		if !set {
			return ctx.Reply([]byte("unset"))
		}
		return ctx.Reply([]byte("=" + v))
	}
	switch body := string(t.Body); body {
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
	case "panic":
		panic("on purpose")
	case "fail":
		return errors.New("failing on purpose")
	case "version":
		return ctx.Reply([]byte(version))
	default:
		// Record the message once: an Insert, so a second application
		// would fail.
		return ctx.Insert("Processed", engine.NewEntity("m", body,
			engine.Property{Name: "Version", Value: engine.String(version)},
			engine.Property{Name: "DequeueCount", Value: engine.Int32(int32(t.DequeueCount))}))
	}
}
