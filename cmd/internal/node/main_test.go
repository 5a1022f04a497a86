package node_test

import (
	"testing"

	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
)

// TestMain lets the test binary double as a node process for the crash
// tests (nodetest.StartChild).
func TestMain(m *testing.M) { nodetest.Main(m) }
