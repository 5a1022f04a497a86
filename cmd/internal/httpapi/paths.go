package httpapi

import (
	"strings"

	"github.com/cairn-dev/cairn/engine"
)

// keys names one entity.
type keys struct{ pk, rk string }

// parseTableRef parses "Tables('name')".
func parseTableRef(resource string) (string, error) {
	inner, ok := strings.CutPrefix(resource, "Tables(")
	if ok {
		inner, ok = strings.CutSuffix(inner, ")")
	}
	if !ok {
		return "", errInvalidURI("%q: want Tables('name')", resource)
	}
	name, rest, err := quoted(inner)
	if err != nil || rest != "" {
		return "", errInvalidURI("%q: want Tables('name')", resource)
	}
	return name, nil
}

// parseEntityPath parses "t", "t()" and "t(PartitionKey='p',RowKey='r')";
// keys is nil for the first two.
func parseEntityPath(resource string) (table string, k *keys, err error) {
	open := strings.IndexByte(resource, '(')
	if open < 0 {
		return resource, nil, checkTablePath(resource)
	}
	table = resource[:open]
	if err := checkTablePath(table); err != nil {
		return "", nil, err
	}
	args, ok := strings.CutSuffix(resource[open+1:], ")")
	if !ok {
		return "", nil, errInvalidURI("%q: the key list does not end with ')'", resource)
	}
	if args == "" {
		return table, nil, nil
	}
	k = &keys{}
	var seenPK, seenRK bool
	for args != "" {
		name, rest, ok := strings.Cut(args, "=")
		if !ok {
			return "", nil, errInvalidURI("%q: want (PartitionKey='…',RowKey='…')", resource)
		}
		v, rest, err := quoted(rest)
		if err != nil {
			return "", nil, errInvalidURI("%q: %v", resource, err)
		}
		switch strings.TrimSpace(name) {
		case "PartitionKey":
			k.pk, seenPK = v, true
		case "RowKey":
			k.rk, seenRK = v, true
		default:
			return "", nil, errInvalidURI("%q: unknown key %q", resource, name)
		}
		if rest, ok = strings.CutPrefix(rest, ","); !ok && rest != "" {
			return "", nil, errInvalidURI("%q: want ',' between the keys", resource)
		}
		args = rest
	}
	if !seenPK || !seenRK {
		return "", nil, errInvalidURI("%q: an entity needs both PartitionKey and RowKey", resource)
	}
	return table, k, nil
}

func checkTablePath(name string) error {
	if name == "" || strings.ContainsAny(name, "/()'") {
		return errInvalidURI("%q is not a table or entity path", name)
	}
	return nil
}

// quoted reads a '…' literal with ” for a quote from the start of s.
func quoted(s string) (v, rest string, err error) {
	s = strings.TrimLeft(s, " ")
	if !strings.HasPrefix(s, "'") {
		return "", "", engine.Errorf(codeInvalidURI, "a key must be quoted with '")
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		if s[i] != '\'' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == '\'' {
			b.WriteByte('\'')
			i++
			continue
		}
		return b.String(), strings.TrimLeft(s[i+1:], " "), nil
	}
	return "", "", engine.Errorf(codeInvalidURI, "a quoted key does not end")
}
