package demo

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"
)

// Timeout bounds every command of an example: each is a few requests to
// one host, so a minute means the host is not answering.
const Timeout = time.Minute

// Main runs a program: run gets the command line without the program's
// name, and an error it returns is printed on stderr as "<name>: <error>"
// before the program exits with status 1.
func Main(name string, run func(args []string) error) {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// Context is the context of one command: cancelled after Timeout.
func Context() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), Timeout)
}

// NewFlags returns the flag set of program name, which returns its errors
// rather than exiting. Its usage is "usage: <name> [flags] <synopsis>",
// a blank line and the flags.
func NewFlags(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s [flags] %s\n\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// Any is the argument count of a command that checks its arguments itself.
const Any = -1

// Parse parses a command line of flags, a command and its arguments. The
// flags may come before the command, after it or between its arguments
// ("kind Sales Employee -by key"); after "--" every word is an argument.
// arity names the commands and the number of arguments each takes (or
// Any). Parse returns the command and its arguments; a command that is
// missing, unknown or given another number of arguments prints the usage
// and is an error, as is a flag the set does not define.
func Parse(fs *flag.FlagSet, args []string, arity map[string]int) (cmd string, rest []string, err error) {
	var words []string
	for more := args; ; {
		if err := fs.Parse(more); err != nil {
			return "", nil, err
		}
		left := fs.Args()
		if len(left) == 0 {
			break
		}
		if n := len(more) - len(left); n > 0 && more[n-1] == "--" {
			words = append(words, left...)
			break
		}
		words, more = append(words, left[0]), left[1:]
	}
	if len(words) == 0 {
		fs.Usage()
		return "", nil, errors.New("name a command")
	}
	cmd, rest = words[0], words[1:]
	want, ok := arity[cmd]
	switch {
	case !ok:
		fs.Usage()
		return "", nil, fmt.Errorf("unknown command %q", cmd)
	case want != Any && len(rest) != want:
		fs.Usage()
		return "", nil, fmt.Errorf("%s takes %s, not %d", cmd, plural(want, "argument"), len(rest))
	}
	return cmd, rest, nil
}

// plural is "1 argument", "2 arguments".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
