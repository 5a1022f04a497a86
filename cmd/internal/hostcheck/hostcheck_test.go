package hostcheck

import (
	"strings"
	"testing"
)

func TestAllows(t *testing.T) {
	n, err := Parse([]string{"tables.example.com", " Console.Example.COM. ", ""})
	if err != nil {
		t.Fatal(err)
	}
	if !n.Listed() || n.String() != "console.example.com,tables.example.com" {
		t.Fatalf("listed %v: %s", n.Listed(), n)
	}
	for host, want := range map[string]bool{
		// IP literals: a rebinding needs a name.
		"127.0.0.1:10002": true, "127.0.0.1": true, "10.1.2.3:80": true, "0.0.0.0:10002": true,
		"[::1]:10002": true, "[::1]": true, "[2001:db8::7]:443": true, "[fe80::1%25eth0]:10002": true,
		// Loopback names, which browsers resolve themselves.
		"localhost:10002": true, "localhost": true, "LOCALHOST.:1": true, "app.localhost:5173": true, "a.b.localhost": true,
		// No Host: HTTP/1.0, never a browser.
		"": true,
		// Listed names, in any case, with or without a final dot or port.
		"tables.example.com": true, "TABLES.example.com:10002": true, "console.example.com.:443": true,
		// The rest.
		"rebind.attacker.example:10102": false, "attacker.example": false, "example.com": false,
		"tables.example.com.attacker.example": false, "localhost.attacker.example": false, "notlocalhost": false,
		"evil-localhost:1": false, "2130706433:10002": false, "[::1]x": false,
	} {
		if got := n.Allows(host); got != want {
			t.Errorf("Allows(%q) = %v, want %v", host, got, want)
		}
	}
	var none Names
	if none.Listed() || none.Allows("tables.example.com") || !none.Allows("127.0.0.1:1") || !none.Allows("localhost:1") {
		t.Error("the zero Names allows a name, or refuses an IP literal or localhost")
	}
}

func TestParseRefuses(t *testing.T) {
	for entry, why := range map[string]string{
		"https://tables.example.com":             "scheme",
		"tables.example.com:443":                 "port",
		"*.example.com":                          "wildcard",
		"tables..example.com":                    "empty label",
		"tables example.com":                     "character",
		"tábles.example.com":                     "character",
		".":                                      "empty",
		strings.Repeat("a", 64) + ".example.com": "longer than 63",
		strings.Repeat(strings.Repeat("a", 60)+".", 5): "longer than 253",
	} {
		if _, err := Parse([]string{"ok.example.com", entry}); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("Parse(%q): %v, want an error about %q", entry, err, why)
		}
	}
	if n, err := Parse([]string{"10.0.0.5", "[::1]"}); err != nil || !n.Allows("10.0.0.5:1") {
		t.Errorf("IP literals listed: %v", err)
	}
}
