package functions

import (
	"context"
	"sync"

	"github.com/cairn-dev/cairn/engine"
)

// settingsCache is a node's copy of every function's settings, secrets
// opened: the settings watch writes it, invocations read it. A read is a
// map lookup under a read lock; a change costs the watch one record's
// decoding (and opening its secrets).
type settingsCache struct {
	mu  sync.RWMutex
	fns map[string]map[string]cachedSetting
	rev *revision // the bucket revision delivered last (WaitSettings)
}

type cachedSetting struct {
	value string
	err   error // a secret that did not open (names no byte of it)
}

func newSettingsCache() *settingsCache {
	return &settingsCache{fns: map[string]map[string]cachedSetting{}, rev: newRevision()}
}

// apply replaces a function's values with rec's (nil: none). A secret
// that does not open is kept as its error, logged by name only.
func (c *settingsCache) apply(rn *Runner, fn string, rec *settingsRecord, recErr error, rev uint64, seal *sealer) {
	var vals map[string]cachedSetting
	if recErr != nil {
		rn.log.Warn("a function's settings record is not readable: the function reads none of them", "function", fn, "err", recErr)
	}
	if rec != nil && len(rec.Values) > 0 {
		vals = make(map[string]cachedSetting, len(rec.Values))
		for name, st := range rec.Values {
			if !st.Secret {
				vals[name] = cachedSetting{value: st.Value}
				continue
			}
			if seal == nil {
				vals[name] = cachedSetting{err: ErrNoSecretsKey}
				continue
			}
			v, err := seal.open(fn, name, st.Sealed)
			if err != nil {
				rn.log.Warn("a function's secret does not open: the function fails reading it", "function", fn, "secret", name, "err", err)
			}
			vals[name] = cachedSetting{value: string(v), err: err}
		}
	}
	c.mu.Lock()
	if vals == nil {
		delete(c.fns, fn)
	} else {
		c.fns[fn] = vals
	}
	c.mu.Unlock()
	c.rev.move(rev)
}

func (c *settingsCache) lookup(fn, name string) (string, bool, error) {
	c.mu.RLock()
	s, ok := c.fns[fn][name]
	c.mu.RUnlock()
	if ok && s.err != nil {
		return "", false, engine.Errorf(engine.CodeInternalError, "secret %s of function %q: %v", name, fn, s.err)
	}
	return s.value, ok, nil
}

// Settings returns the settings bucket (nil before Ready is closed).
func (rn *Runner) Settings() *Settings { return rn.settingsKV }

// WaitSettings returns once this node's invocations see the settings as
// of bucket revision rev (what Settings.Set and Remove return), or ctx
// ends. The operators' API waits so that an invocation started on this
// node after its answer sees the change; the other nodes see it when
// their watch delivers it.
func (rn *Runner) WaitSettings(ctx context.Context, rev uint64) error {
	return rn.settings.rev.wait(ctx, rev)
}

// Setting returns the value of a function's setting or secret as this
// node's invocations see it, and whether it is set. A secret that does
// not open with this node's key is an InternalError naming only the
// secret.
func (rn *Runner) Setting(fn, name string) (string, bool, error) {
	return rn.settings.lookup(fn, name)
}
