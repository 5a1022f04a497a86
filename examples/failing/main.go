//go:build wasip1

// Command failing is a Cairn function that fails on every message, to show
// dequeue counts, back-off and the poison queue. See README.md.
package main

import (
	"fmt"

	"github.com/cairn-dev/cairn/functions/sdk"
)

func init() { sdk.Handle(fail) }

func main() {}

func fail(ctx *sdk.Context) error {
	t := ctx.Trigger()
	ctx.Logf("attempt %d at %q", t.DequeueCount, t.Body)
	return fmt.Errorf("this function always fails (message %q, attempt %d)", t.Body, t.DequeueCount)
}
