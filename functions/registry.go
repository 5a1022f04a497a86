package functions

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
)

// Registry is where functions are deployed: each version's module in a
// JetStream object store, and each function's current manifest in a KV
// bucket (its history holds the earlier versions, for rollback). Every node
// watches the bucket and loads what it finds.
type Registry struct {
	kv  jetstream.KeyValue
	obj jetstream.ObjectStore
}

// Builtins are the names of the native functions every node runs; they
// cannot be deployed over.
var Builtins = []string{"archive", ValueScanName, ValueSweepName}

// history is how many versions of a function the registry keeps.
const history = 64

// OpenRegistry opens (creating if needed) the registry's buckets. With
// replicas 0 it only opens existing ones.
func OpenRegistry(ctx context.Context, js jetstream.JetStream, prefix string, replicas int) (*Registry, error) {
	manifests, modules := bucketName(prefix, "FUNCTIONS"), bucketName(prefix, "MODULES")
	if replicas == 0 {
		kv, err := js.KeyValue(ctx, manifests)
		if err != nil {
			return nil, fmt.Errorf("functions: registry %s: %w (has a Cairn node with prefix %q started on this NATS server?)", manifests, err, prefix)
		}
		obj, err := js.ObjectStore(ctx, modules)
		if err != nil {
			return nil, fmt.Errorf("functions: module store %s: %w", modules, err)
		}
		return &Registry{kv: kv, obj: obj}, nil
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      manifests,
		Description: "Cairn functions: the current manifest of each",
		History:     history,
		Replicas:    replicas,
		Storage:     jetstream.FileStorage,
	})
	if err != nil {
		return nil, fmt.Errorf("functions: registry bucket: %w", err)
	}
	obj, err := js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket:      modules,
		Description: "Cairn function modules",
		Replicas:    replicas,
		Storage:     jetstream.FileStorage,
	})
	if err != nil {
		return nil, fmt.Errorf("functions: module store: %w", err)
	}
	return &Registry{kv: kv, obj: obj}, nil
}

// ErrNotDeployed is returned for a function that is not deployed.
var ErrNotDeployed = errors.New("not deployed")

// Get returns a function's current manifest.
func (r *Registry) Get(ctx context.Context, name string) (Manifest, error) {
	e, err := r.kv.Get(ctx, name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Manifest{}, fmt.Errorf("function %q: %w", name, ErrNotDeployed)
	}
	if err != nil {
		return Manifest{}, err
	}
	var m Manifest
	if err := json.Unmarshal(e.Value(), &m); err != nil {
		return Manifest{}, fmt.Errorf("function %q: bad manifest in the registry: %w", name, err)
	}
	return m, nil
}

// fnState is what the registry holds of a function, read in one request
// (its key's history).
type fnState struct {
	hist []Manifest // the versions remembered, oldest first
	cur  Manifest   // the current one (zero when undeployed)
	rev  uint64     // the revision of the live key (0: none; Create then)
	last int        // the highest version ever, deployed now or not
}

func (r *Registry) state(ctx context.Context, name string) (fnState, error) {
	var st fnState
	entries, err := r.kv.History(ctx, name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	for _, e := range entries {
		var m Manifest
		if e.Operation() != jetstream.KeyValuePut || json.Unmarshal(e.Value(), &m) != nil {
			continue
		}
		st.hist = append(st.hist, m)
		st.last = max(st.last, m.Version)
	}
	if e := entries[len(entries)-1]; e.Operation() == jetstream.KeyValuePut {
		st.rev = e.Revision()
		if len(st.hist) > 0 {
			st.cur = st.hist[len(st.hist)-1]
		}
	}
	return st, nil
}

// Deploy stores a module and makes it the function's current version.
// The module must have been validated (see wasm.Runtime.Validate). Two
// deploys of one function racing are ordered by the bucket's revision
// check: the loser gets an error and may try again.
func (r *Registry) Deploy(ctx context.Context, m Manifest, module []byte) (Manifest, error) {
	if err := m.Validate(); err != nil {
		return m, err
	}
	if slices.Contains(Builtins, m.Name) {
		return m, fmt.Errorf("%q is a built-in function's name; choose another", m.Name)
	}
	if len(module) == 0 {
		return m, errors.New("the module is empty")
	}
	if q := m.Trigger.Queue; q != "" {
		// A queue feeds one function (JetStream refuses two consumers of
		// one subject of a work queue).
		if q == ArchiveManifest().Trigger.Queue {
			return m, fmt.Errorf("queue %q belongs to the built-in archive function; choose another", q)
		}
		others, err := r.List(ctx)
		if err != nil {
			return m, err
		}
		for _, o := range others {
			if o.Name != m.Name && o.Trigger.Queue == q {
				return m, fmt.Errorf("queue %q already feeds function %q: undeploy it first, or choose another queue", q, o.Name)
			}
		}
	}
	st, err := r.state(ctx, m.Name)
	if err != nil {
		return m, err
	}
	sum := sha256.Sum256(module)
	m.Version = st.last + 1
	m.Digest = hex.EncodeToString(sum[:])
	m.Size = int64(len(module))
	m.Module = fmt.Sprintf("%s/v%d-%s.wasm", m.Name, m.Version, m.Digest[:12])
	m.Deployed = time.Now().UTC().Truncate(time.Millisecond)
	m.Builtin = ""
	if _, err := r.obj.PutBytes(ctx, m.Module, module); err != nil {
		return m, fmt.Errorf("store the module: %w", err)
	}
	return m, r.put(ctx, m, st.rev)
}

// put writes a manifest if the key is still at revision rev (0: absent).
func (r *Registry) put(ctx context.Context, m Manifest, rev uint64) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if rev == 0 {
		_, err = r.kv.Create(ctx, m.Name, b) // also over an undeployed (deleted) key
	} else {
		_, err = r.kv.Update(ctx, m.Name, b, rev)
	}
	var apiErr *jetstream.APIError
	if errors.Is(err, jetstream.ErrKeyExists) || (errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence) {
		return fmt.Errorf("function %q was deployed by someone else at the same time; try again", m.Name)
	}
	if err != nil {
		return fmt.Errorf("register function %q: %w", m.Name, err)
	}
	return nil
}

