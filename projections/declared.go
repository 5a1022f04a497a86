package projections

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/cairn-dev/cairn/engine"
)

// Kinds of declared projections.
const (
	KindIndex     = "index"     // one entity per source entity, keyed by properties
	KindAggregate = "aggregate" // one entity per group: count, sum, min, max
)

// Aggregate operations.
const (
	OpCount = "count"
	OpSum   = "sum"
	OpMin   = "min"
	OpMax   = "max"
)

// Definition declares a projection: a read-only table derived from a
// source table's journal, kept exact by every node's view of the source
// (it changes in the same step as the source, at the same journal
// position). It is the manifest operators deploy (JSON).
type Definition struct {
	// Name is the projection's table name (a valid table name, unique
	// among the account's tables and projections).
	Name string `json:"name"`
	// Account owns both the projection and its source (empty: the
	// development account).
	Account string `json:"account,omitempty"`
	// Version orders definitions of one name: a new definition must carry
	// a higher version, and it replaces the old one by an online rebuild.
	Version uint64 `json:"version"`
	// Source is the table it is derived from, as the account names it.
	Source string `json:"source"`
	// Kind is "index" or "aggregate".
	Kind string `json:"kind"`

	// Index: the properties whose values, joined by Separator, are an
	// index entity's PartitionKey (PartitionKey and RowKey name the
	// source's keys). A source entity without one of them is not indexed.
	Key []string `json:"key,omitempty"`
	// Separator joins the values of Key ("|" when empty).
	Separator string `json:"separator,omitempty"`
	// Prefix, if above 0, keeps only the first Prefix characters of the
	// joined key (an index by initial letter, by year…).
	Prefix int `json:"prefix,omitempty"`
	// Include names the source properties an index entity carries besides
	// SourcePartitionKey and SourceRowKey (a covering index); ["*"] carries
	// them all.
	Include []string `json:"include,omitempty"`

	// Aggregate: the grouping, "PartitionKey" or a property name; empty
	// puts the whole table in one group (PartitionKey "").
	GroupBy string `json:"groupBy,omitempty"`
	// Aggregates are the group entity's properties.
	Aggregates []Aggregate `json:"aggregates,omitempty"`

	// Generation is bumped by a rebuild request: the same definition is
	// built again and swapped in, as for a new version.
	Generation uint64 `json:"generation,omitempty"`
}

// Aggregate is one property of an aggregate projection's entities.
type Aggregate struct {
	// Op is count, sum, min or max.
	Op string `json:"op"`
	// Property is the source property (not for count, which counts the
	// group's entities).
	Property string `json:"property,omitempty"`
	// As names the group entity's property.
	As string `json:"as"`
}

// Limits of a definition.
const (
	MaxProjectionKeys       = 8
	MaxProjectionAggregates = 32
	MaxProjectionIncludes   = 64
	MaxProjectionsPerTable  = 16
)

// Full returns the projection's full name (engine.FullTableName).
func (d *Definition) Full() string { return engine.FullTableName(d.account(), d.Name) }

// FullSource returns the source table's full name.
func (d *Definition) FullSource() string { return engine.FullTableName(d.account(), d.Source) }

func (d *Definition) account() string {
	if d.Account == "" {
		return engine.DevAccount
	}
	return d.Account
}

