package functions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
)

// Settings are a function's named values, set by operators and read by the
// function (abi.OpSetting): plain settings, which the operators' API and
// CLI show, and secrets, which are sealed at rest (settings_seal.go) and
// shown by name only. A name is either. They live in the KV bucket
// <PREFIX>_SETTINGS, one record per function (settingsRecord), so that a
// change is one compare-and-set and the bounds below are exact; every
// node's runner watches the bucket and keeps the values in memory
// (settingscache.go), so a function's read costs a map lookup.
type Settings struct {
	kv   jetstream.KeyValue
	seal *sealer // nil: no key, secrets are refused
}

// The bounds of a function's settings, checked before anything is stored.
const (
	// MaxSettingName bounds a name's length (letters, digits, _).
	MaxSettingName = 64
	// MaxSettingValue bounds one value, in bytes.
	MaxSettingValue = 16 << 10
	// MaxSettings bounds the names of one function.
	MaxSettings = 64
	// MaxSettingsBytes bounds a function's names and values in all.
	MaxSettingsBytes = 256 << 10
	// maxSettingsRecord bounds a function's record as stored (JSON, a
	// secret sealed and in base64, a setting's <, > and & written as
	// \u003c): under NATS's default largest message, 1 MiB, with room
	// for the headers. Values within MaxSettingsBytes can pass it when
	// most of their characters are escaped.
	maxSettingsRecord = 960 << 10
)

// settingsVersion is the version of settingsRecord; a record of a newer
// version is ignored by this node, never trusted.
const settingsVersion = 1

// settingsRecord is a function's entry in the bucket (JSON).
type settingsRecord struct {
	V      int                      `json:"v"`
	Values map[string]storedSetting `json:"values"`
}

// storedSetting is one value: a setting's in clear, a secret's sealed.
type storedSetting struct {
	Secret bool      `json:"secret,omitempty"`
	Value  string    `json:"value,omitempty"`  // a setting's
	Sealed []byte    `json:"sealed,omitempty"` // a secret's (settings_seal.go)
	Set    time.Time `json:"set"`
}

// Setting is a function's setting or secret as operators see it: a
// secret's Value is always nil.
type Setting struct {
	Name   string    `json:"name"`
	Secret bool      `json:"secret,omitempty"`
	Value  *string   `json:"value,omitempty"`
	Set    time.Time `json:"set"`
}

// OpenSettings opens (creating if needed) the settings bucket; with
// replicas 0 it only opens an existing one. key is SecretsKey of the node
// user's password (nil: secrets can be neither set nor read).
func OpenSettings(ctx context.Context, js jetstream.JetStream, prefix string, replicas int, key []byte) (*Settings, error) {
	name := bucketName(prefix, "SETTINGS")
	var (
		kv  jetstream.KeyValue
		err error
	)
	if replicas == 0 {
		if kv, err = js.KeyValue(ctx, name); err != nil {
			return nil, fmt.Errorf("functions: settings bucket %s: %w (has a Cairn node of this version with prefix %q started on this NATS server?)", name, err, prefix)
		}
	} else {
		kv, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      name,
			Description: "Cairn functions: the settings and sealed secrets of each",
			// One: a removed secret's sealed value goes with its record.
			History:  1,
			Replicas: replicas,
			Storage:  jetstream.FileStorage,
		})
		if err != nil {
			return nil, fmt.Errorf("functions: settings bucket: %w", err)
		}
	}
	s := &Settings{kv: kv}
	if key != nil {
		if s.seal, err = newSealer(key); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// ValidateSettingName checks a setting's or secret's name: 1 to
// MaxSettingName letters, digits and _, not starting with a digit (an
// environment variable's name).
func ValidateSettingName(name string) error {
	if name == "" || len(name) > MaxSettingName {
		return engine.Errorf(engine.CodeInvalidInput, "a setting's name is 1 to %d characters, got %d", MaxSettingName, len(name))
	}
	for i, c := range []byte(name) {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return engine.Errorf(engine.CodeInvalidInput, "a setting's name is letters, digits and _, not starting with a digit: %q", name)
		}
	}
	return nil
}

