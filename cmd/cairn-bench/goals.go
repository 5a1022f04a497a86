package main

import (
	"bytes"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/cairn-dev/cairn/engine"
)

// The goals of the lean path are each a bound on the ratio of a Cairn
// figure to a floor or baseline measured in the same run: a server that
// does the least the workload needs, raw JetStream, or the entity's own
// encoding. The benchmarks print each goal beside its figure, and the
// NATS benchmark lists them all at the end of its run.

// goal is one row of a goals table.
type goal struct {
	name   string // the goal as stated, with its bound
	figure string // Cairn's figure
	floor  string // what it is measured against, in the same run ("": nothing)
	ratio  string // the figure over the floor ("": none)
	met    bool   // whether the bound holds
}

// verdict returns want followed by whether it was met, as the goal
// columns print it.
func verdict(want string, met bool) string {
	if met {
		return want + " — met"
	}
	return want + " — **not met**"
}

// printGoals prints goals as a table of their own.
func printGoals(goals []goal) {
	if len(goals) == 0 {
		return
	}
	fmt.Println()
	fmt.Println("| goal | Cairn | floor or baseline, same run | ratio | met |")
	fmt.Println("|---|---|---|---|---|")
	for _, g := range goals {
		met := "**not met**"
		if g.met {
			met = "met"
		}
		fmt.Printf("| %s | %s | %s | %s | %s |\n", g.name, g.figure, orDash(g.floor), orDash(g.ratio), met)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// encodedSize returns the bytes of e's properties in the msgpack form of
// engine.EncodeProperties (the form a journal record and the protocol
// carry them in) plus the bytes of its PartitionKey and RowKey: the
// entity itself, encoded, without anything a view adds to hold it.
func encodedSize(e *engine.Entity) (int, error) {
	var buf bytes.Buffer
	if err := engine.EncodeProperties(msgpack.NewEncoder(&buf), e.Properties); err != nil {
		return 0, err
	}
	return buf.Len() + len(e.PartitionKey) + len(e.RowKey), nil
}
