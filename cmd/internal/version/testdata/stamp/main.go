// Command stamp prints the version package's Get().Version, for the test
// that builds it with and without a version stamped by the linker.
package main

import (
	"fmt"

	"github.com/cairn-dev/cairn/cmd/internal/version"
)

func main() { fmt.Println(version.Get().Version) }