// validateSettingValue checks a value without quoting it (it may be a
// secret).
func validateSettingValue(value string) error {
	if len(value) > MaxSettingValue {
		return engine.Errorf(engine.CodeRequestBodyTooLarge, "a setting's value is at most %d bytes, got %d", MaxSettingValue, len(value))
	}
	if !utf8.ValidString(value) {
		return engine.Errorf(engine.CodeInvalidInput, "a setting's value is UTF-8 text")
	}
	return nil
}

func validateSettingKeys(fn, name string) error {
	if err := ValidateName("function", fn); err != nil {
		return engine.Errorf(engine.CodeInvalidInput, "%v", err)
	}
	return ValidateSettingName(name)
}

// ErrNoSecretsKey refuses a secret on a node without a password to derive
// the key from.
var ErrNoSecretsKey = engine.Errorf(engine.CodeInvalidInput, "secrets need the node user's password, from which their key is derived: this node connects without one")

// maxSettingsTries bounds Set and Remove's compare-and-set attempts
// against writers of the same function's record.
const maxSettingsTries = 10

// Set stores a function's setting (secret false) or secret, replacing one
// of that name and kind. The function need not be deployed: a setting may
// be in place before its first version. It returns the bucket revision of
// the change (Runner.WaitSettings). Every refusal is a coded error and
// stores nothing; no error quotes the value.
func (s *Settings) Set(ctx context.Context, fn, name, value string, secret bool) (Setting, uint64, error) {
	if err := validateSettingKeys(fn, name); err != nil {
		return Setting{}, 0, err
	}
	if err := validateSettingValue(value); err != nil {
		return Setting{}, 0, err
	}
	if secret && s.seal == nil {
		return Setting{}, 0, ErrNoSecretsKey
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	st := storedSetting{Secret: secret, Set: now}
	if secret {
		sealed, err := s.seal.seal(fn, name, []byte(value))
		if err != nil {
			return Setting{}, 0, fmt.Errorf("functions: seal a secret: %w", err)
		}
		st.Sealed = sealed
	} else {
		st.Value = value
	}
	for range maxSettingsTries {
		rec, rev, err := s.get(ctx, fn)
		if err != nil {
			return Setting{}, 0, err
		}
		if old, ok := rec.Values[name]; ok && old.Secret != secret {
			return Setting{}, 0, engine.Errorf(engine.CodeInvalidInput, "function %q has a %s named %s: remove it first (a name is a setting or a secret)", fn, kindOf(old.Secret), name)
		}
		if _, ok := rec.Values[name]; !ok && len(rec.Values) >= MaxSettings {
			return Setting{}, 0, engine.Errorf(engine.CodeInvalidInput, "function %q has %d settings and secrets, the most it may have", fn, MaxSettings)
		}
		if n := rec.size() - rec.Values[name].size(name) + len(name) + len(value); n > MaxSettingsBytes {
			return Setting{}, 0, engine.Errorf(engine.CodeRequestBodyTooLarge, "function %q's settings and secrets would be %d bytes, names and values, more than %d", fn, n, MaxSettingsBytes)
		}
		rec.Values[name] = st
		rev, err = s.put(ctx, fn, rec, rev)
		if errors.Is(err, errSettingsRace) {
			continue
		}
		if err != nil {
			return Setting{}, 0, err
		}
		return st.view(name), rev, nil
	}
	return Setting{}, 0, engine.Errorf(engine.CodeServerBusy, "function %q's settings changed %d times while this change was made: try again", fn, maxSettingsTries)
}

// Remove removes a function's setting or secret (ResourceNotFound when it
// has none of that name) and returns the bucket revision of the change.
func (s *Settings) Remove(ctx context.Context, fn, name string, secret bool) (uint64, error) {
	if err := validateSettingKeys(fn, name); err != nil {
		return 0, err
	}
	for range maxSettingsTries {
		rec, rev, err := s.get(ctx, fn)
		if err != nil {
			return 0, err
		}
		old, ok := rec.Values[name]
		if !ok || old.Secret != secret {
			return 0, engine.Errorf(engine.CodeResourceNotFound, "function %q has no %s named %s", fn, kindOf(secret), name)
		}
		delete(rec.Values, name)
		// An empty record rather than a deletion: its revision is the
		// change's, which WaitSettings needs.
		rev, err = s.put(ctx, fn, rec, rev)
		if errors.Is(err, errSettingsRace) {
			continue
		}
		return rev, err
	}
	return 0, engine.Errorf(engine.CodeServerBusy, "function %q's settings changed %d times while this change was made: try again", fn, maxSettingsTries)
}

// List returns a function's settings and secrets by name, secrets without
// their values.
func (s *Settings) List(ctx context.Context, fn string) ([]Setting, error) {
	if err := ValidateName("function", fn); err != nil {
		return nil, engine.Errorf(engine.CodeInvalidInput, "%v", err)
	}
	rec, _, err := s.get(ctx, fn)
	if err != nil {
		return nil, err
	}
	out := make([]Setting, 0, len(rec.Values))
	for name, st := range rec.Values {
		out = append(out, st.view(name))
	}
	slices.SortFunc(out, func(a, b Setting) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func kindOf(secret bool) string {
	if secret {
		return "secret"
	}
	return "setting"
}

func (st storedSetting) view(name string) Setting {
	v := Setting{Name: name, Secret: st.Secret, Set: st.Set}
	if !st.Secret {
		value := st.Value
		v.Value = &value
	}
	return v
}

// size is what a value counts against MaxSettingsBytes (0 when absent):
// its name and its clear value (a secret's sealed value less its
// overhead).
func (st storedSetting) size(name string) int {
	if st.Set.IsZero() {
		return 0
	}
	if st.Secret {
		return len(name) + max(len(st.Sealed)-sealOverhead, 0)
	}
	return len(name) + len(st.Value)
}

// sealOverhead is what sealing adds: version, nonce, tag.
const sealOverhead = 1 + 12 + 16

func (rec *settingsRecord) size() int {
	n := 0
	for name, st := range rec.Values {
		n += st.size(name)
	}
	return n
}

// decodeSettings decodes a record, refusing a newer version.
func decodeSettings(b []byte) (*settingsRecord, error) {
	var rec settingsRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("a damaged settings record: %w", err)
	}
	if rec.V != settingsVersion {
		return nil, fmt.Errorf("a settings record of version %d; this node reads %d", rec.V, settingsVersion)
	}
	if rec.Values == nil {
		rec.Values = map[string]storedSetting{}
	}
	return &rec, nil
}

// get reads a function's record and its revision (0: none).
func (s *Settings) get(ctx context.Context, fn string) (*settingsRecord, uint64, error) {
	e, err := s.kv.Get(ctx, fn)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return &settingsRecord{V: settingsVersion, Values: map[string]storedSetting{}}, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("functions: read the settings of %q: %w", fn, err)
	}
	rec, err := decodeSettings(e.Value())
	if err != nil {
		return nil, 0, fmt.Errorf("functions: settings of %q: %w", fn, err)
	}
	return rec, e.Revision(), nil
}

// errSettingsRace is a compare-and-set lost to another writer.
var errSettingsRace = errors.New("the record changed")

func (s *Settings) put(ctx context.Context, fn string, rec *settingsRecord, rev uint64) (uint64, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return 0, err
	}
	if len(b) > maxSettingsRecord {
		return 0, engine.Errorf(engine.CodeRequestBodyTooLarge, "function %q's settings and secrets would be %d bytes as stored (JSON escapes some characters), more than %d", fn, len(b), maxSettingsRecord)
	}
	if rev == 0 {
		rev, err = s.kv.Create(ctx, fn, b) // also over a removed (deleted) key
	} else {
		rev, err = s.kv.Update(ctx, fn, b, rev)
	}
	return rev, settingsErr(fn, err)
}

