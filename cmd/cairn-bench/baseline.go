package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// -baseline REF runs a benchmark on two binaries side by side: the one
// built from REF, a commit of the repository holding the current
// directory, and the one built from the current tree as it is, uncommitted
// changes included. The steps:
//
//  1. Resolve REF to a commit; note the current commit and whether the
//     tree has uncommitted changes ("dirty").
//  2. Check REF out into a temporary detached worktree, and build both
//     binaries there and in the current tree, the same way (go build
//     -trimpath: the same flags on both sides, and a build cache shared
//     between the two trees).
//  3. For each of -rounds rounds (default 3), run the benchmark once on
//     each binary with -rounds 1 and the other arguments unchanged, base
//     first in odd rounds and head first in even ones, so that neither
//     always runs on a machine the other has just warmed or loaded. Each
//     binary runs in its own tree, in the directory matching the current
//     one: benchmarks that build the repository's examples build their
//     own commit's. Their standard error passes through, prefixed "base:"
//     or "head:"; each round's figures follow on standard error.
//  4. Read the markdown table rows of every output (baselinerows.go), and
//     print one table of each row's median on both sides and their ratio
//     (baselinecompare.go).
//
// The worktree and the binaries are removed at the end, after a failure
// or an interrupt too (a SIGKILL leaves the worktree to `git worktree
// prune`). A failing run stops the comparison; what was measured until
// then is printed. The cost: two builds (the first against a new commit
// compiles most packages again) and twice the benchmark's own time.

// baselineEnv is -baseline's environment variable; the children run
// without it, or each would compare again.
const baselineEnv = "CAIRN_BASELINE"

// childStopWait is how long a benchmark told to stop (SIGINT, after an
// interrupt of the comparison) has to end before it is killed: the http
// benchmark stops its Azurite and host processes on SIGINT, which takes
// a moment; the others exit at once.
const childStopWait = 30 * time.Second

// defaultBaselineRounds is the rounds each side runs when -rounds is not
// given: the fewest that can call a row better or worse.
const defaultBaselineRounds = minVerdictRounds

// baselineRun is a comparison's command line, -baseline and -rounds taken
// out of it.
type baselineRun struct {
	ref    string
	rounds int
	sub    string   // the benchmark ("nats" when none is named)
	args   []string // the rest, as given: what both binaries run
	named  bool     // the benchmark was named in args (args[0])
	help   bool     // -h, -help or --help among the flags
}

// cutBaseline takes -baseline REF (or -baseline=REF) and -rounds N out of
// args, before the benchmark's name or after it; without -baseline on the
// command line, the environment's CAIRN_BASELINE is read (lookup), and
// without either ok is false and args are left to the benchmark. An
// argument after "--" is never read.
func cutBaseline(args []string, lookup func(string) (string, bool)) (b baselineRun, ok bool, err error) {
	var ref, rounds string
	var hasRef, hasRounds bool
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			b.args = append(b.args, args[i:]...)
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "baseline" && name != "rounds" {
			if a == "-h" || a == "-help" || a == "--help" {
				b.help = true
			}
			b.args = append(b.args, a)
			continue
		}
		if !hasValue {
			if i+1 == len(args) {
				return baselineRun{}, false, fmt.Errorf("-%s needs a value", name)
			}
			i++
			value = args[i]
		}
		if name == "baseline" {
			ref, hasRef = value, true
		} else {
			rounds, hasRounds = value, true
		}
	}
	if !hasRef {
		if ref, hasRef = lookup(baselineEnv); !hasRef {
			return baselineRun{}, false, nil
		}
	}
	if ref == "" {
		return baselineRun{}, false, errors.New("-baseline needs a git ref (a commit, branch or tag)")
	}
	if !hasRounds {
		rounds, hasRounds = lookup("CAIRN_ROUNDS")
	}
	b.ref, b.rounds = ref, defaultBaselineRounds
	if hasRounds {
		n, err := strconv.Atoi(rounds)
		if err != nil || n < 1 {
			return baselineRun{}, false, fmt.Errorf("-rounds %q: a positive number of rounds each side runs", rounds)
		}
		b.rounds = n
	}
	b.sub = "nats"
	if len(b.args) > 0 && !strings.HasPrefix(b.args[0], "-") {
		b.sub, b.named = b.args[0], true
	}
	return b, true, nil
}

// withRounds is args with "-rounds 1" after the benchmark's name, where
// every version of the flag parsing reads it.
func (b baselineRun) withRounds() []string { return b.afterName("-rounds", "1") }

// withHelp is args with -h after the benchmark's name: its help, whatever
// the other arguments.
func (b baselineRun) withHelp() []string { return b.afterName("-h") }

func (b baselineRun) afterName(extra ...string) []string {
	at := 0
	if b.named {
		at = 1
	}
	out := append([]string(nil), b.args[:at]...)
	out = append(out, extra...)
	return append(out, b.args[at:]...)
}

