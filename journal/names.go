package journal

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
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

// PartitionSubject returns the subject of a partition's journal.
func (j *Journal) PartitionSubject(table string, epoch uint64, pk string) string {
	return j.cfg.Prefix + ".j." + strings.ToLower(table) + "." + strconv.FormatUint(epoch, 10) + "." + EncodePartition(pk)
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