func settingsErr(fn string, err error) error {
	var apiErr *jetstream.APIError
	if errors.Is(err, jetstream.ErrKeyExists) || (errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence) {
		return errSettingsRace
	}
	if err != nil {
		return fmt.Errorf("functions: write the settings of %q: %w", fn, err)
	}
	return nil
}

// watch calls fn with every function's record as it is now, then
// with each change (nil when removed, or unreadable: err says why), with
// the change's bucket revision, until ctx ends. ready is called once the
// present state has been delivered.
func (s *Settings) watch(ctx context.Context, fn func(name string, rec *settingsRecord, err error, rev uint64), ready func()) error {
	return watchKV(ctx, s.kv, "settings", func(e jetstream.KeyValueEntry) {
		if e.Operation() != jetstream.KeyValuePut {
			fn(e.Key(), nil, nil, e.Revision())
			return
		}
		rec, err := decodeSettings(e.Value())
		fn(e.Key(), rec, err, e.Revision())
	}, ready)
}

// Resealed is what Reseal did.
type Resealed struct {
	// Resealed counts the secrets opened with the old key and sealed
	// again with the current one; Current those already sealed with the
	// current key.
	Resealed, Current int
	// Functions counts the functions whose records changed.
	Functions int
	// Unopened names ("<function>/<NAME>") the secrets neither key opens:
	// left as they were, to be set again.
	Unopened []string
}

