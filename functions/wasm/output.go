package wasm

import (
	"bytes"
	"log/slog"
	"strings"
)

// Limits of a guest's stdout and stderr.
const (
	maxLines    = 100  // lines logged per invocation
	maxLine     = 4096 // bytes of a line; the rest is cut
	keepStderr  = 4096 // bytes of stderr kept to explain a crash
	crashStderr = 1024 // bytes of them in a CrashError
)

// output is a guest's stdout or stderr: it sends whole lines to the log,
// at most maxLines per invocation for both streams together. It is used by
// one goroutine at a time (the instance's).
type output struct {
	log      *slog.Logger
	stream   string
	lines    *int // lines left in this invocation, shared by both streams
	line     []byte
	dropping bool          // the current line was cut; drop until its end
	tail     *bytes.Buffer // stderr only: its last bytes
	// why is the first "panic: …" or "fatal error: …" line of stderr in
	// this invocation: a Go guest prints it first, then a goroutine dump
	// that pushes it out of the tail.
	why string
}

func (w *output) Write(p []byte) (int, error) {
	if w.tail != nil {
		w.keep(p)
	}
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk, p = p[:i], p[i+1:]
		} else {
			p = nil
		}
		if !w.dropping {
			room := maxLine - len(w.line)
			if len(chunk) > room {
				w.line = append(w.line, chunk[:room]...)
				w.line = append(w.line, "…"...)
				w.flush()
				w.dropping = true
			} else {
				w.line = append(w.line, chunk...)
			}
		}
		if i >= 0 {
			if !w.dropping {
				w.flush()
			}
			w.dropping = false
		}
	}
	return n, nil
}

// keep appends p to the stderr tail, keeping its last keepStderr bytes.
func (w *output) keep(p []byte) {
	if len(p) >= keepStderr {
		w.tail.Reset()
		w.tail.Write(p[len(p)-keepStderr:])
		return
	}
	if over := w.tail.Len() + len(p) - keepStderr; over > 0 {
		w.tail.Next(over)
	}
	w.tail.Write(p)
}

// flush logs the pending line, if any.
func (w *output) flush() {
	if len(w.line) == 0 {
		return
	}
	line := string(w.line)
	if w.tail != nil && w.why == "" && (strings.HasPrefix(line, "panic: ") || strings.HasPrefix(line, "fatal error: ")) {
		w.why = line
		if len(w.why) > 200 {
			w.why = w.why[:200] + "…"
		}
	}
	w.line = w.line[:0]
	switch {
	case *w.lines > 0:
		w.log.Info("function output", "stream", w.stream, "line", line)
	case *w.lines == 0:
		w.log.Info("function output: further lines of this invocation are dropped", "stream", w.stream)
	default:
		return
	}
	*w.lines--
}

// reset starts an invocation: the pending text is logged, the quota
// renewed and the stderr tail emptied.
func (w *output) reset(lines *int) {
	w.flush()
	w.dropping = false
	*lines = maxLines
	if w.tail != nil {
		w.tail.Reset()
	}
	w.why = ""
}

// stderrTail is the end of stderr for a CrashError, and the line that says
// why the guest died ("panic: …", "fatal error: …"), if any.
func stderrTail(b *bytes.Buffer) (tail, why string) {
	s := strings.ToValidUTF8(b.String(), "\uFFFD")
	for _, prefix := range []string{"panic: ", "fatal error: "} {
		i := strings.LastIndex(s, "\n"+prefix)
		if i >= 0 {
			i++
		} else if strings.HasPrefix(s, prefix) {
			i = 0
		}
		if i >= 0 {
			why, _, _ = strings.Cut(s[i:], "\n")
			if len(why) > 200 {
				why = why[:200] + "…"
			}
			break
		}
	}
	if len(s) > crashStderr {
		s = "…" + strings.ToValidUTF8(s[len(s)-crashStderr:], "")
	}
	return strings.TrimRight(s, "\n"), why
}
