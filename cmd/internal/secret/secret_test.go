package secret

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadOrCreate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "s")
	prefix := func(r string) string { return "u:" + r }
	first, created, loose, err := LoadOrCreate(path, prefix)
	if err != nil || !created || loose || !strings.HasPrefix(first, "u:") || len(first) != 2+64 {
		t.Fatalf("first: %q created=%v loose=%v err=%v", first, created, loose, err)
	}
	for p, want := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700} {
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != want {
			t.Fatalf("%s: mode %v, want %v (%v)", p, st.Mode().Perm(), want, err)
		}
	}
	again, created, loose, err := LoadOrCreate(path, prefix)
	if err != nil || created || loose || again != first {
		t.Fatalf("again: %q created=%v loose=%v err=%v", again, created, loose, err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, loose, err := LoadOrCreate(path, prefix); err != nil || !loose {
		t.Fatalf("a file others may read is not loose: %v %v", loose, err)
	}
	// A directory where the file should be cannot be read as a secret.
	if _, _, _, err := LoadOrCreate(dir, prefix); err == nil {
		t.Fatal("a directory read as a secret")
	}
}