// Reseal seals again with this node's key every secret sealed with
// oldKey (SecretsKey of the node user's previous password), so that a
// change of that password does not lose them. Each function's record
// changes by one compare-and-set; a secret set meanwhile is left to its
// setter. Running it again changes nothing.
func (s *Settings) Reseal(ctx context.Context, oldKey []byte) (Resealed, error) {
	var done Resealed
	if s.seal == nil {
		return done, ErrNoSecretsKey
	}
	old, err := newSealer(oldKey)
	if err != nil {
		return done, engine.Errorf(engine.CodeInvalidInput, "the previous password gives no key: %v", err)
	}
	lister, err := s.kv.ListKeys(ctx)
	if err != nil {
		return done, fmt.Errorf("functions: list the settings: %w", err)
	}
	var fns []string
	for k := range lister.Keys() {
		fns = append(fns, k)
	}
	if err := ctx.Err(); err != nil {
		return done, fmt.Errorf("functions: list the settings: %w", err)
	}
	slices.Sort(fns)
	for _, fn := range fns {
		n, err := s.resealOne(ctx, fn, old)
		if err != nil {
			return done, err
		}
		done.Resealed += n.Resealed
		done.Current += n.Current
		done.Unopened = append(done.Unopened, n.Unopened...)
		if n.Resealed > 0 {
			done.Functions++
		}
	}
	return done, nil
}

// resealOne reseals one function's secrets (Reseal).
func (s *Settings) resealOne(ctx context.Context, fn string, old *sealer) (Resealed, error) {
	for range maxSettingsTries {
		var done Resealed
		rec, rev, err := s.get(ctx, fn)
		if err != nil || rev == 0 {
			return done, err
		}
		names := slices.Sorted(maps.Keys(rec.Values))
		for _, name := range names {
			st := rec.Values[name]
			if !st.Secret {
				continue
			}
			if _, err := s.seal.open(fn, name, st.Sealed); err == nil {
				done.Current++
				continue
			}
			v, err := old.open(fn, name, st.Sealed)
			if err != nil {
				done.Unopened = append(done.Unopened, fn+"/"+name)
				continue
			}
			if st.Sealed, err = s.seal.seal(fn, name, v); err != nil {
				return done, fmt.Errorf("functions: seal a secret: %w", err)
			}
			rec.Values[name] = st
			done.Resealed++
		}
		if done.Resealed == 0 {
			return done, nil
		}
		_, err = s.put(ctx, fn, rec, rev)
		if errors.Is(err, errSettingsRace) {
			continue
		}
		return done, err
	}
	return Resealed{}, engine.Errorf(engine.CodeServerBusy, "function %q's settings changed %d times while its secrets were resealed: try again", fn, maxSettingsTries)
}
