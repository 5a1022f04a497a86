package main

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/functions"
)

// asTemplates are the files of a new AssemblyScript function other than
// the SDK and the manifest; {{name}} and {{assemblyscript}} (the
// compiler's version) are filled in. gitignore is written as .gitignore
// (go:embed leaves out files whose names begin with a dot).
//
//go:embed templates/assemblyscript
var asTemplates embed.FS

const asTemplateDir = "templates/assemblyscript"

// asSDKDir is where a project holds its copy of the SDK, replaced whole by
// -force.
const asSDKDir = "assembly/cairn"

// asFunction is a new AssemblyScript function project.
type asFunction struct {
	Name     string
	Compiler string // the version of the npm package assemblyscript
}

// newASFunction checks the name of a project to be written into dir:
// name defaults to dir's base name.
func newASFunction(dir, name string) (*asFunction, error) {
	if name == "" {
		name = filepath.Base(filepath.Clean(dir))
	}
	if err := functions.ValidateName("function", name); err != nil {
		return nil, fmt.Errorf("init function: %w (choose one with -name)", err)
	}
	b, err := cairn.AssemblyScriptSDK.ReadFile(cairn.AssemblyScriptSDKDir + "/package.json")
	if err != nil {
		return nil, err
	}
	var p struct {
		DevDependencies map[string]string `json:"devDependencies"`
	}
	if err := json.Unmarshal(b, &p); err != nil || p.DevDependencies["assemblyscript"] == "" {
		return nil, errors.New("init function: the embedded AssemblyScript SDK's package.json names no assemblyscript")
	}
	return &asFunction{Name: name, Compiler: p.DevDependencies["assemblyscript"]}, nil
}

// files returns every file of the project: the templates filled in, the
// manifest, the compiler options and the SDK under assembly/cairn/.
func (f *asFunction) files() ([]moduleFile, error) {
	fill := strings.NewReplacer("{{name}}", f.Name, "{{assemblyscript}}", f.Compiler).Replace
	out := []moduleFile{{name: "cairn.json", data: []byte(fill(manifestTemplate))}}
	err := fs.WalkDir(asTemplates, asTemplateDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := asTemplates.ReadFile(p)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(p, asTemplateDir+"/")
		if name == "gitignore" {
			name = ".gitignore"
		}
		out = append(out, moduleFile{name: name, data: []byte(fill(string(data)))})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("init function: embedded templates: %w", err)
	}
	sdk := cairn.AssemblyScriptSDK
	conf, err := sdk.ReadFile(cairn.AssemblyScriptSDKDir + "/asconfig.json")
	if err != nil {
		return nil, err
	}
	out = append(out, moduleFile{name: "asconfig.json", data: conf})
	for _, n := range []string{"README.md"} {
		data, err := sdk.ReadFile(cairn.AssemblyScriptSDKDir + "/" + n)
		if err != nil {
			return nil, err
		}
		out = append(out, moduleFile{name: asSDKDir + "/" + n, data: data})
	}
	entries, err := sdk.ReadDir(cairn.AssemblyScriptSDKDir + "/assembly")
	if err != nil {
		return nil, fmt.Errorf("init function: embedded AssemblyScript SDK: %w", err)
	}
	for _, e := range entries {
		data, err := sdk.ReadFile(cairn.AssemblyScriptSDKDir + "/assembly/" + e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, moduleFile{name: asSDKDir + "/" + e.Name(), data: data})
	}
	return out, nil
}