// Same reports whether o declares the same projection content as d (its
// generation aside): a deploy of the same version must carry it. They are
// compared in their stored form, JSON, where an empty list and none are
// the same.
func (d *Definition) Same(o *Definition) bool {
	a, b := *d, *o
	a.Generation, b.Generation = 0, 0
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// Validate checks a definition; every error is coded InvalidInput and
// names what is wrong.
func (d *Definition) Validate() error {
	bad := func(format string, args ...any) error {
		return engine.Errorf(engine.CodeInvalidInput, "projection %q: "+format, append([]any{d.Name}, args...)...)
	}
	if err := engine.ValidateTableName(d.Name); err != nil {
		return bad("name: %v", err)
	}
	if d.Account != "" && d.Account != engine.DevAccount {
		if err := engine.ValidateAccountName(d.Account); err != nil {
			return bad("account: %v", err)
		}
	}
	if err := engine.ValidateTableName(d.Source); err != nil {
		return bad("source: %v", err)
	}
	if strings.EqualFold(d.Name, d.Source) {
		return bad("it cannot be its own source")
	}
	if d.Version == 0 {
		return bad("version must be 1 or more")
	}
	prop := func(what, name string, keys bool) error {
		if name == "PartitionKey" || name == "RowKey" {
			if keys {
				return nil
			}
			return bad("%s %q: the source's keys are in every index entity already", what, name)
		}
		if err := validPropertyName(name); err != nil {
			return bad("%s: %v", what, err)
		}
		return nil
	}
	switch d.Kind {
	case KindIndex:
		if len(d.Key) == 0 || len(d.Key) > MaxProjectionKeys {
			return bad("an index needs 1 to %d key properties, not %d", MaxProjectionKeys, len(d.Key))
		}
		for _, k := range d.Key {
			if err := prop("key", k, true); err != nil {
				return err
			}
		}
		if d.Separator != "" {
			if err := engine.ValidateKey("separator", d.Separator); err != nil || utf8.RuneCountInString(d.Separator) > 4 {
				return bad("separator %q must be 1 to 4 characters allowed in a key", d.Separator)
			}
		}
		if d.Prefix < 0 {
			return bad("prefix must be 0 (the whole key) or more")
		}
		if len(d.Include) > MaxProjectionIncludes {
			return bad("at most %d included properties", MaxProjectionIncludes)
		}
		for _, p := range d.Include {
			if p == "*" && len(d.Include) == 1 {
				continue
			}
			if err := prop("include", p, false); err != nil {
				return err
			}
			if p == "SourcePartitionKey" || p == "SourceRowKey" {
				return bad("include %q: every index entity carries it", p)
			}
		}
		if d.GroupBy != "" || len(d.Aggregates) > 0 {
			return bad("groupBy and aggregates belong to an aggregate")
		}
	case KindAggregate:
		if d.GroupBy != "" {
			if err := prop("groupBy", d.GroupBy, true); err != nil {
				return err
			}
			if d.GroupBy == "RowKey" {
				return bad("groupBy RowKey makes a group per entity; use an index")
			}
		}
		if len(d.Aggregates) == 0 || len(d.Aggregates) > MaxProjectionAggregates {
			return bad("an aggregate needs 1 to %d aggregates, not %d", MaxProjectionAggregates, len(d.Aggregates))
		}
		seen := map[string]bool{}
		for i, a := range d.Aggregates {
			switch a.Op {
			case OpCount:
				if a.Property != "" {
					return bad("aggregate %d: count counts the group's entities and takes no property", i)
				}
			case OpSum, OpMin, OpMax:
				if err := prop(fmt.Sprintf("aggregate %d property", i), a.Property, false); err != nil {
					return err
				}
			default:
				return bad("aggregate %d: op %q is not count, sum, min or max", i, a.Op)
			}
			if err := validPropertyName(a.As); err != nil {
				return bad("aggregate %d as: %v", i, err)
			}
			if seen[a.As] {
				return bad("aggregate %d: property %q is named twice", i, a.As)
			}
			seen[a.As] = true
		}
		if len(d.Key) > 0 || len(d.Include) > 0 || d.Prefix != 0 || d.Separator != "" {
			return bad("key, include, prefix and separator belong to an index")
		}
	case "":
		return bad("kind is missing (index or aggregate)")
	default:
		return bad("kind %q is not index or aggregate", d.Kind)
	}
	return nil
}

// validPropertyName checks a property name by the write model's rules.
func validPropertyName(name string) error {
	return engine.ValidateProperties([]engine.Property{{Name: name, Value: engine.String("")}})
}
