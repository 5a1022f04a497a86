// Command dataseries is the data series and wide entities patterns of the
// Azure Table design guide, against a running host: table Activity,
// PartitionKey = employee id. Per day, one entity (hours_<day>) holds a
// series of 24 hourly counters H00 … H23, updated by Merge: a write names
// only the hour it changes. And a logical entity of 288 readings (M0000,
// M0005, … M2355: one per five minutes), more than the 252 properties an
// entity may have besides its keys and Timestamp, is spread over
// minutes_<day>_part1, _part2, …: written together by one batch, read
// together by one range query.
//
//	go run ./examples/dataseries seed                                   create Activity and employee 000123's hourly series of 20261127
//	go run ./examples/dataseries hours <employee> <day>                 the hourly series: one entity
//	go run ./examples/dataseries record <employee> <day> <hour> <count> merge one hour's counter, then read the series
//	go run ./examples/dataseries wide <employee> <day> [-parts 2]       write the day's 288 readings in that many entities, one batch
//	go run ./examples/dataseries read-wide <employee> <day>             read them back: one range query
//
// Writes go over NATS, reads over HTTP with the Azure SDK. It exits 1 with
// the node's coded error (TooManyProperties for wide -parts 1,
// ResourceNotFound for record on a day without a series, TableNotFound
// before seed) or a connection error when no node runs.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/examples/internal/demo"
)

func main() { demo.Main("dataseries", run) }

const (
	table = "Activity"
	// The seeded series.
	seedEmployee = "000123"
	seedDay      = "20261127"
	// readingStep is the interval of the wide entity's readings: 288 a
	// day, more than engine.MaxUserProperties.
	readingStep = 5 * time.Minute
	readingsDay = int(24 * time.Hour / readingStep)
)

func run(args []string) error {
	fs := demo.NewFlags("dataseries", "seed | hours <employee> <day> | record <employee> <day> <hour> <count> | wide <employee> <day> | read-wide <employee> <day>")
	var host demo.Host
	host.NATSFlags(fs, "the host's NATS server (seed, record, wide)")
	host.HTTPFlag(fs, "the host's HTTP API")
	parts := fs.Int("parts", 2, "wide: the physical entities to spread the day's readings over")
	cmd, rest, err := demo.Parse(fs, args, map[string]int{"seed": 0, "hours": 2, "record": 4, "wide": 2, "read-wide": 2})
	if err != nil {
		return err
	}
	if len(rest) >= 2 {
		if _, err := time.Parse("20060102", rest[1]); err != nil {
			return fmt.Errorf("day %q: want yyyymmdd", rest[1])
		}
	}
	ctx, cancel := demo.Context()
	defer cancel()
	t, err := host.Table(table)
	if err != nil {
		return err
	}
	switch cmd {
	case "hours":
		return hours(ctx, t, rest[0], rest[1], "")
	case "read-wide":
		return readWide(ctx, t, rest[0], rest[1])
	}
	nc, err := host.Connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	c := client.New(nc)
	switch cmd {
	case "seed":
		return seed(ctx, c)
	case "record":
		hour, err := strconv.Atoi(rest[2])
		if err != nil || hour < 0 || hour > 23 {
			return fmt.Errorf("hour %q: want 0 to 23", rest[2])
		}
		count, err := strconv.ParseInt(rest[3], 10, 32)
		if err != nil || count < 0 {
			return fmt.Errorf("count %q: want a whole number from 0", rest[3])
		}
		return record(ctx, c, t, rest[0], rest[1], hour, int32(count))
	default:
		return wide(ctx, c, t, rest[0], rest[1], *parts)
	}
}

// hourName is the property of an hour's counter: H00 … H23.
func hourName(h int) string { return fmt.Sprintf("H%02d", h) }

// hoursKey is the RowKey of a day's hourly series.
func hoursKey(day string) string { return "hours_" + day }

