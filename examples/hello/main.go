//go:build wasip1

// Command hello is the smallest Cairn function: it answers a direct
// invocation, or takes a queue message, and replies "hello, <body>". See
// README.md.
package main

import "github.com/cairn-dev/cairn/functions/sdk"

func init() { sdk.Handle(hello) }

func main() {}

func hello(ctx *sdk.Context) error {
	return ctx.Reply(append([]byte("hello, "), ctx.Trigger().Body...))
}
