package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/cmd/internal/cli"
	"github.com/cairn-dev/cairn/functions"
)

const initUsage = `usage: host init function [flags] <dir>

Writes a new Go module for a Cairn function into <dir> (created if missing):
go.mod, main.go (an example: a queue message adds to an entity), main_test.go,
cairn.json (its manifest), README.md, and vendor/ with the guest SDK of this
host, so that the module builds with the go command alone: no network, no
checkout of Cairn. Deploy it with "host deploy <dir>", a node running.

host itself is installed with
  go install github.com/cairn-dev/cairn/cmd/host@latest
(from a checkout of Cairn: go install ./cmd/host) into $(go env GOPATH)/bin,
or $GOBIN, which must be on PATH; "go run ./cmd/host" works only inside a
checkout of Cairn.

With -lang assemblyscript it writes an AssemblyScript project instead:
package.json (the compiler, at the version the SDK is tested with),
asconfig.json, assembly/index.ts (the same example), assembly/cairn/ with
the guest SDK of this host, cairn.json and README.md. Build it with
"npm install && npm run build" and deploy the module it writes with
"host deploy -manifest cairn.json build/<name>.wasm".

`

// guestSDKVersion is the version a new function's go.mod requires of
// github.com/cairn-dev/cairn: the zero pseudo-version, since the module is
// never fetched, only read from vendor/.
const guestSDKVersion = "v0.0.0-00010101000000-000000000000"

// initCmd is `host init function [flags] <dir>`.
func initCmd(args []string) error {
	fs := flag.NewFlagSet("init", flag.ContinueOnError)
	module := fs.String("module", "", "module path of the new module (default: the directory's base name)")
	name := fs.String("name", "", "function name, also its queue (default: the last element of the module path; assemblyscript: the directory's name)")
	force := fs.Bool("force", false, "write into a directory that is not empty, replacing its vendor/ (assemblyscript: assembly/cairn/) and any file of the same name")
	lang := fs.String("lang", "go", "the function's language: go or assemblyscript")
	cli.Usage(fs, initUsage)
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 || fs.Arg(0) != "function" {
		fs.Usage()
		return errors.New("init: the one thing init makes is a function: host init function <dir>")
	}
	if fs.NArg() != 2 {
		fs.Usage()
		return errors.New("init function: give one directory")
	}
	dir := fs.Arg(1)
	switch *lang {
	case "go":
	case "assemblyscript":
		if *module != "" {
			return errors.New("init function: -module names a Go module; an AssemblyScript function has none (its name is -name)")
		}
		f, err := newASFunction(dir, *name)
		if err != nil {
			return err
		}
		files, err := f.files()
		if err != nil {
			return err
		}
		if err := writeFiles(dir, *force, asSDKDir, files); err != nil {
			return err
		}
		fmt.Printf("wrote function %s (AssemblyScript) into %s; next: see %s\n", f.Name, dir, filepath.Join(dir, "README.md"))
		return nil
	default:
		return fmt.Errorf("init function: -lang %q: the languages are go and assemblyscript", *lang)
	}
	f, err := newFunctionModule(dir, *module, *name)
	if err != nil {
		return err
	}
	if err := f.write(dir, *force); err != nil {
		return err
	}
	fmt.Printf("wrote function %s (module %s) into %s; next: see %s\n", f.Name, f.Module, dir, filepath.Join(dir, "README.md"))
	return nil
}

// moduleRE is what init accepts as a module path: letters, digits and
// ._~+- in elements separated by single slashes, none beginning with a
// dot or a dash (the go command checks the rest).
var moduleRE = regexp.MustCompile(`^[A-Za-z0-9_~+][A-Za-z0-9._~+-]*(/[A-Za-z0-9_~+][A-Za-z0-9._~+-]*)*$`)

// functionModule is what the files of a new function are made of.
type functionModule struct {
	Module    string // module path
	Name      string // function and queue name
	GoVersion string // the go directive, Cairn's own
	Require   []requirement
}

type requirement struct {
	Path, Version string
	Indirect      bool
}

// newFunctionModule checks the names of a function module to be written
// into dir: module defaults to dir's base name, name to module's last
// element.
func newFunctionModule(dir, module, name string) (*functionModule, error) {
	if module == "" {
		module = filepath.Base(filepath.Clean(dir))
	}
	if !moduleRE.MatchString(module) {
		return nil, fmt.Errorf("init function: module path %q: use letters, digits and ._~+- in elements separated by /, none beginning with . or -; choose one with -module", module)
	}
	if module == cairn.ModulePath || strings.HasPrefix(module, cairn.ModulePath+"/") {
		return nil, fmt.Errorf("init function: module path %q is Cairn's own, which the new module requires: choose another with -module", module)
	}
	if name == "" {
		name = path.Base(module)
	}
	if err := functions.ValidateName("function", name); err != nil {
		return nil, fmt.Errorf("init function: %w (choose one with -name)", err)
	}
	goVersion, err := cairnGoVersion()
	if err != nil {
		return nil, err
	}
	req := []requirement{{Path: cairn.ModulePath, Version: guestSDKVersion}}
	third, err := thirdPartyModules()
	if err != nil {
		return nil, err
	}
	for _, m := range third {
		req = append(req, requirement{Path: m.Path, Version: m.Version, Indirect: true})
	}
	return &functionModule{Module: module, Name: name, GoVersion: goVersion, Require: req}, nil
}

