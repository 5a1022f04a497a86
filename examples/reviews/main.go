// Command reviews is the compound key pattern of the Azure Table design
// guide, against a running Cairn host: table EmployeeReviews,
// PartitionKey = department, RowKey = <employee id>_<year> (000123_2012),
// so all the reviews of one employee are one range query of one partition
// and one review is a point read.
//
//	go run ./examples/reviews seed [-n 12]                 create EmployeeReviews and write the reviews, one batch per employee
//	go run ./examples/reviews reviews <dept> <id>          an employee's reviews, oldest first: a RowKey range
//	go run ./examples/reviews review <dept> <id> <year>    one review: a point read
//	go run ./examples/reviews latest <dept> <id>           the latest review: the same range read from its end
//
// An id is a number written with six digits (3 and 000003 name the same
// employee), a year four, so that the keys sort as the numbers do. seed
// goes over NATS (engine/client), the reads over HTTP with the Azure
// SDK. It exits 1 with the node's coded error on stderr (ResourceNotFound
// for a review that does not exist, TableNotFound before seed).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/examples/internal/demo"
)

func main() { demo.Main("reviews", run) }

const table = "EmployeeReviews"

// The reviewer of each department, and the words of the ratings 1 to 5.
var (
	reviewers = map[string]string{"Sales": "Maria Garcia", "Marketing": "Tom Lee", "Engineering": "Priya Patel"}
	ratings   = []string{"", "below expectations", "partly met expectations", "met expectations", "exceeded expectations", "outstanding"}
)

// The seed's years: employee i has a review for each year from
// lastYear-1-i%5 to lastYear.
const lastYear = 2014

func run(args []string) error {
	fs := demo.NewFlags("reviews", "seed | reviews <dept> <id> | review <dept> <id> <year> | latest <dept> <id>")
	var host demo.Host
	host.NATSFlags(fs, "the host's NATS server (seed)")
	host.HTTPFlag(fs, "the host's HTTP API")
	n := fs.Int("n", 12, "seed: employees to write reviews of")
	cmd, rest, err := demo.Parse(fs, args, map[string]int{"seed": 0, "reviews": 2, "review": 3, "latest": 2})
	if err != nil {
		return err
	}
	ctx, cancel := demo.Context()
	defer cancel()
	if cmd == "seed" {
		nc, err := host.Connect()
		if err != nil {
			return err
		}
		defer nc.Close()
		return seed(ctx, client.New(nc), *n)
	}
	t, err := host.Table(table)
	if err != nil {
		return err
	}
	id, err := number(rest[1], 6, "an employee id")
	if err != nil {
		return err
	}
	switch cmd {
	case "reviews":
		return listReviews(ctx, t, rest[0], id)
	case "latest":
		return latestReview(ctx, t, rest[0], id)
	}
	year, err := number(rest[2], 4, "a year")
	if err != nil {
		return err
	}
	return showReview(ctx, t, rest[0], id, year)
}

// number writes s, a number of at most width digits, with exactly width
// digits: fixed-width keys sort as their numbers do (000009 before
// 000010, where 9 would sort after 10).
func number(s string, width int, what string) (string, error) {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || len(strconv.FormatUint(v, 10)) > width {
		return "", fmt.Errorf("%s is a number of at most %d digits, not %q", what, width, s)
	}
	return fmt.Sprintf("%0*d", width, v), nil
}

// rowKey is a review's compound key: the employee's id, "_", the year.
func rowKey(id, year string) string { return id + "_" + year }

