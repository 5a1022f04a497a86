package node

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/projections"
	"github.com/cairn-dev/cairn/projections/members"
)

// ClusterPath is the operators' view of the cluster from this host: the
// hosts by their heartbeats, what this host's views hold, and the moves
// under way here (docs/SCALE.md). The console's Cluster page reads it.
const ClusterPath = "/$cairn/cluster"

// clusterHost is one host as the report shows it.
type clusterHost struct {
	Name string `json:"name"`
	Key  string `json:"key"`
	Live bool   `json:"live"`
	// HeartbeatBehind is how much older its last heartbeat is than the
	// newest of any host's.
	HeartbeatBehind string `json:"heartbeatBehind"`
	Self            bool   `json:"self,omitempty"`
}

// clusterReport is the answer of GET ClusterPath.
type clusterReport struct {
	Self string `json:"self"`
	// ViewReplicas is how many hosts hold each shard (0: every host holds
	// every table whole).
	ViewReplicas int                   `json:"viewReplicas"`
	Hosts        []clusterHost         `json:"hosts"`
	Holdings     []projections.Holding `json:"holdings"`
	Moves        []projections.Move    `json:"moves"`
}

// clusterHandler answers GET ClusterPath.
func (n *Node) clusterHandler(self string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reply := func(status int, v any) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_ = json.NewEncoder(w).Encode(v)
		}
		if r.URL.Path != ClusterPath || r.Method != http.MethodGet {
			reply(http.StatusNotFound, map[string]string{"code": "ResourceNotFound", "error": "GET " + ClusterPath})
			return
		}
		js, err := jetstream.New(n.nc)
		var hosts []members.Host
		if err == nil {
			hosts, err = members.Hosts(r.Context(), js, n.cfg.Prefix)
		}
		if err != nil {
			reply(http.StatusServiceUnavailable, map[string]string{"code": "ServerBusy", "error": "the cluster's heartbeats: " + err.Error()})
			return
		}
		rep := clusterReport{Self: self, ViewReplicas: n.cfg.ViewReplicas, Hosts: []clusterHost{},
			Holdings: n.views.Holdings(), Moves: n.views.Moves()}
		for _, h := range hosts {
			rep.Hosts = append(rep.Hosts, clusterHost{Name: h.Name, Key: h.Key, Live: h.Live,
				HeartbeatBehind: h.Behind.Round(100 * time.Millisecond).String(), Self: h.Key == nodeKey(self)})
		}
		if rep.Holdings == nil {
			rep.Holdings = []projections.Holding{}
		}
		if rep.Moves == nil {
			rep.Moves = []projections.Move{}
		}
		reply(http.StatusOK, rep)
	})
}