// A side is one of the two binaries being compared.
type side struct {
	name   string // "base" or "head"
	bin    string
	dir    string // where it runs: its own tree
	rounds bool   // its benchmark has -rounds
}

// commits are the two commits compared, as the comparison names them.
type commits struct {
	top       string // the current tree's root
	base      string // the base's full hash
	baseLabel string // "(REF sha)"
	headLabel string // "(sha)", or "(sha dirty)" with uncommitted changes
}

// resolve finds the repository holding cwd and the commit ref names in it.
func resolve(ctx context.Context, cwd, ref string) (commits, error) {
	top, err := git(ctx, cwd, "rev-parse", "--show-toplevel")
	if err != nil {
		return commits{}, fmt.Errorf("-baseline builds the ref from the repository holding the current directory, and %s is in none: %w", cwd, err)
	}
	base, err := git(ctx, top, "rev-parse", "--verify", "--quiet", ref+"^{commit}")
	if err != nil {
		return commits{}, fmt.Errorf("-baseline %s: no such commit in %s", ref, top)
	}
	head, err := git(ctx, top, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return commits{}, fmt.Errorf("-baseline: the current tree has no commit: %w", err)
	}
	status, err := git(ctx, top, "status", "--porcelain")
	if err != nil {
		return commits{}, err
	}
	c := commits{top: top, base: base}
	baseShort, headShort := short(ctx, top, base), short(ctx, top, head)
	c.baseLabel = "(" + ref + " " + baseShort + ")"
	if strings.HasPrefix(base, ref) {
		c.baseLabel = "(" + baseShort + ")"
	}
	c.headLabel = "(" + headShort + ")"
	what := "the current tree"
	if status != "" {
		c.headLabel = "(" + headShort + " dirty)"
		what += ", with its uncommitted changes"
	}
	fmt.Fprintf(os.Stderr, "cairn-bench -baseline: base %s, head %s: %s\n", c.baseLabel, c.headLabel, what)
	return c, nil
}

// compareBaseline runs the comparison (the steps at the top of this file).
func compareBaseline(b baselineRun) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cwd, err := os.Getwd()
	if err != nil {
		return err
	}
	cs, err := resolve(ctx, cwd, b.ref)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "cairn-bench-baseline-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	baseTree := filepath.Join(tmp, "tree")
	if _, err := git(ctx, cs.top, "worktree", "add", "--quiet", "--detach", baseTree, cs.base); err != nil {
		return fmt.Errorf("-baseline: check out %s: %w", cs.baseLabel, err)
	}
	defer removeWorktree(cs.top, baseTree)

	base := side{name: "base", bin: filepath.Join(tmp, "cairn-bench-base"), dir: sameDir(cs.top, cwd, baseTree)}
	head := side{name: "head", bin: filepath.Join(tmp, "cairn-bench-head"), dir: cwd}
	for _, s := range []struct {
		side *side
		tree string
	}{{&base, baseTree}, {&head, cs.top}} {
		if err := build(ctx, s.tree, s.side.bin, s.side.name); err != nil {
			return fmt.Errorf("-baseline: build %s: %w", s.side.name, err)
		}
		s.side.rounds = hasRoundsFlag(ctx, *s.side, b.withHelp())
	}

	c := newComparison()
	runErr := runRounds(ctx, b, base, head, c)
	if len(c.order) == 0 {
		if runErr != nil {
			return runErr
		}
		return fmt.Errorf("-baseline: no table rows found in the output of cairn-bench %s", quoteArgs(b.args))
	}
	fmt.Printf("# cairn-bench %s -baseline %s: base %s, head %s; rounds each side: %d, alternating which runs first; medians\n\n",
		quoteArgs(b.args), b.ref, cs.baseLabel, cs.headLabel, b.rounds)
	if runErr != nil {
		fmt.Printf("Stopped early (%v): the last column counts the rounds each side gave.\n\n", runErr)
	}
	fmt.Printf("head/base above 1 is better for a rate (…/s), worse for a duration or a size. \"head is\" says better or worse only when every head round lies beyond every base round, with %d rounds or more each.\n\n", minVerdictRounds)
	c.write(os.Stdout, cs.baseLabel, cs.headLabel)
	return runErr
}

// runRounds runs b.rounds rounds of both sides into c, printing each
// round's figures on standard error. It stops at the first failure.
func runRounds(ctx context.Context, b baselineRun, base, head side, c *comparison) error {
	for r := 1; r <= b.rounds; r++ {
		order := []side{base, head}
		if r%2 == 0 {
			order[0], order[1] = head, base
		}
		for _, s := range order {
			args := b.args
			if s.rounds {
				args = b.withRounds()
			}
			start := time.Now()
			out, err := s.run(ctx, args)
			if err != nil {
				if ctx.Err() != nil {
					return fmt.Errorf("-baseline: interrupted in round %d of %s", r, s.name)
				}
				return fmt.Errorf("-baseline: round %d of %s: %w", r, s.name, err)
			}
			ms := parseRows(out)
			fmt.Fprintf(os.Stderr, "round %d/%d, %s (%.1f s):", r, b.rounds, s.name, time.Since(start).Seconds())
			if len(ms) == 0 {
				fmt.Fprint(os.Stderr, " no table rows found")
			}
			fmt.Fprintln(os.Stderr)
			for _, m := range ms {
				fmt.Fprintf(os.Stderr, "  %s: %s\n", m.name, formatFigure(m.value, m.unit, m.kind))
			}
			c.add(s.name == "head", ms)
		}
	}
	return nil
}

