// Package wasm is the function sandbox: WebAssembly modules run with wazero.
package wasm

import _ "github.com/tetratelabs/wazero"
