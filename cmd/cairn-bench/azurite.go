package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// azuriteVersion is the Azurite release the HTTP benchmark compares against.
const azuriteVersion = "3.37.0"

// defaultAzuriteDir returns the cache directory Azurite is installed into:
// $XDG_CACHE_HOME/cairn/azurite or ~/.cache/cairn/azurite on Linux.
func defaultAzuriteDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "cairn", "azurite")
	}
	return filepath.Join(dir, "cairn", "azurite")
}

// azuriteBin is the npm shim of the table server under an install prefix.
func azuriteBin(dir string) string {
	return filepath.Join(dir, "node_modules", ".bin", "azurite-table")
}

// azuriteMain is the table server's script under an install prefix. Running
// it with node directly makes the child's pid the node process's, whose
// memory is measured.
func azuriteMain(dir string) string {
	return filepath.Join(dir, "node_modules", "azurite", "dist", "src", "table", "main.js")
}

// installAzurite installs Azurite into dir with npm unless it is already
// there.
func installAzurite(ctx context.Context, dir string) error {
	if fileExists(azuriteBin(dir)) {
		return nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return fmt.Errorf("npm not found (%v)", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bench-http: installing azurite@%s into %s (once)\n", azuriteVersion, dir)
	cmd := exec.CommandContext(ctx, npm, "install", "--no-audit", "--no-fund", "--prefix", dir, "azurite@"+azuriteVersion)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("npm install azurite@%s: %w", azuriteVersion, err)
	}
	if !fileExists(azuriteBin(dir)) {
		return fmt.Errorf("npm install azurite@%s: %s is missing afterwards", azuriteVersion, azuriteBin(dir))
	}
	return nil
}

// memoryHook is preloaded into Azurite's node process (with --expose-gc):
// each line on its stdin makes it collect garbage fully and write its
// memory usage, as JSON, to the file named by CAIRN_MEMORY_FILE.
const memoryHook = `const fs = require('fs');
const file = process.env.CAIRN_MEMORY_FILE;
process.stdin.on('data', () => {
  global.gc();
  fs.writeFileSync(file + '.tmp', JSON.stringify(process.memoryUsage()));
  fs.renameSync(file + '.tmp', file);
});
`

// azurite is a running Azurite table server, a child process.
type azurite struct {
	cmd     *exec.Cmd
	port    int
	work    string         // its working and log directory, removed by stop
	hook    io.WriteCloser // the memory hook's stdin; nil without the hook
	exited  chan struct{}  // closed when the process has exited
	waitErr error          // the process's exit status, once exited is closed
}

// startAzurite starts the table server installed under dir on a free port
// of 127.0.0.1, in memory, and returns once the port accepts connections.
// The server runs in node directly, with the memory hook preloaded, so
// that the child is the node process itself.
func startAzurite(ctx context.Context, dir string) (*azurite, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp("", "cairn-azurite-")
	if err != nil {
		return nil, err
	}
	a := &azurite{port: port, work: work, exited: make(chan struct{})}
	if err := a.start(ctx, dir); err != nil {
		os.RemoveAll(work)
		return nil, err
	}
	if err := a.waitReady(ctx, 60*time.Second); err != nil {
		a.stop()
		return nil, err
	}
	return a, nil
}

// start starts the process; its output goes to azurite.log in a.work.
func (a *azurite) start(ctx context.Context, dir string) error {
	logf, err := os.Create(filepath.Join(a.work, "azurite.log"))
	if err != nil {
		return err
	}
	defer logf.Close() // the child holds its own descriptor
	args := []string{"--inMemoryPersistence", "--tableHost", "127.0.0.1", "--tablePort", strconv.Itoa(a.port),
		"--skipApiVersionCheck", "--disableTelemetry", "--silent"}
	hook := filepath.Join(a.work, "memory-hook.js")
	node, nodeErr := exec.LookPath("node")
	if main := azuriteMain(dir); nodeErr == nil && fileExists(main) {
		if err := os.WriteFile(hook, []byte(memoryHook), 0o644); err != nil {
			return err
		}
		a.cmd = exec.CommandContext(ctx, node, append([]string{"--expose-gc", "--require", hook, main}, args...)...)
		a.cmd.Env = append(os.Environ(), "CAIRN_MEMORY_FILE="+a.memoryFile())
		if a.hook, err = a.cmd.StdinPipe(); err != nil {
			return err
		}
	} else {
		a.cmd = exec.CommandContext(ctx, azuriteBin(dir), args...)
	}
	a.cmd.Dir = a.work
	a.cmd.Stdout, a.cmd.Stderr = logf, logf
	if err := a.cmd.Start(); err != nil {
		return fmt.Errorf("start azurite: %w", err)
	}
	go func() {
		a.waitErr = a.cmd.Wait()
		close(a.exited)
	}()
	return nil
}

// endpoint returns the path-style service URL of the development account.
func (a *azurite) endpoint(account string) string {
	return fmt.Sprintf("http://127.0.0.1:%d/%s", a.port, account)
}

// waitReady polls the port until it accepts a connection, the process
// exits, or timeout passes.
func (a *azurite) waitReady(ctx context.Context, timeout time.Duration) error {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(a.port))
	deadline := time.Now().Add(timeout)
	for {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return nil
		}
		select {
		case <-a.exited:
			return fmt.Errorf("azurite exited before listening on %s (%v): %s", addr, a.waitErr, a.logTail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("azurite did not listen on %s within %v: %s", addr, timeout, a.logTail())
		}
	}
}

// logTail returns the end of the process's output, for error messages.
func (a *azurite) logTail() string {
	b, err := os.ReadFile(filepath.Join(a.work, "azurite.log"))
	if err != nil || len(bytes.TrimSpace(b)) == 0 {
		return "no output"
	}
	const keep = 2000
	if len(b) > keep {
		b = b[len(b)-keep:]
	}
	return strings.TrimSpace(string(b))
}

// stop kills the process, waits for it and removes its workspace. It may be
// called more than once.
func (a *azurite) stop() {
	_ = a.cmd.Process.Kill() // fails harmlessly once the process has exited
	<-a.exited
	os.RemoveAll(a.work)
}

func (a *azurite) memoryFile() string { return filepath.Join(a.work, "memory.json") }

// memory returns the live memory of the node process after a full
// collection (V8 heap in use plus memory outside it, such as Buffers) and
// its resident set size.
func (a *azurite) memory() (memSample, error) {
	if a.hook == nil {
		return memSample{}, fmt.Errorf("%w: azurite runs without the memory hook", errUnmeasured)
	}
	file := a.memoryFile()
	if err := os.Remove(file); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return memSample{}, err
	}
	if _, err := a.hook.Write([]byte("\n")); err != nil {
		return memSample{}, fmt.Errorf("azurite memory hook: %w", err)
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		select {
		case <-a.exited:
			return memSample{}, fmt.Errorf("azurite exited (%v): %s", a.waitErr, a.logTail())
		case <-time.After(10 * time.Millisecond):
		}
		b, err := os.ReadFile(file)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		var usage struct{ HeapUsed, External, RSS uint64 }
		if err == nil {
			err = json.Unmarshal(b, &usage)
		}
		if err != nil {
			return memSample{}, fmt.Errorf("azurite memory hook: %w", err)
		}
		return memSample{live: usage.HeapUsed + usage.External, rss: usage.RSS}, nil
	}
	return memSample{}, errors.New("azurite memory hook did not answer within 30s")
}

// nodeVersion returns the version of node on PATH ("v20.1.0"), or "".
func nodeVersion() string {
	out, err := exec.Command("node", "--version").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
