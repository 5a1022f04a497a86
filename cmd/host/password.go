package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"golang.org/x/crypto/bcrypt"

	"github.com/cairn-dev/cairn/cmd/internal/cli"
)

// natsPassword reads a password (the first line of in) and writes its
// bcrypt hash to out, for the password of a service user in the
// -nats-users file: the server compares against the hash, so the file
// need not hold the password. Each connection of that user costs one
// bcrypt comparison (some 50 ms at cost 10).
func natsPassword(args []string, in io.Reader, out io.Writer) error {
	fs := flag.NewFlagSet("nats-password", flag.ContinueOnError)
	cost := fs.Int("cost", bcrypt.DefaultCost, fmt.Sprintf("bcrypt cost, %d to %d: each step doubles the time a connection takes to check", bcrypt.MinCost, bcrypt.MaxCost))
	cli.Usage(fs, "usage: host nats-password [-cost N] < password\n\nReads a password from the first line of stdin and prints its bcrypt hash, for \"password\" in the -nats-users file.\n\n")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return errors.New("nats-password: the password comes on stdin, not as an argument (it would stay in the shell's history)")
	}
	if *cost < bcrypt.MinCost || *cost > bcrypt.MaxCost {
		return fmt.Errorf("nats-password: -cost must be between %d and %d", bcrypt.MinCost, bcrypt.MaxCost)
	}
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("nats-password: %w", err)
	}
	pw := strings.TrimRight(line, "\r\n")
	if pw == "" {
		return errors.New("nats-password: no password on stdin")
	}
	if len(pw) > 72 {
		return errors.New("nats-password: bcrypt uses at most 72 bytes of a password; give a shorter one")
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(pw), *cost)
	if err != nil {
		return fmt.Errorf("nats-password: %w", err)
	}
	_, err = fmt.Fprintf(out, "%s\n", hash)
	return err
}