// seed creates Activity (if needed) and writes employee 000123's hourly
// series of 20261127: 24 properties, counts in working hours, 0 outside.
func seed(ctx context.Context, c *client.Client) error {
	if _, err := c.CreateTable(ctx, table); err != nil && engine.ErrorCode(err) != engine.CodeTableAlreadyExists {
		return err
	}
	props := make([]engine.Property, 24)
	for h := range props {
		n := 0
		if h >= 9 && h < 18 {
			n = 10 + (h*7)%13
		}
		props[h] = engine.Property{Name: hourName(h), Value: engine.Int32(int32(n))}
	}
	r, err := c.InsertOrReplace(ctx, table, engine.NewEntity(seedEmployee, hoursKey(seedDay), props...))
	if err != nil {
		return err
	}
	fmt.Printf("table %s: %s/%s with 24 hourly counters H00 to H23 (journal position %d)\n", table, seedEmployee, hoursKey(seedDay), r.Seq)
	return nil
}

// hours prints a day's hourly series, one entity read by its keys. pos,
// when not "", is a journal position the read waits for (a write's).
func hours(ctx context.Context, t *aztables.Client, employee, day, pos string) error {
	if pos != "" {
		ctx = runtime.WithHTTPHeader(ctx, http.Header{"X-Cairn-Position": {pos}})
	}
	resp, err := t.GetEntity(ctx, employee, hoursKey(day), nil)
	if err != nil {
		return err
	}
	props, err := properties(resp.Value)
	if err != nil {
		return err
	}
	fmt.Printf("%s %s/%s: %d properties\n", table, employee, hoursKey(day), len(props))
	for h := 0; h < 24; h += 6 {
		fmt.Printf("  %s-%s", hourName(h), hourName(h+5))
		for i := h; i < h+6; i++ {
			v, ok := props[hourName(i)]
			if !ok {
				fmt.Printf("  %4s", "-")
				continue
			}
			fmt.Printf("  %4d", v)
		}
		fmt.Println()
	}
	return nil
}

// properties returns an entity's numeric properties by name, leaving out
// its keys, Timestamp and metadata.
func properties(raw []byte) (map[string]int64, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for name, v := range m {
		if name == "PartitionKey" || name == "RowKey" || name == "Timestamp" || strings.Contains(name, "@") || strings.HasPrefix(name, "odata.") {
			continue
		}
		n, err := strconv.ParseInt(strings.Trim(string(v), `"`), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("property %s: %s is not a whole number", name, v)
		}
		out[name] = n
	}
	return out, nil
}

// record merges one hour's counter into the day's series: the Merge names
// only that property, so the other 23 are kept as they are (a Replace
// would drop them). It then reads the series at the Merge's position.
func record(ctx context.Context, c *client.Client, t *aztables.Client, employee, day string, hour int, count int32) error {
	e := engine.NewEntity(employee, hoursKey(day), engine.Property{Name: hourName(hour), Value: engine.Int32(count)})
	r, err := c.Merge(ctx, table, e, "*")
	if err != nil {
		return fmt.Errorf("%s/%s: %w", employee, hoursKey(day), err)
	}
	fmt.Printf("merged %s = %d into %s/%s (journal position %d)\n", hourName(hour), count, employee, hoursKey(day), r.Seq)
	return hours(ctx, t, employee, day, strconv.FormatUint(r.Seq, 10))
}

// readingName is the property of the reading at minute m of the day:
// M0000, M0005, … M2355.
func readingName(m int) string { return fmt.Sprintf("M%02d%02d", m/60, m%60) }

// reading is the fixed value of the i-th reading of a day.
func reading(i int) int32 { return int32((i * 37) % 100) }

// partKey is the RowKey of part p (from 1) of a day's readings.
func partKey(day string, p int) string { return fmt.Sprintf("minutes_%s_part%d", day, p) }

