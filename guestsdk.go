// Package cairn carries the source of the Go guest SDK for the host binary:
// `host init function` writes it into a new function module as a vendored
// dependency, so that the module builds with nothing but the go command
// (no network, no checkout of this repository).
//
// It lives at the module's root because go:embed cannot reach a parent
// directory, and the SDK (functions/sdk) needs engine and engine/wire as
// well as functions/abi. Nothing in Cairn but cmd/host imports it. The
// cost is the embedded files in the host binary: 370 KB, of which 100 KB
// are the packages' test files (a pattern cannot leave them out; the
// writer skips them). With the init command, the linux/amd64 host grew
// from 32.44 to 32.89 MB.
package cairn

import "embed"

// GuestSDK holds the repository's go.mod (its go directive and the
// versions it requires), every Go file of GuestPackages, and
// functions/sdk/_thirdparty: a copy of the third-party packages those
// import, with their lines of a vendor/modules.txt (see its README.md).
//
//go:embed go.mod
//go:embed engine/*.go engine/wire/*.go functions/abi/*.go functions/sdk/*.go
//go:embed functions/sdk/_thirdparty
var GuestSDK embed.FS

// ModulePath is this module's path, the one a function's go.mod requires.
const ModulePath = "github.com/cairn-dev/cairn"

// GuestPackages are the packages of this module a function builds with,
// as directories of GuestSDK: functions/sdk and what it imports from
// this module (`go list -deps`, checked by cmd/host's tests).
var GuestPackages = []string{"engine", "engine/wire", "functions/abi", "functions/sdk"}

// ThirdPartyDir is the directory of GuestSDK with the third-party copy.
const ThirdPartyDir = "functions/sdk/_thirdparty"

// AssemblyScriptSDK holds the AssemblyScript guest SDK: its sources, its
// compiler options and the package.json that pins the compiler. `host
// init function -lang assemblyscript` copies it into a new project.
//
//go:embed functions/sdk/assemblyscript/assembly/*.ts functions/sdk/assemblyscript/README.md
//go:embed functions/sdk/assemblyscript/asconfig.json functions/sdk/assemblyscript/package.json
var AssemblyScriptSDK embed.FS

// AssemblyScriptSDKDir is AssemblyScriptSDK's directory.
const AssemblyScriptSDKDir = "functions/sdk/assemblyscript"
