package commit

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cairn-dev/cairn/engine"
)

func TestFateOf(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("journal: append T/\"p\": %w", err) }
	timeout := errors.New("no acknowledgement within 10s")
	for _, c := range []struct {
		err      error
		settling bool
		want     fate
	}{
		{nil, false, fateStored},
		{nil, true, fateStored},
		{wrap(engine.ErrConflict), false, fateRefused},
		{wrap(engine.ErrConflict), true, fateUnknown}, // maybe our own first copy in the way
		{wrap(engine.ErrNotSent), false, fateRefused},
		{wrap(engine.ErrNotSent), true, fateUnknown}, // says nothing of the first copy
		{wrap(engine.ErrTableGone), false, fateGone},
		{wrap(engine.ErrTableGone), true, fateGone},
		{timeout, false, fateUnknown},
		{timeout, true, fateUnknown},
	} {
		if got := fateOf(c.err, c.settling); got != c.want {
			t.Errorf("fateOf(%v, %v) = %d, want %d", c.err, c.settling, got, c.want)
		}
	}
}

func TestSettle(t *testing.T) {
	for _, c := range []struct {
		next  uint64
		nonce string
		want  fate
	}{
		{0, "", fateUnknown},      // nothing after E yet
		{7, "ours", fateStored},   // the first record after E is ours
		{7, "other", fateRefused}, // another writer's: ours can never follow E
		{7, "", fateRefused},      // a record without a readable nonce is not ours
	} {
		if got := settle(c.next, c.nonce, "ours"); got != c.want {
			t.Errorf("settle(%d, %q) = %d, want %d", c.next, c.nonce, got, c.want)
		}
	}
}
