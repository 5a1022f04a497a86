package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
)

// logFlags adds -log-level and -log-format to fs. The function it returns
// builds, once fs is parsed, the logger that writes to w: slog's text
// lines (key=value) or one JSON object per line, for log collectors.
func logFlags(fs *flag.FlagSet) func(w io.Writer) (*slog.Logger, error) {
	level := fs.String("log-level", "info", "debug, info, warn or error")
	format := fs.String("log-format", "text", "text (key=value lines) or json (one JSON object per line)")
	return func(w io.Writer) (*slog.Logger, error) {
		var l slog.Level
		if err := l.UnmarshalText([]byte(*level)); err != nil {
			return nil, fmt.Errorf("-log-level: %v", err)
		}
		opts := &slog.HandlerOptions{Level: l}
		switch *format {
		case "text":
			return slog.New(slog.NewTextHandler(w, opts)), nil
		case "json":
			return slog.New(slog.NewJSONHandler(w, opts)), nil
		}
		return nil, fmt.Errorf("-log-format: want text or json, not %q", *format)
	}
}
