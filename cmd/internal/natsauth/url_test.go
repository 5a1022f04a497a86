package natsauth

import (
	"errors"
	"os"
	"testing"
)

// TestURLFile: the recorded URL drops credentials, makes an unspecified
// host loopback, is mode 0600, and reads back; a missing file is
// os.ErrNotExist and a bad URL is refused without writing.
func TestURLFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadURL(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("no file: %v", err)
	}
	if err := WriteURL(dir, "nats://u:secret@0.0.0.0:4222, tls://[::]:5222,nats://10.0.0.2:4222"); err != nil {
		t.Fatal(err)
	}
	got, err := ReadURL(dir)
	if want := "nats://127.0.0.1:4222,tls://127.0.0.1:5222,nats://10.0.0.2:4222"; err != nil || got != want {
		t.Fatalf("read %q, %v; want %q", got, err, want)
	}
	if st, err := os.Stat(URLPath(dir)); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v", st.Mode(), err)
	}
	if err := WriteURL(dir, "127.0.0.1:4222"); err == nil {
		t.Fatal("a URL without a scheme accepted")
	}
	if got, _ := ReadURL(dir); got != "nats://127.0.0.1:4222,tls://127.0.0.1:5222,nats://10.0.0.2:4222" {
		t.Fatalf("a refused URL changed the file: %q", got)
	}
}
