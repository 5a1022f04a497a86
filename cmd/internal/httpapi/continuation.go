package httpapi

import (
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/projections/query"
)

// token is a query's continuation. Azure clients treat the two headers as
// opaque and send them back as NextPartitionKey and NextRowKey:
//
//	NextPartitionKey = "1!" + a|d + "!" + hold id + "!" + base64url(PartitionKey)
//	NextRowKey       = "1!" + base64url(RowKey)
//
// The keys are those of the first entity not yet returned; the hold id
// names the snapshot the earlier pages were read from; a|d is the order.
// A query as of a journal position (X-Cairn-As-Of) carries the position
// too, so that its later pages read the past even when its hold was
// released (or the client does not send the header again):
//
//	NextPartitionKey = "2!" + a|d + "!" + hold id + "!" + position + "!" + base64url(PartitionKey)
//
// (hold id and position in base 36).
type token struct {
	hold uint64
	desc bool
	asOf uint64 // the as-of position, 0 for a query of the present
	from query.Continuation
}

const (
	tokenVersion     = "1"
	asOfTokenVersion = "2"
)

var b64 = base64.RawURLEncoding

func (t token) format() (npk, nrk string) {
	dir := "a"
	if t.desc {
		dir = "d"
	}
	npk = tokenVersion + "!" + dir + "!" + strconv.FormatUint(t.hold, 36) + "!"
	if t.asOf != 0 {
		npk = asOfTokenVersion + npk[len(tokenVersion):] + strconv.FormatUint(t.asOf, 36) + "!"
	}
	npk += b64.EncodeToString([]byte(t.from.PartitionKey))
	nrk = tokenVersion + "!" + b64.EncodeToString([]byte(t.from.RowKey))
	return npk, nrk
}

func badToken(format string, args ...any) error {
	return engine.Errorf(codeInvalidContinuation, "the continuation token (NextPartitionKey, NextRowKey) "+format+": pass back the values of the x-ms-continuation-* headers unchanged", args...)
}

// parseToken parses the continuation a client sent back.
func parseToken(npk, nrk string) (token, error) {
	var t token
	parts := strings.Split(npk, "!")
	if !(len(parts) == 4 && parts[0] == tokenVersion || len(parts) == 5 && parts[0] == asOfTokenVersion) || (parts[1] != "a" && parts[1] != "d") {
		return t, badToken("is not one this host issued")
	}
	t.desc = parts[1] == "d"
	var err error
	if t.hold, err = strconv.ParseUint(parts[2], 36, 64); err != nil {
		return t, badToken("is damaged")
	}
	if len(parts) == 5 {
		if t.asOf, err = strconv.ParseUint(parts[3], 36, 64); err != nil || t.asOf == 0 {
			return t, badToken("is damaged")
		}
		parts = append(parts[:3], parts[4])
	}
	pk, err := b64.DecodeString(parts[3])
	if err != nil {
		return t, badToken("is damaged")
	}
	v, rk, ok := strings.Cut(nrk, "!")
	if !ok || v != tokenVersion {
		return t, badToken("has no valid NextRowKey")
	}
	r, err := b64.DecodeString(rk)
	if err != nil {
		return t, badToken("has a damaged NextRowKey")
	}
	t.from = query.Continuation{PartitionKey: string(pk), RowKey: string(r)}
	return t, nil
}
