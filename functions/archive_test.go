package functions

import (
	"context"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/functions/abi"
)

// TestArchiveStaysInTheDevelopmentAccount: the archive queue is open to
// every client that may enqueue (the development user, any writer through
// an outbox message), so the built-in must not read or write another
// account's tables for them. The request is refused before any table is
// touched (this invocation has no runner: a lookup would panic).
func TestArchiveStaysInTheDevelopmentAccount(t *testing.T) {
	for _, body := range []string{
		`{"from":"contoso.Employees","to":"Loot","partitionKey":"a","rowKey":"1"}`,
		`{"from":"Current","to":"contoso.Archive","partitionKey":"a","rowKey":"1"}`,
	} {
		inv := &Invocation{trigger: abi.Trigger{Body: []byte(body)}}
		err := Archive(context.Background(), inv)
		if err == nil || !strings.Contains(err.Error(), "another storage account") {
			t.Errorf("%s: %v, want a refusal naming another storage account", body, err)
		}
	}
}
