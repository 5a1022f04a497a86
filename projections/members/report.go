package members

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// DefaultBeat and DefaultTTL are a node's heartbeat period and how old
// its last heartbeat gets, against the newest of any host, before it has
// left.
const (
	DefaultBeat = 2 * time.Second
	DefaultTTL  = 10 * time.Second
)

// Host is a host's last heartbeat as the bucket holds it.
type Host struct {
	Key, Name string
	Beat      time.Time     // when the server stored it
	Behind    time.Duration // how much older it is than the newest heartbeat
	Live      bool          // Behind < DefaultTTL
}

// isLive is the rule of who is live: a host whose last heartbeat is less
// than ttl older than the newest of any host's (both the server's times).
func isLive(newest, beat time.Time, ttl time.Duration) bool { return newest.Sub(beat) < ttl }

// Hosts reads every heartbeat of the bucket of prefix (through one watch
// of the keys' values, which ends at the last), live hosts first, each
// group by name: what the operators' "host cluster" shows. A host that
// stopped cleanly has no key; one that died keeps its key for an hour,
// not live.
func Hosts(ctx context.Context, js jetstream.JetStream, prefix string) ([]Host, error) {
	kv, err := js.KeyValue(ctx, BucketName(prefix))
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("members: no bucket %s: no node of this version has run on this server", BucketName(prefix))
	}
	if err != nil {
		return nil, err
	}
	w, err := kv.Watch(ctx, keyPrefix+"*", jetstream.IgnoreDeletes())
	if err != nil {
		return nil, err
	}
	defer func() { _ = w.Stop() }()
	var hosts []Host
	var newest time.Time
	for e := range w.Updates() {
		if e == nil {
			break // every key's value is in
		}
		hosts = append(hosts, Host{Key: strings.TrimPrefix(e.Key(), keyPrefix), Name: string(e.Value()), Beat: e.Created()})
		if e.Created().After(newest) {
			newest = e.Created()
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for i := range hosts {
		hosts[i].Behind = newest.Sub(hosts[i].Beat)
		hosts[i].Live = isLive(newest, hosts[i].Beat, DefaultTTL)
	}
	slices.SortFunc(hosts, func(a, b Host) int {
		if a.Live != b.Live {
			if a.Live {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Key, b.Key))
	})
	return hosts, nil
}