// run runs the side's binary once with args and returns its standard
// output. An interrupt of ctx reaches the child as SIGINT.
func (s side) run(ctx context.Context, args []string) (string, error) {
	cmd := exec.CommandContext(ctx, s.bin, args...)
	cmd.Dir = s.dir
	cmd.Env = childEnv()
	var out bytes.Buffer
	cmd.Stdout = &out
	pw := &prefixWriter{w: os.Stderr, prefix: s.name + ": "}
	cmd.Stderr = pw
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = childStopWait
	err := cmd.Run()
	pw.flush()
	return out.String(), err
}

// roundsFlag finds -rounds in a benchmark's help.
var roundsFlag = regexp.MustCompile(`(?m)^\s*-rounds\b`)

// hasRoundsFlag reports whether the side's benchmark has -rounds, from its
// help: a benchmark without it (placement, placed) runs whole each round.
func hasRoundsFlag(ctx context.Context, s side, help []string) bool {
	cmd := exec.CommandContext(ctx, s.bin, help...)
	cmd.Dir = s.dir
	cmd.Env = childEnv()
	out, _ := cmd.CombinedOutput()
	return roundsFlag.Match(out)
}

// build builds the benchmark binary of the tree at dir into out; name
// says which in what it prints.
func build(ctx context.Context, dir, out, name string) error {
	start := time.Now()
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, "./cmd/cairn-bench")
	cmd.Dir = dir
	cmd.Env = childEnv()
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "cairn-bench -baseline: built %s (%s) in %.1f s\n", name, dir, time.Since(start).Seconds())
	return nil
}

// sameDir is the directory of tree that cwd is of top, or tree itself
// when that directory does not exist at the base's commit.
func sameDir(top, cwd, tree string) string {
	t, err1 := filepath.EvalSymlinks(top)
	c, err2 := filepath.EvalSymlinks(cwd)
	rel, err3 := filepath.Rel(t, c)
	if err := errors.Join(err1, err2, err3); err != nil || strings.HasPrefix(rel, "..") {
		return tree
	}
	dir := filepath.Join(tree, rel)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		fmt.Fprintf(os.Stderr, "cairn-bench -baseline: %s does not exist at the base commit; base runs in its tree's root\n", rel)
		return tree
	}
	return dir
}

// removeWorktree removes the base's worktree, and its record in the
// repository if the removal fails. It does not take the comparison's
// context: it runs after an interrupt too.
func removeWorktree(top, tree string) {
	ctx := context.Background()
	if _, err := git(ctx, top, "worktree", "remove", "--force", tree); err != nil {
		fmt.Fprintln(os.Stderr, "cairn-bench -baseline:", err)
		os.RemoveAll(tree)
		if _, err := git(ctx, top, "worktree", "prune"); err != nil {
			fmt.Fprintln(os.Stderr, "cairn-bench -baseline:", err)
		}
	}
}

// git runs git in dir and returns its output, trimmed; a failure carries
// git's message.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, msg)
		}
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}

// short is the short form of sha, or its first 12 digits if git cannot
// say.
func short(ctx context.Context, dir, sha string) string {
	if s, err := git(ctx, dir, "rev-parse", "--short", sha); err == nil {
		return s
	}
	return sha[:min(12, len(sha))]
}

// quoteArgs joins args as a shell would read them back: quoted where they
// hold a space or a quote, or are empty.
func quoteArgs(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = a
		if a == "" || strings.ContainsAny(a, " \t\"'\\$") {
			q[i] = strconv.Quote(a)
		}
	}
	return strings.Join(q, " ")
}

// childEnv is the environment without CAIRN_BASELINE.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, baselineEnv+"=") {
			env = append(env, kv)
		}
	}
	return env
}

// prefixWriter writes each line to w with prefix before it.
type prefixWriter struct {
	w      io.Writer
	prefix string
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		if _, err := fmt.Fprintf(p.w, "%s%s", p.prefix, p.buf[:i+1]); err != nil {
			return len(b), err
		}
		p.buf = p.buf[i+1:]
	}
}

// flush writes what is left after the last newline.
func (p *prefixWriter) flush() {
	if len(p.buf) > 0 {
		fmt.Fprintf(p.w, "%s%s\n", p.prefix, p.buf)
		p.buf = nil
	}
}