// Module returns a version's module, checked against its digest.
func (r *Registry) Module(ctx context.Context, m Manifest) ([]byte, error) {
	b, err := r.obj.GetBytes(ctx, m.Module)
	if err != nil {
		return nil, fmt.Errorf("function %q version %d: module %s: %w", m.Name, m.Version, m.Module, err)
	}
	sum := sha256.Sum256(b)
	if hex.EncodeToString(sum[:]) != m.Digest {
		return nil, fmt.Errorf("function %q version %d: module %s does not match its digest", m.Name, m.Version, m.Module)
	}
	return b, nil
}

// List returns the deployed functions, by name.
func (r *Registry) List(ctx context.Context) ([]Manifest, error) {
	lister, err := r.kv.ListKeys(ctx)
	if err != nil {
		return nil, err
	}
	var out []Manifest
	for name := range lister.Keys() {
		m, err := r.Get(ctx, name)
		if errors.Is(err, ErrNotDeployed) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b Manifest) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// History returns the versions of a function the registry remembers,
// oldest first.
func (r *Registry) History(ctx context.Context, name string) ([]Manifest, error) {
	st, err := r.state(ctx, name)
	return st.hist, err
}

// Undeploy removes a function: every node stops it. Its queue keeps its
// messages; its versions stay in the history (a later deploy or rollback
// continues from them).
func (r *Registry) Undeploy(ctx context.Context, name string) error {
	if _, err := r.Get(ctx, name); err != nil {
		return err
	}
	return r.kv.Delete(ctx, name)
}

// Rollback makes an earlier version current again, as a new version with
// the old one's module and settings. version 0 means the one before the
// current.
func (r *Registry) Rollback(ctx context.Context, name string, version int) (Manifest, error) {
	st, err := r.state(ctx, name)
	if err != nil {
		return Manifest{}, err
	}
	var target *Manifest
	for i := len(st.hist) - 1; i >= 0; i-- {
		h := st.hist[i]
		if (version == 0 && h.Digest != st.cur.Digest && h.Version < st.cur.Version) || (version != 0 && h.Version == version) {
			target = &h
			break
		}
	}
	if target == nil {
		if version == 0 {
			return Manifest{}, engine.Errorf(engine.CodeInvalidInput, "function %q has no earlier version with another module to roll back to", name)
		}
		return Manifest{}, engine.Errorf(engine.CodeInvalidInput, "function %q has no version %d in its history", name, version)
	}
	m := *target
	m.Version = st.last + 1
	m.Deployed = time.Now().UTC().Truncate(time.Millisecond)
	return m, r.put(ctx, m, st.rev)
}

// Watch calls fn with every function's manifest as it is now, then with
// each change (nil when a function is undeployed), until ctx ends.
// ready is called once the present state has been delivered.
func (r *Registry) Watch(ctx context.Context, fn func(name string, m *Manifest), ready func()) error {
	return watchKV(ctx, r.kv, "registry", func(e jetstream.KeyValueEntry) {
		if e.Operation() != jetstream.KeyValuePut {
			fn(e.Key(), nil)
			return
		}
		var m Manifest
		if err := json.Unmarshal(e.Value(), &m); err != nil {
			return
		}
		fn(e.Key(), &m)
	}, ready)
}
