package main

import (
	"fmt"
	"io"
)

// usageText is what "host -h" and "host help" print: every subcommand in
// one line, and how the environment sets flags.
const usageText = `usage: host <command> [flags] [arguments]

Commands:
  serve          run a host: the embedded NATS server (or -nats-url), the HTTP API, the functions (the default command)
  init function  write a new function module into a directory, the guest SDK vendored (builds offline)
  deploy         build a function package to WebAssembly and deploy it; waits until every host runs it
  functions      list the deployed and built-in functions, see a function's history, undeploy, roll back
  poison         list, show, requeue or delete the messages a function failed on
  enqueue        send messages to a queue
  outbox         where the outbox relay stands; retry or skip a blocked message
  history        how much of its journal each table keeps; set a table's retention
  cluster        the hosts of the cluster, from their heartbeats: which are live
  projections    list, deploy, rebuild or drop declared indexes and aggregates
  nats-password  print the bcrypt hash of a NATS service user's password (-nats-users)
  version        print the version, revision and Go version of this binary (also -version)
  help           print this help; "host help <command>" is "host <command> -h"

"host <command> -h" prints a command's usage and flags; flags may come before
or after the arguments, and "--" ends them.

Environment: every flag of every command can also be set by a variable
CAIRN_<NAME>, the flag's name upper-cased with dashes turned into
underscores; a flag on the command line wins. For example:

  CAIRN_DATA=/var/lib/cairn host serve           # -data /var/lib/cairn
  CAIRN_NATS_URL=nats://10.0.0.1:4222 host serve # -nats-url …
  CAIRN_OPERATOR_TOKEN=… host serve              # keeps the token off the command line
  CAIRN_DATA=/var/lib/cairn host functions list  # the operator commands find the host's
                                                 # NATS URL and credentials in its data directory

The benchmarks are a binary of their own, cmd/cairn-bench.
`

func usage(w io.Writer) { fmt.Fprint(w, usageText) }

// serveUsage is the head of "host serve -h".
const serveUsage = `usage: host [serve] [flags]

Runs a host: an embedded NATS server with JetStream storing the journal under
-data (or the server of -nats-url), the HTTP API (Azure Tables protocol) on
-http, and the functions. Writes <data>/nats/node.user (the node's NATS
credentials), <data>/nats/url (its NATS client URL) and <data>/operator.token
on start, where the operator commands (deploy, functions, poison…) read them.
Exits 0 after SIGINT or SIGTERM once the commands it took are answered.

`

const deployUsage = `usage: host deploy [flags] <package directory | module.wasm>

Reaches the host (-data, or -nats-url), builds a Go function package to
WebAssembly (GOOS=wasip1 GOARCH=wasm -buildmode=c-shared; the go command must
be on PATH), checks it against the function ABI, deploys it, and waits until
every running host reports that it loaded the new version. Exits 1 at once
when no host answers (saying how to start one), naming the host that refused
it (and why), or the hosts that did not load it within -wait. The manifest is cairn.json in the package directory (or
<module>.json next to a .wasm file); the flags override it.

`

const functionsUsage = `usage: host functions [flags] list                 deployed functions, and the built-in ones
       host functions [flags] history <name>       every version of a function
       host functions [flags] undeploy <name>      stop running it (its queue keeps its messages)
       host functions [flags] rollback <name> [version]  deploy an earlier version's module again
       host functions [flags] settings <name> [list]      its settings and secrets (secrets by name only)
       host functions [flags] settings <name> set <NAME> [value]  set a setting (no value: stdin or -file)
       host functions [flags] secrets <name> set <NAME>   set a secret, its value read from stdin or -file
       host functions [flags] settings|secrets <name> remove <NAME>
       host functions [flags] keys <name>          its keys for HTTP routes: id, name, when made
       host functions [flags] keys <name> create [key-name]  a new key, printed this once
       host functions [flags] keys <name> revoke <id>        calls with it are refused at once
       host functions [flags] reseal-secrets  after the node user's password changed: seal every
                                   secret set under the previous password (stdin or -file) again

`

const poisonUsage = `usage: host poison [flags] list <queue>
       host poison [flags] show <queue> <seq>
       host poison [flags] requeue <queue> <seq|all>
       host poison [flags] delete <queue> <seq|all>

<queue> is the queue or its poison queue (orders or orders-poison).

`

const enqueueUsage = `usage: host enqueue [flags] <queue> <message>…

Sends each message to the queue; with no message, each non-blank line of
standard input. A message that starts with a dash follows "--".

`

const outboxUsage = `usage: host outbox [flags] status
       host outbox [flags] retry <table>                    try the table's blocked messages again now
       host outbox [flags] skip <table> <record> <index>    never send that one blocked message

<table> is the table's name ("Orders"; "contoso.Orders" for account contoso's).
<record> is the journal record's sequence and <index> the message's place among
all the messages of that record, counted from 0 across every command the record
holds (a record may commit several commands of one partition together): the
last two numbers of its Cairn-Outbox-Position header, <table>/<epoch>/<record>/<index>,
and what "status" shows as "record R message I". Only a message status shows
blocked may be skipped.

`

const clusterUsage = `usage: host cluster [flags]

Lists the hosts whose heartbeat the cluster's bucket holds, live ones first.
Every host puts one every 2 s; a host whose last is 10 s behind the newest
has left (it died: a host that stops cleanly removes its own at once).

`

const historyUsage = `usage: host history [flags] show [<table>]              how much of its journal each table keeps
       host history [flags] set <table> <retention>     all, a duration (7d, 36h) or a number of records (1000000);
                                                        default: the nodes' -history

<table> is the table's name ("Orders"; "contoso.Orders" for account contoso's).
The nodes prune a table's journal up to its newest shared snapshot, never
what the outbox has not relayed or the last 10 minutes (docs/OPERATIONS.md,
History).

`

const projectionsUsage = `usage: host projections [flags] list                 declared projections and each host's state
       host projections [flags] deploy <file.json>   declare one (or several: a JSON array), or a higher version
       host projections [flags] rebuild <name>       build it again on every host and swap
       host projections [flags] drop <name>          drop it

<name> is the projection's name ("EmployeesByEmail"; "contoso.EmployeesByEmail"
for account contoso's). See docs/PROJECTIONS.md for the file.

`