// seed creates the table (if needed) and writes the reviews of n
// employees, those of one employee in one batch: they share a partition.
func seed(ctx context.Context, c *client.Client, n int) error {
	if _, err := c.CreateTable(ctx, table); err != nil && engine.ErrorCode(err) != engine.CodeTableAlreadyExists {
		return err
	}
	var seq uint64
	count := 0
	for i := 1; i <= n; i++ {
		dept, id := demo.Department(i), demo.EmployeeID(i)
		var ops []engine.Operation
		for year := lastYear - 1 - i%5; year <= lastYear; year++ {
			rating := 1 + (7*i+year)%5
			ops = append(ops, engine.Operation{Op: engine.OpInsertOrReplace, Entity: engine.NewEntity(dept, rowKey(id, strconv.Itoa(year)),
				engine.Property{Name: "Rating", Value: engine.Int32(int32(rating))},
				engine.Property{Name: "Summary", Value: engine.String(ratings[rating])},
				engine.Property{Name: "Reviewer", Value: engine.String(reviewers[dept])},
			)})
		}
		r, err := c.Batch(ctx, table, ops)
		if err != nil {
			return fmt.Errorf("reviews of %s/%s: %w", dept, id, err)
		}
		seq, count = r.Seq, count+len(ops)
	}
	fmt.Printf("table %s: %d reviews of %d employees, one batch per employee (journal position %d)\n", table, count, n, seq)
	return nil
}

// review is a review as the example reads it.
type review struct {
	PartitionKey, RowKey string
	Rating               int
	Summary, Reviewer    string
}

func (r review) String() string {
	return fmt.Sprintf("%s/%s: rating %d, %s (%s)", r.PartitionKey, r.RowKey, r.Rating, r.Summary, r.Reviewer)
}

// reviewsOf is the filter of an employee's reviews: the RowKeys from
// "<id>_" up to, not including, "<id>`" ('`' is the character after '_'),
// which are exactly the keys that start with "<id>_", in one partition.
// The host reads that key range of the partition and nothing else.
func reviewsOf(dept, id string) string {
	return fmt.Sprintf("PartitionKey eq %s and RowKey ge %s and RowKey lt %s", demo.Quote(dept), demo.Quote(id+"_"), demo.Quote(id+"`"))
}

// listReviews is the range query. The results come in key order, which
// the fixed-width year makes the order of the years.
func listReviews(ctx context.Context, t *aztables.Client, dept, id string) error {
	filter := reviewsOf(dept, id)
	fmt.Printf("%s where %s:\n", table, filter)
	tw := demo.Columns()
	count := 0
	err := demo.Each(ctx, t, demo.Where(filter), func(r review) error {
		fmt.Fprintf(tw, "  %s	%d	%s	%s\n", r.RowKey, r.Rating, r.Summary, r.Reviewer)
		count++
		return nil
	})
	if err != nil {
		return demo.Coded(err)
	}
	tw.Flush()
	fmt.Printf("  (%d)\n", count)
	return nil
}

// latestReview is the same range read from its end: Cairn's descending
// key order (X-Cairn-Order: desc) with $top 1, so the host reads one
// entity, and the year needs no inverting to put the latest first.
func latestReview(ctx context.Context, t *aztables.Client, dept, id string) error {
	filter, top := reviewsOf(dept, id), int32(1)
	ctx = runtime.WithHTTPHeader(ctx, http.Header{"X-Cairn-Order": {"desc"}})
	page, err := t.NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: &filter, Top: &top}).NextPage(ctx)
	if err != nil {
		return demo.Coded(err)
	}
	if len(page.Entities) == 0 {
		return fmt.Errorf("%s %s: employee %s has no reviews", table, dept, id)
	}
	var r review
	if err := json.Unmarshal(page.Entities[0], &r); err != nil {
		return err
	}
	fmt.Printf("%s, latest first, $top 1: %s\n", table, r)
	return nil
}

// showReview is the point read of one review by its two keys.
func showReview(ctx context.Context, t *aztables.Client, dept, id, year string) error {
	rk := rowKey(id, year)
	resp, err := t.GetEntity(ctx, dept, rk, nil)
	if err != nil {
		return fmt.Errorf("%s %s/%s: %w", table, dept, rk, demo.Coded(err))
	}
	var r review
	if err := json.Unmarshal(resp.Value, &r); err != nil {
		return err
	}
	fmt.Printf("%s %s\n", table, r)
	return nil
}
