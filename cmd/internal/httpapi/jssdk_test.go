package httpapi_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
)

// jsSDKVersion is the JavaScript SDK the smoke test drives.
const jsSDKVersion = "@azure/data-tables@13.3.2"

// TestJavaScriptSDK drives a host with the JavaScript Azure Tables SDK
// (testdata/jssdk/smoke.mjs: tables, entities, ETags, a batch of 100 and a
// failing one, filters and paging), with the development connection
// string. The SDK is installed with npm into the user's cache; without node
// and npm the test is skipped and says so.
func TestJavaScriptSDK(t *testing.T) {
	node, errNode := exec.LookPath("node")
	npm, errNPM := exec.LookPath("npm")
	if errNode != nil || errNPM != nil {
		t.Skip("node and npm are needed to run the JavaScript SDK; skipped")
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "cairn", "jssdk")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@azure", "data-tables", "package.json")); err != nil {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(npm, "install", "--no-audit", "--no-fund", "--prefix", dir, jsSDKVersion).CombinedOutput()
		if err != nil {
			t.Skipf("npm could not install %s (no registry?); skipped:\n%s", jsSDKVersion, out)
		}
	}
	script, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "jssdk", "smoke.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	// Node resolves the SDK next to the script.
	path := filepath.Join(dir, "smoke.mjs")
	if err := os.WriteFile(path, script, 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, httpapiDefaults)
	conn := "DefaultEndpointsProtocol=http;AccountName=" + httpapi.DevAccountName + ";AccountKey=" + httpapi.DevAccountKey + ";TableEndpoint=" + s.endpoint + ";"
	out, err := exec.Command(node, path, conn).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "ok:") {
		t.Fatalf("the JavaScript SDK failed: %v\n%s", err, out)
	}
	t.Logf("%s", strings.TrimSpace(string(out)))
}