// cairnGoVersion is the go directive of Cairn's go.mod: the vendored
// packages are written for that language version.
func cairnGoVersion() (string, error) {
	b, err := cairn.GuestSDK.ReadFile("go.mod")
	if err != nil {
		return "", err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "go "); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", errors.New("init function: the embedded go.mod has no go directive")
}

// vendoredModule is one module of the embedded third-party copy, as its
// lines in modules.txt name it.
type vendoredModule struct {
	Path, Version string
	Packages      []string
}

// thirdPartyModules reads the embedded third-party copy's modules.txt.
func thirdPartyModules() ([]vendoredModule, error) {
	b, err := cairn.GuestSDK.ReadFile(cairn.ThirdPartyDir + "/modules.txt")
	if err != nil {
		return nil, err
	}
	var ms []vendoredModule
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
		case strings.HasPrefix(line, "# "):
			f := strings.Fields(line)
			if len(f) != 3 {
				return nil, fmt.Errorf("init function: embedded modules.txt: bad line %q", line)
			}
			ms = append(ms, vendoredModule{Path: f[1], Version: f[2]})
		case len(ms) > 0 && line != "":
			ms[len(ms)-1].Packages = append(ms[len(ms)-1].Packages, line)
		default:
			return nil, fmt.Errorf("init function: embedded modules.txt: bad line %q", line)
		}
	}
	return ms, nil
}

// write writes the module into dir, which must be empty or missing
// unless force. With force, vendor/ is replaced whole (so no file of an
// older SDK stays) and the other files of the same names are replaced.
func (f *functionModule) write(dir string, force bool) error {
	files, err := f.files()
	if err != nil {
		return err
	}
	return writeFiles(dir, force, "vendor", files)
}

// writeFiles writes files into dir, which must be empty or missing unless
// force; with force, the directory replace (of the SDK's copy) is
// removed whole first.
func writeFiles(dir string, force bool, replace string, files []moduleFile) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("init function: %w", err)
	case len(entries) > 0 && !force:
		return fmt.Errorf("init function: %s is not empty (%d entries): choose an empty directory, or pass -force to write over it", dir, len(entries))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("init function: %w", err)
	}
	if err := os.RemoveAll(filepath.Join(dir, filepath.FromSlash(replace))); err != nil {
		return fmt.Errorf("init function: %w", err)
	}
	for _, file := range files {
		p := filepath.Join(dir, filepath.FromSlash(file.name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("init function: %w", err)
		}
		if err := os.WriteFile(p, file.data, 0o644); err != nil {
			return fmt.Errorf("init function: %w", err)
		}
	}
	return nil
}

type moduleFile struct {
	name string // slash-separated, relative to the module's directory
	data []byte
}

// files returns every file of the module: the templates filled in, then
// vendor/.
func (f *functionModule) files() ([]moduleFile, error) {
	out := f.render()
	vendor, err := vendorFiles()
	if err != nil {
		return nil, err
	}
	return append(out, vendor...), nil
}

// vendorFiles returns vendor/: Cairn's guest packages (their non-test Go
// files), the third-party copy, and modules.txt naming them all, which
// makes the go command build from vendor/ (the go.mod's requirements
// match it and its go version is at least 1.14).
func vendorFiles() ([]moduleFile, error) {
	goVersion, err := cairnGoVersion()
	if err != nil {
		return nil, err
	}
	var out []moduleFile
	modules := fmt.Sprintf("# %s %s\n## explicit; go %s\n", cairn.ModulePath, guestSDKVersion, goVersion)
	for _, pkg := range cairn.GuestPackages {
		modules += cairn.ModulePath + "/" + pkg + "\n"
		entries, err := cairn.GuestSDK.ReadDir(pkg)
		if err != nil {
			return nil, fmt.Errorf("init function: embedded SDK: %w", err)
		}
		for _, e := range entries {
			n := e.Name()
			if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
				continue
			}
			data, err := cairn.GuestSDK.ReadFile(pkg + "/" + n)
			if err != nil {
				return nil, err
			}
			out = append(out, moduleFile{name: "vendor/" + cairn.ModulePath + "/" + pkg + "/" + n, data: data})
		}
	}
	third, err := cairn.GuestSDK.ReadFile(cairn.ThirdPartyDir + "/modules.txt")
	if err != nil {
		return nil, err
	}
	out = append(out, moduleFile{name: "vendor/modules.txt", data: append([]byte(modules), third...)})
	err = fs.WalkDir(cairn.GuestSDK, cairn.ThirdPartyDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel := strings.TrimPrefix(p, cairn.ThirdPartyDir+"/")
		if rel == "modules.txt" || rel == "README.md" {
			return nil
		}
		data, err := cairn.GuestSDK.ReadFile(p)
		if err != nil {
			return err
		}
		// Stored as .go.txt, so that gofmt and goimports of this
		// repository leave the copy as it was published.
		out = append(out, moduleFile{name: "vendor/" + strings.TrimSuffix(rel, ".txt"), data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("init function: embedded SDK: %w", err)
	}
	return out, nil
}
