package journal

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"github.com/cairn-dev/cairn/engine"
)

// CatalogStreamName returns the name of the catalog stream.
func CatalogStreamName(prefix string) string { return strings.ToUpper(prefix) + "_CATALOG" }

// StreamName returns the name of a table incarnation's stream; table is
// its full name (engine.FullTableName). Stream names cannot hold a dot: an
// account's table "acme.Employees" has the stream CAIRN_T_acme_employees_7,
// which no table of the development account can have (its names hold no
// '_').
func StreamName(prefix, table string, epoch uint64) string {
	return TableStreamPrefix(prefix, table) + strconv.FormatUint(epoch, 10)
}

// TableStreamPrefix is how the stream of every incarnation of a table
// starts, before its epoch ("CAIRN_T_orders_"); with table "", how every
// table stream of the prefix starts ("CAIRN_T_").
func TableStreamPrefix(prefix, table string) string {
	if table == "" {
		return strings.ToUpper(prefix) + "_T_"
	}
	return strings.ToUpper(prefix) + "_T_" + strings.ReplaceAll(strings.ToLower(table), ".", "_") + "_"
}

// TableSubjects is the subject filter of every table's journal of a prefix.
func TableSubjects(prefix string) string { return prefix + ".j.>" }

// TableStream returns the name of a table incarnation's stream.
func (j *Journal) TableStream(table string, epoch uint64) string {
	return StreamName(j.cfg.Prefix, table, epoch)
}

func (j *Journal) catalogSubject(table string) string {
	return j.cfg.Prefix + ".catalog." + strings.ToLower(table)
}

func (j *Journal) tableSubjects(table string, epoch uint64) string {
	return j.cfg.Prefix + ".j." + strings.ToLower(table) + "." + strconv.FormatUint(epoch, 10) + ".>"
}

// PartitionSubject returns the subject of a partition's journal in a table
// incarnation cut into shards view shards (0: a table created before
// shards, whose subjects name none).
func (j *Journal) PartitionSubject(table string, epoch uint64, shards uint32, pk string) string {
	return string(appendPartitionToken([]byte(j.incarnationPrefix(table, epoch)), shards, pk))
}

// ShardSubjects returns the subject filter of one shard's partitions in a
// table incarnation cut into shards: "<prefix>.j.<table>.<epoch>.s<shard>.*".
func (j *Journal) ShardSubjects(table string, epoch uint64, shard uint32) string {
	return j.incarnationPrefix(table, epoch) + "s" + strconv.FormatUint(uint64(shard), 10) + ".*"
}

// incarnationPrefix is how every subject of a table incarnation starts,
// up to and with the dot after its epoch.
func (j *Journal) incarnationPrefix(table string, epoch uint64) string {
	return j.cfg.Prefix + ".j." + strings.ToLower(table) + "." + strconv.FormatUint(epoch, 10) + "."
}

// appendPartitionToken appends what follows the incarnation's prefix in a
// partition's subject: EncodePartition(pk), after "s<shard>." when the
// table has shards (engine.Shard). A shard's token is decimal and starts
// with "s", so it is never a partition's token (which starts with "k").
// Never change this: it names every journal ever written.
func appendPartitionToken(b []byte, shards uint32, pk string) []byte {
	if shards > 0 {
		b = append(b, 's')
		b = strconv.AppendUint(b, uint64(engine.Shard(pk, int(shards))), 10)
		b = append(b, '.')
	}
	b = append(b, 'k')
	return base64.RawURLEncoding.AppendEncode(b, []byte(pk))
}

// EncodePartition encodes a partition key as one subject token: "k" and the
// key's bytes in unpadded base64url. Subjects cannot carry '.', '*', '>',
// whitespace or an empty token; the alphabet [A-Za-z0-9_-] has none of them
// and the "k" keeps the empty key a token. Never change this encoding: it
// names every journal ever written.
func EncodePartition(pk string) string {
	return "k" + base64.RawURLEncoding.EncodeToString([]byte(pk))
}

// DecodePartition is the inverse of EncodePartition.
func DecodePartition(tok string) (string, error) {
	if !strings.HasPrefix(tok, "k") {
		return "", fmt.Errorf("journal: partition token %q lacks its prefix", tok)
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(tok[1:])
	if err != nil {
		return "", fmt.Errorf("journal: partition token %q: %w", tok, err)
	}
	return string(b), nil
}
