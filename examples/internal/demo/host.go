package demo

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/engine"
)

// DevConnectionString is the connection string of the development account
// on a host on this machine with the default -http address: the default
// of -connection-string.
const DevConnectionString = "DefaultEndpointsProtocol=http;AccountName=" + engine.DevAccount +
	";AccountKey=" + engine.DevAccountKey +
	";TableEndpoint=http://127.0.0.1:10002/" + engine.DevAccount + ";"

// Host is where the host is, as the flags of an example say: its NATS
// server (commands and queues) and its HTTP API (the Azure Tables
// protocol). The zero Host has no flags; NATSFlags and HTTPFlag define
// them on the example's flag set.
type Host struct {
	natsURL, natsCreds string
	conn               string
}

// NATSFlags defines -nats-url (usage says what the example uses the
// server for) and -nats-creds.
func (h *Host) NATSFlags(fs *flag.FlagSet, usage string) {
	fs.StringVar(&h.natsURL, "nats-url", nats.DefaultURL, usage)
	fs.StringVar(&h.natsCreds, "nats-creds", "", "a NATS credentials file (none: the development user)")
}

// HTTPFlag defines -connection-string, by default DevConnectionString;
// usage says what the example uses it for.
func (h *Host) HTTPFlag(fs *flag.FlagSet, usage string) {
	fs.StringVar(&h.conn, "connection-string", DevConnectionString, usage)
}

// Connect connects to the host's NATS server, with the credentials file
// if -nats-creds names one. The caller closes the connection.
func (h *Host) Connect() (*nats.Conn, error) {
	var opts []nats.Option
	if h.natsCreds != "" {
		opts = append(opts, nats.UserCredentials(h.natsCreds))
	}
	return nats.Connect(h.natsURL, opts...)
}

// Tables is the Azure SDK's client of the host's HTTP API, signing its
// requests with the connection string's account key. It sends nothing
// yet: a host that is not listening fails the first request.
func (h *Host) Tables() (*aztables.ServiceClient, error) {
	return aztables.NewServiceClientFromConnectionString(h.conn, nil)
}

// Table is the Azure SDK's client of one table of the host's HTTP API.
func (h *Host) Table(name string) (*aztables.Client, error) {
	svc, err := h.Tables()
	if err != nil {
		return nil, err
	}
	return svc.NewClient(name), nil
}

// Account is the storage account a connection string names: its name,
// its key and its table endpoint without a trailing slash
// (http://127.0.0.1:10002/devstoreaccount1).
type Account struct {
	Name, Key, Endpoint string
}

// Account is the account of -connection-string.
func (h *Host) Account() (Account, error) { return ParseConnectionString(h.conn) }

// ParseConnectionString returns the account of a storage connection
// string; it is an error when it lacks AccountName, AccountKey or
// TableEndpoint.
func ParseConnectionString(conn string) (Account, error) {
	var a Account
	for _, part := range strings.Split(conn, ";") {
		k, v, _ := strings.Cut(part, "=")
		switch strings.TrimSpace(k) {
		case "AccountName":
			a.Name = v
		case "AccountKey":
			a.Key = v
		case "TableEndpoint":
			a.Endpoint = strings.TrimSuffix(v, "/")
		}
	}
	if a.Name == "" || a.Key == "" || a.Endpoint == "" {
		return Account{}, errors.New("the connection string needs AccountName, AccountKey and TableEndpoint")
	}
	return a, nil
}

// HostURL is the host's own address, the table endpoint without the
// account's path: where /metrics is.
func (a Account) HostURL() (string, error) {
	u, err := url.Parse(a.Endpoint)
	if err != nil {
		return "", fmt.Errorf("connection string: TableEndpoint: %w", err)
	}
	u.Path, u.RawQuery = "", ""
	return u.String(), nil
}
