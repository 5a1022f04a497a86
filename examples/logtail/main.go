// Command logtail is the log-tail and per-day table patterns of the Azure
// Table design guide, against a running Cairn host over HTTP with the
// Azure SDK. Entries go to one table per day (Logs20261123),
// PartitionKey = the source ("web"), RowKey = the entry's time in UTC,
// fixed width, so the keys sort oldest first.
//
//	go run ./examples/logtail write [-count 1] [-day yyyymmdd] [message]   append entries
//	go run ./examples/logtail tail [-n 10] [-day yyyymmdd]                  the newest entries first
//	go run ./examples/logtail days                                          the days kept
//	go run ./examples/logtail drop-day <yyyymmdd>                           drop a day whole
//
// tail reads in descending key order (Cairn's X-Cairn-Order: desc), so
// the RowKeys need no inverted ticks; drop-day deletes the day's table,
// one request whatever it holds, instead of one delete per entity.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/examples/internal/demo"
)

func main() { demo.Main("logtail", run) }

const (
	tablePrefix = "Logs"
	dayLayout   = "20060102"
	// keyLayout is a RowKey: UTC, fixed width, so that the keys' order is
	// the times' order.
	keyLayout = "2006-01-02T15:04:05.000000000Z"
)

func run(args []string) error {
	fs := demo.NewFlags("logtail", "write [message] | tail | days | drop-day <yyyymmdd>")
	var host demo.Host
	host.HTTPFlag(fs, "the host's HTTP API")
	source := fs.String("source", "web", "write, tail: the source of the entries (their PartitionKey)")
	day := fs.String("day", "", "write, tail: the day, yyyymmdd (default: today, UTC)")
	count := fs.Int("count", 1, "write: entries to append")
	n := fs.Int("n", 10, "tail: entries to show")
	cmd, rest, err := demo.Parse(fs, args, map[string]int{"write": demo.Any, "tail": 0, "days": 0, "drop-day": 1})
	if err != nil {
		return err
	}
	if cmd == "write" && len(rest) > 1 {
		fs.Usage()
		return fmt.Errorf("write takes at most 1 argument (the message), not %d", len(rest))
	}
	date := time.Now().UTC()
	if *day != "" {
		d, err := parseDay(*day)
		if err != nil {
			return err
		}
		// That day, at the current time of day.
		date = d.Add(date.Sub(date.Truncate(24 * time.Hour)))
	}
	svc, err := host.Tables()
	if err != nil {
		return err
	}
	ctx, cancel := demo.Context()
	defer cancel()
	switch cmd {
	case "write":
		msg := "request %d"
		if len(rest) == 1 {
			msg = rest[0]
		}
		return write(ctx, svc, date, *source, msg, *count)
	case "tail":
		return tail(ctx, svc, tableOf(date), *source, *n)
	case "days":
		return days(ctx, svc)
	default:
		d, err := parseDay(rest[0])
		if err != nil {
			return err
		}
		name := tableOf(d)
		if _, err := svc.DeleteTable(ctx, name, nil); err != nil {
			return err
		}
		fmt.Printf("dropped %s: one request, however many entries it held\n", name)
		return nil
	}
}

func parseDay(s string) (time.Time, error) {
	d, err := time.Parse(dayLayout, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("day %q: want yyyymmdd", s)
	}
	return d, nil
}

// tableOf is the table of a day's entries.
func tableOf(t time.Time) string { return tablePrefix + t.UTC().Format(dayLayout) }

// write appends count entries to the day's table (created on its first
// entry), in one partition per source. An entry's RowKey is its time (for
// a day other than today, at's time of day, then a second apart); a second
// entry in the same nanosecond gets the next one, so keys are unique and
// in the order written.
func write(ctx context.Context, svc *aztables.ServiceClient, at time.Time, source, msg string, count int) error {
	name := tableOf(at)
	if _, err := svc.CreateTable(ctx, name, nil); err != nil && engine.ErrorCode(demo.Coded(err)) != engine.CodeTableAlreadyExists {
		return err
	}
	t := svc.NewClient(name)
	today := tableOf(time.Now()) == name
	var first, last time.Time
	for i := 1; i <= count; i++ {
		ts := at.Add(time.Duration(i-1) * time.Second) // another day: a second apart
		if today {
			ts = time.Now().UTC()
		}
		if !ts.After(last) {
			ts = last.Add(time.Nanosecond)
		}
		text := msg
		if strings.Contains(msg, "%d") {
			text = fmt.Sprintf(msg, i)
		}
		e, _ := json.Marshal(map[string]string{"PartitionKey": source, "RowKey": ts.Format(keyLayout), "Message": text})
		if _, err := t.AddEntity(ctx, e, nil); err != nil {
			return err
		}
		if i == 1 {
			first = ts
		}
		last = ts
	}
	fmt.Printf("%s/%s: %d entries, %s to %s\n", name, source, count, first.Format(keyLayout), last.Format(keyLayout))
	return nil
}

// tail prints the source's n newest entries, newest first: one query in
// descending key order with $top, so the host reads n entities from the
// end of the partition, however long the day's log is.
func tail(ctx context.Context, svc *aztables.ServiceClient, table, source string, n int) error {
	ctx = runtime.WithHTTPHeader(ctx, http.Header{"X-Cairn-Order": {"desc"}})
	filter := "PartitionKey eq " + demo.Quote(source)
	top := int32(min(n, 1000)) // a page holds at most 1,000
	pager := svc.NewClient(table).NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: &filter, Top: &top, Select: new("RowKey,Message")})
	shown := 0
	for first := true; shown < n && pager.More(); first = false {
		page, err := pager.NextPage(ctx)
		if engine.ErrorCode(demo.Coded(err)) == engine.CodeTableNotFound {
			return fmt.Errorf("no table %s: nothing written that day, or dropped", table)
		} else if err != nil {
			return err
		}
		if first {
			fmt.Printf("%s/%s, newest first:\n", table, source)
		}
		for _, raw := range page.Entities {
			var e struct{ RowKey, Message string }
			if err := json.Unmarshal(raw, &e); err != nil {
				return err
			}
			if shown < n {
				fmt.Printf("  %s  %s\n", e.RowKey, e.Message)
				shown++
			}
		}
	}
	if shown == 0 {
		fmt.Println("  (none)")
	}
	return nil
}

// days lists the days' tables.
func days(ctx context.Context, svc *aztables.ServiceClient) error {
	filter := "TableName ge '" + tablePrefix + "0' and TableName lt '" + tablePrefix + ":'" // Logs then a digit
	pager := svc.NewListTablesPager(&aztables.ListTablesOptions{Filter: &filter})
	n := 0
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return err
		}
		for _, t := range page.Tables {
			fmt.Println(*t.Name)
			n++
		}
	}
	fmt.Printf("(%d)\n", n)
	return nil
}
