package host

import (
	"context"
	"log/slog"

	"github.com/cairn-dev/cairn/functions"
)

func newSandbox(ctx context.Context, dataDir string, log *slog.Logger) functions.Sandbox { return nil }