// wide writes a day's 288 readings spread over parts entities
// (minutes_<day>_part1, …), consecutive readings in each, all in one
// batch: they are stored together or not at all. The same batch deletes
// the parts of an earlier write with more parts, each under the ETag
// just read, so the parts never mix two writes. One part is one entity
// of 288 properties, which the host refuses (TooManyProperties).
func wide(ctx context.Context, c *client.Client, t *aztables.Client, employee, day string, parts int) error {
	if parts < 1 || parts > 9 {
		return fmt.Errorf("-parts %d: want 1 to 9", parts)
	}
	per := (readingsDay + parts - 1) / parts
	var ops []engine.Operation
	for p := 0; p < parts; p++ {
		var props []engine.Property
		for i := p * per; i < min((p+1)*per, readingsDay); i++ {
			props = append(props, engine.Property{Name: readingName(i * int(readingStep/time.Minute)), Value: engine.Int32(reading(i))})
		}
		ops = append(ops, engine.Operation{Op: engine.OpInsertOrReplace, Entity: engine.NewEntity(employee, partKey(day, p+1), props...)})
	}
	keys := demo.Where(partsFilter(employee, day))
	keys.Select = new("RowKey")
	old, err := demo.Query[part](ctx, t, keys)
	if err != nil {
		return err
	}
	for _, e := range old {
		if e.RowKey > partKey(day, parts) {
			ops = append(ops, engine.Operation{Op: engine.OpDelete, IfMatch: e.ETag, Entity: engine.NewEntity(employee, e.RowKey)})
		}
	}
	r, err := c.Batch(ctx, table, ops)
	if err != nil {
		return fmt.Errorf("%s/%s: %d readings in %s: %w", employee, partKey(day, 1), readingsDay, entities(parts), err)
	}
	fmt.Printf("%s/minutes_%s: %d readings in %s, one batch (journal position %d)", employee, day, readingsDay, entities(parts), r.Seq)
	if gone := len(ops) - parts; gone > 0 {
		fmt.Printf("; it deleted %s left by an earlier write", entities(gone))
	}
	fmt.Println()
	return nil
}

// partsFilter is the range of RowKeys of a day's parts: from
// minutes_<day>_part up to, not including, minutes_<day>_paru.
func partsFilter(employee, day string) string {
	from := "minutes_" + day + "_part"
	r := []rune(from)
	r[len(r)-1]++
	return "PartitionKey eq '" + strings.ReplaceAll(employee, "'", "''") + "' and RowKey ge '" + from + "' and RowKey lt '" + string(r) + "'"
}

// part is a physical entity of a logical one as read: its keys, its ETag
// and its JSON.
type part struct {
	RowKey string
	ETag   string `json:"odata.etag"`
	raw    []byte
}

// UnmarshalJSON reads a part's keys and ETag and keeps its JSON, for
// the readings.
func (p *part) UnmarshalJSON(raw []byte) error {
	type fields part // part's fields without this method
	if err := json.Unmarshal(raw, (*fields)(p)); err != nil {
		return err
	}
	p.raw = append([]byte(nil), raw...)
	return nil
}

// entities says how many entities there are.
func entities(n int) string {
	if n == 1 {
		return "one entity"
	}
	return strconv.Itoa(n) + " entities"
}

// readWide reads a day's readings back with one range query over the
// RowKeys of its parts, and joins them into the logical entity. A reading
// found in two parts is an error: the parts would not be of one write.
func readWide(ctx context.Context, t *aztables.Client, employee, day string) error {
	filter := partsFilter(employee, day)
	parts, err := demo.Query[part](ctx, t, demo.Where(filter))
	if err != nil {
		return err
	}
	fmt.Printf("%s where %s:\n", table, filter)
	all := map[string]int64{}
	for _, p := range parts {
		_, v, err := engine.ParseETag(p.ETag)
		if err != nil {
			return err
		}
		props, err := properties(p.raw)
		if err != nil {
			return err
		}
		first, last := "", ""
		for name, n := range props {
			if _, dup := all[name]; dup {
				return fmt.Errorf("%s/%s: reading %s is in two parts", employee, p.RowKey, name)
			}
			all[name] = n
			if first == "" || name < first {
				first = name
			}
			if name > last {
				last = name
			}
		}
		fmt.Printf("  %s  %d readings, %s to %s, written at position %d\n", p.RowKey, len(props), first, last, v.Seq)
	}
	if len(all) == 0 {
		return fmt.Errorf("%s: no readings of %s", employee, day)
	}
	var total, peak int64
	peakAt, missing := "", 0
	for i := 0; i < readingsDay; i++ {
		name := readingName(i * int(readingStep/time.Minute))
		n, ok := all[name]
		if !ok {
			missing++
			continue
		}
		total += n
		if peakAt == "" || n > peak {
			peak, peakAt = n, name
		}
	}
	fmt.Printf("%s on %s: %d readings, %d missing, total %d, highest %d at %s:%s\n", employee, day, len(all), missing, total, peak, peakAt[1:3], peakAt[3:])
	return nil
}
