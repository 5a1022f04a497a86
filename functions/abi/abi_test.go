package abi

import (
	"slices"
	"testing"
)

// TestHeaderValue: a header is found under its canonical name or any
// other case, its first value by HeaderValue, and an absent one is empty.
func TestHeaderValue(t *testing.T) {
	r := &HTTPRequest{Header: map[string][]string{"X-Delivery-Id": {"d1", "d2"}, "Content-Type": {"application/json"}}}
	for _, name := range []string{"X-Delivery-Id", "x-delivery-id", "X-DELIVERY-ID"} {
		if got := r.HeaderValue(name); got != "d1" {
			t.Errorf("HeaderValue(%q) = %q", name, got)
		}
		if got := r.HeaderValues(name); !slices.Equal(got, []string{"d1", "d2"}) {
			t.Errorf("HeaderValues(%q) = %q", name, got)
		}
	}
	if got := r.HeaderValue("X-Missing"); got != "" {
		t.Errorf("an absent header: %q", got)
	}
	if got := (&HTTPRequest{}).HeaderValues("Content-Type"); got != nil {
		t.Errorf("no headers: %q", got)
	}
}
