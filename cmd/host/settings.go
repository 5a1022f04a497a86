package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/cmd/internal/natsauth"
	"github.com/cairn-dev/cairn/functions"
)

// settingsCmd runs `host functions settings …` and `host functions
// secrets …` (a[0]): list a function's, set one, remove one. They write
// the settings bucket directly, as the node user, sealing a secret with
// the key derived from that user's password (what every node derives). A
// secret's value is read from stdin or -file, never from the command
// line (shell history keeps it), and never printed.
func settingsCmd(ctx context.Context, conn *connFlags, nc *nats.Conn, a []string, file string, stdin io.Reader, out io.Writer) error {
	secret := a[0] == "secrets"
	kind := "setting"
	if secret {
		kind = "secret"
	}
	if len(a) < 2 {
		return fmt.Errorf("functions %s: give a function's name", a[0])
	}
	fn := a[1]
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	s, err := functions.OpenSettings(ctx, js, conn.prefix, 0, functions.SecretsKey(conn.password()))
	if err != nil {
		return err
	}
	verb := "list"
	if len(a) > 2 {
		verb = a[2]
	}
	switch {
	case verb == "list" && len(a) <= 3:
		all, err := s.List(ctx, fn)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tKIND\tVALUE\tSET")
		for _, st := range all {
			if secret && !st.Secret {
				continue
			}
			k, v := "setting", ""
			if st.Secret {
				k, v = "secret", "(hidden)"
			} else if st.Value != nil {
				v = *st.Value
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", st.Name, k, v, st.Set.Format(time.RFC3339))
		}
		return tw.Flush()
	case verb == "set" && len(a) >= 4:
		name := a[3]
		var value string
		switch {
		case secret && len(a) > 4:
			return errors.New("functions secrets set: a secret's value is never given on the command line (shell history keeps it): give it on stdin or with -file")
		case !secret && len(a) > 5:
			return errors.New("functions settings set: give one value (quote it), or none to read it from stdin or -file")
		case !secret && len(a) == 5:
			value = a[4]
		default:
			if value, err = readValue(file, stdin, kind, name); err != nil {
				return err
			}
		}
		st, _, err := s.Set(ctx, fn, name, value, secret)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "set %s %s of %s at %s: every host's next invocations read it once its watch of the settings has it\n", kind, st.Name, fn, st.Set.Format(time.RFC3339))
		return nil
	case verb == "remove" && len(a) == 4:
		if _, err := s.Remove(ctx, fn, a[3], secret); err != nil {
			return err
		}
		fmt.Fprintf(out, "removed %s %s of %s\n", kind, a[3], fn)
		return nil
	}
	return fmt.Errorf("functions %s: usage: %s <function> [list | set <NAME> | remove <NAME>]", a[0], a[0])
}

// resealCmd runs `host functions reseal-secrets`: the node user's
// previous password (read as a secret's value is) gives the key the
// secrets were sealed with; each is sealed again with the current one.
// A secret neither opens is named, left as it is, and fails the command.
func resealCmd(ctx context.Context, conn *connFlags, nc *nats.Conn, file string, stdin io.Reader, out io.Writer) error {
	current := functions.SecretsKey(conn.password())
	if current == nil {
		return functions.ErrNoSecretsKey
	}
	prev, err := readValue(file, stdin, "the node user's", "previous password")
	if err != nil {
		return err
	}
	if prev == "" {
		return errors.New("functions reseal-secrets: give the node user's previous password on stdin or with -file")
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	s, err := functions.OpenSettings(ctx, js, conn.prefix, 0, current)
	if err != nil {
		return err
	}
	done, err := s.Reseal(ctx, functions.SecretsKey([]byte(prev)))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "resealed %d secrets of %d functions; %d were already sealed with the current password\n", done.Resealed, done.Functions, done.Current)
	if len(done.Unopened) > 0 {
		return fmt.Errorf("functions reseal-secrets: %d secrets open with neither password, left as they are (set them again): %s", len(done.Unopened), strings.Join(done.Unopened, ", "))
	}
	return nil
}

// readValue reads a value from file, else stdin, without one final line
// ending; it names neither the value nor, for a secret, its bytes.
func readValue(file string, stdin io.Reader, kind, name string) (string, error) {
	src, from := stdin, "stdin"
	if file != "" {
		f, err := os.Open(file)
		if err != nil {
			return "", err
		}
		defer f.Close()
		src, from = f, file
	} else if f, ok := stdin.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			fmt.Fprintf(os.Stderr, "the value of %s %s, then Ctrl-D:\n", kind, name)
		}
	}
	b, err := io.ReadAll(io.LimitReader(src, functions.MaxSettingValue+3))
	if err != nil {
		return "", fmt.Errorf("read the value from %s: %w", from, err)
	}
	b = bytes.TrimSuffix(b, []byte("\n"))
	b = bytes.TrimSuffix(b, []byte("\r"))
	return string(b), nil
}

// password is the node user's password the commands connect with: the
// credentials file's, or -nats-url's (nil when neither has one).
func (c *connFlags) password() []byte {
	f := c.creds
	if f == "" {
		f = natsauth.Path(c.data)
	}
	if cr, err := natsauth.Read(f); err == nil {
		return []byte(cr.Password)
	}
	if u, err := url.Parse(c.url); err == nil && u.User != nil && strings.Contains(c.url, "@") {
		if p, ok := u.User.Password(); ok {
			return []byte(p)
		}
	}
	return nil
}
