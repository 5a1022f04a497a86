package cors

import "testing"

func TestParse(t *testing.T) {
	o, err := Parse([]string{"https://app.example.com", " http://localhost:5173 ", ""})
	if err != nil {
		t.Fatal(err)
	}
	for origin, want := range map[string]bool{
		"https://app.example.com":  true,
		"http://localhost:5173":    true,
		"http://app.example.com":   false,
		"https://app.example.com.": false,
		"https://evil.example":     false,
		"null":                     false,
		"":                         false,
	} {
		if o.Allows(origin) != want || o.Named(origin) != want {
			t.Errorf("%q: allowed %v, want %v", origin, o.Allows(origin), want)
		}
	}
	if got := o.AllowOrigin("http://localhost:5173"); got != "http://localhost:5173" {
		t.Errorf("AllowOrigin: %q", got)
	}
	for _, bad := range []string{"app.example.com", "https://app.example.com/", "https://a.example/x", "ftp://a.example", "https://u@a.example", "https://a.example?x"} {
		if _, err := Parse([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestWildcard(t *testing.T) {
	var none Origins
	if none.Enabled() || none.Allows("https://a.example") {
		t.Fatal("the zero value allows an origin")
	}
	o, err := Parse([]string{"*", "https://dash.example"})
	if err != nil {
		t.Fatal(err)
	}
	if !o.Allows("https://any.example") || o.Named("https://any.example") || !o.Named("https://dash.example") {
		t.Fatal("the wildcard admits any origin to the Tables API and none by name")
	}
	if got := o.AllowOrigin("https://any.example"); got != "*" {
		t.Errorf("AllowOrigin echoed an origin admitted only by the wildcard: %q", got)
	}
}
