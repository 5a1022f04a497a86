package pages

import (
	"time"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/projections"
	"github.com/cairn-dev/cairn/projections/query"
)

// Aggregates kept per shard. On a table whose shards are placed, an
// aggregate keeps one entity per group and source shard
// (projections.ShardRowKey). A read asks each host for its shards' groups,
// which it folds (foldLocal), without the filter: a filter on a count or
// a sum holds for the folded group only. Here the hosts' groups are
// merged and folded again, the filter applied, and the page cut at its
// limit (folded). A page resumes at a group's start, so no group is
// split between two pages.

// groupEnd is a RowKey above every projections.ShardRowKey: a descending
// walk from it reads all of a group's entities.
const groupEnd = "~"

// groupStart is where a read resumes to read the whole group pk.
func groupStart(pk string, descending bool) (string, string) {
	if descending {
		return pk, groupEnd
	}
	return pk, ""
}

// forFolding is what the hosts are asked for a folded read of q: every
// group of the partitions and range q reads, unfiltered.
func (q Query) forFolding() Query {
	h := q
	h.Filter = ""
	if q.Point != nil {
		pk := q.Point.PK
		h.Partition, h.Point = &pk, nil
	}
	return h
}

// foldLocal reads a page of an aggregate's groups from snap, each folded
// over the shards o keeps: at most o.Limit groups, none split.
func foldLocal(snap *projections.Snapshot, plan *query.Plan, o query.Options, def *projections.Definition) query.Page {
	limit := o.Limit
	if limit <= 0 || limit > query.MaxPage {
		limit = query.MaxPage
	}
	walk := o
	walk.Limit = query.MaxPage
	var out query.Page
	var parts []*engine.Entity
	resume := func(pk string) query.Page {
		out.More = true
		out.NextPartitionKey, out.NextRowKey = groupStart(pk, o.Descending)
		return out
	}
	for {
		pg := plan.Run(snap, walk)
		out.Examined += pg.Examined
		for _, e := range pg.Entities {
			if len(parts) > 0 && e.PartitionKey != parts[0].PartitionKey {
				out.Entities = append(out.Entities, def.Fold(parts))
				parts = parts[:0]
				if len(out.Entities) == limit {
					return resume(e.PartitionKey)
				}
			}
			parts = append(parts, e)
		}
		if !pg.More {
			if len(parts) > 0 {
				out.Entities = append(out.Entities, def.Fold(parts))
			}
			return out
		}
		if !o.Deadline.IsZero() && time.Now().After(o.Deadline) {
			if len(parts) > 0 {
				return resume(parts[0].PartitionKey) // read that group again
			}
			return resume(pg.NextPartitionKey)
		}
		walk.From = &query.Continuation{PartitionKey: pg.NextPartitionKey, RowKey: pg.NextRowKey}
	}
}

// folded merges the hosts' pages of folded groups, folds each group's
// entities (one per host) into one, keeps those filter matches (nil:
// all), at most q.Limit; a group the merge could not finish is where the
// page resumes.
func folded(results []Result, q Query, def *projections.Definition, filter query.Expr) Result {
	pages, seq := split(results)
	m := query.Merge(pages, query.MaxPage, q.Descending)
	limit := q.Limit
	if limit <= 0 || limit > query.MaxPage {
		limit = query.MaxPage
	}
	out := query.Page{Examined: m.Examined}
	for i := 0; i < len(m.Entities); {
		pk := m.Entities[i].PartitionKey
		j := i + 1
		for j < len(m.Entities) && m.Entities[j].PartitionKey == pk {
			j++
		}
		if m.More && m.NextPartitionKey == pk {
			break // some hosts' entity of the group is past the merge's cut
		}
		if len(out.Entities) == limit {
			out.More = true
			out.NextPartitionKey, out.NextRowKey = groupStart(pk, q.Descending)
			return Result{Page: out, Seq: seq}
		}
		if e := def.Fold(m.Entities[i:j]); filter == nil || filter.Match(e) {
			out.Entities = append(out.Entities, e)
		}
		i = j
	}
	if m.More {
		out.More = true
		out.NextPartitionKey, out.NextRowKey = groupStart(m.NextPartitionKey, q.Descending)
	}
	return Result{Page: out, Seq: seq}
}
