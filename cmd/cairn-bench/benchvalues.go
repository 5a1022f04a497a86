package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/cairn-dev/cairn/cmd/internal/cli"
	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
)

// benchValues measures large values (docs/VALUES.md) through both doors:
// an upload (PUT …/$value; PutValue over NATS) and a download (GET
// …/$value/Photo; OpenValue) of -size bytes, each beside the same bytes
// put into and read from an object store bucket of the same kind (file
// storage, one replica) over the node's own in-process connection, in
// the same round: the floor, what the store costs with no door and no
// Cairn code. Rounds rotate which of the three goes first. Another row
// moves the entity holding the value with the built-in archive, which
// copies the value under the entity's keys in another table
// (docs/VALUES.md), beside the same bytes read from the floor's bucket
// and put into it again under another name.
func benchValues(args []string) error {
	fs := flag.NewFlagSet("values", flag.ContinueOnError)
	size := fs.Int64("size", 64<<20, "bytes of the value")
	rounds := fs.Int("rounds", 3, "rounds; the medians are reported")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if *size <= 0 {
		return fmt.Errorf("-size must be above 0, not %d", *size)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b, stop, err := startBenchNode(ctx, *cpuprofile)
	if err != nil {
		return err
	}
	defer stop()
	base := b.h.HTTPURL() + "/" + httpapi.DevAccountName
	hc := &http.Client{Timeout: 10 * time.Minute}
	table := "BenchValues" + strings.ToLower(nuid.Next()[:8])
	archive := table + "archive"
	for _, t := range []string{table, archive} {
		if err := signedDo(ctx, hc, "POST", base, "/Tables", strings.NewReader(`{"TableName":"`+t+`"}`), nil, http.StatusCreated); err != nil {
			return fmt.Errorf("create table: %w", err)
		}
	}
	bucket := "BENCHVALUES" + nuid.Next()
	floor, err := b.js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: bucket, Storage: jetstream.FileStorage})
	if err != nil {
		return fmt.Errorf("floor bucket: %w", err)
	}
	defer func() { _ = b.js.DeleteObjectStore(context.Background(), bucket) }()

	dev, err := nats.Connect(b.h.ClientURL()) // a development client, as the HTTP side is
	if err != nil {
		return err
	}
	defer dev.Close()
	nc := client.New(dev, client.WithTimeout(time.Minute))

	value := make([]byte, *size)
	_, _ = rand.Read(value)
	mbps := func(d time.Duration) float64 { return float64(*size) / d.Seconds() / (1 << 20) }
	var up, down, natsUp, natsDown, moved, floorUp, floorDown, floorCopy []float64
	var floorFailed string
	for r := 0; r < *rounds; r++ {
		cairn := func() error {
			entity := fmt.Sprintf("/%s(PartitionKey='p',RowKey='r%d')", table, r)
			start := time.Now()
			var ref struct{ Reference string }
			if err := signedDo(ctx, hc, "PUT", base, entity+"/$value", bytes.NewReader(value), &ref, http.StatusCreated); err != nil {
				return fmt.Errorf("upload: %w", err)
			}
			up = append(up, mbps(time.Since(start)))
			body := fmt.Sprintf(`{"PartitionKey":"p","RowKey":"r%d","Photo":%q}`, r, ref.Reference)
			if err := signedDo(ctx, hc, "POST", base, "/"+table, strings.NewReader(body), nil, http.StatusCreated); err != nil {
				return fmt.Errorf("insert: %w", err)
			}
			start = time.Now()
			got := &countingHash{h: sha256.New()}
			if err := signedDo(ctx, hc, "GET", base, entity+"/$value/Photo", nil, got, http.StatusOK); err != nil {
				return fmt.Errorf("download: %w", err)
			}
			down = append(down, mbps(time.Since(start)))
			if err := got.check(value); err != nil {
				return err
			}
			start = time.Now()
			if err := archiveAndWait(ctx, b, hc, base, table, archive, fmt.Sprintf("r%d", r)); err != nil {
				return err
			}
			moved = append(moved, mbps(time.Since(start)))
			got = &countingHash{h: sha256.New()}
			if err := signedDo(ctx, hc, "GET", base, "/"+archive+fmt.Sprintf("(PartitionKey='p',RowKey='r%d')", r)+"/$value/Photo", nil, got, http.StatusOK); err != nil {
				return fmt.Errorf("download of the archived copy: %w", err)
			}
			return got.check(value)
		}
		overNATS := func() error {
			rk := fmt.Sprintf("n%d", r)
			start := time.Now()
			in, err := nc.PutValue(ctx, table, "p", rk, bytes.NewReader(value))
			if err != nil {
				return fmt.Errorf("PutValue: %w", err)
			}
			natsUp = append(natsUp, mbps(time.Since(start)))
			if _, err := nc.Insert(ctx, table, engine.NewEntity("p", rk, engine.Property{Name: "Photo", Value: engine.String(in.Reference)})); err != nil {
				return fmt.Errorf("insert: %w", err)
			}
			start = time.Now()
			rc, _, err := nc.OpenValue(ctx, table, "p", rk, "Photo")
			if err != nil {
				return fmt.Errorf("OpenValue: %w", err)
			}
			got := &countingHash{h: sha256.New()}
			_, err = io.Copy(got, rc)
			rc.Close()
			if err != nil {
				return fmt.Errorf("OpenValue: %w", err)
			}
			natsDown = append(natsDown, mbps(time.Since(start)))
			return got.check(value)
		}
		raw := func() error {
			name := fmt.Sprintf("r%d", r)
			start := time.Now()
			if _, err := floor.Put(ctx, jetstream.ObjectMeta{Name: name}, bytes.NewReader(value)); err != nil {
				// The library's put sends up to 500 MiB unacknowledged and
				// the server refuses past its 128 MiB queue: a gigabyte
				// fails there (journal/values paces its puts). Say so and
				// go on without a floor.
				floorFailed = fmt.Sprintf("the object store's own put failed: %v", err)
				return nil
			}
			floorUp = append(floorUp, mbps(time.Since(start)))
			start = time.Now()
			rd, err := floor.Get(ctx, name)
			if err != nil {
				return fmt.Errorf("floor get: %w", err)
			}
			got := &countingHash{h: sha256.New()}
			_, err = io.Copy(got, rd)
			rd.Close()
			if err != nil {
				return fmt.Errorf("floor get: %w", err)
			}
			floorDown = append(floorDown, mbps(time.Since(start)))
			if err := got.check(value); err != nil {
				return err
			}
			start = time.Now()
			rd, err = floor.Get(ctx, name)
			if err != nil {
				return fmt.Errorf("floor copy: %w", err)
			}
			_, err = floor.Put(ctx, jetstream.ObjectMeta{Name: name + "-copy"}, rd)
			rd.Close()
			if err != nil {
				return fmt.Errorf("floor copy: %w", err)
			}
			floorCopy = append(floorCopy, mbps(time.Since(start)))
			return nil
		}
		order := []func() error{cairn, overNATS, raw}
		for i := range order {
			if err := order[(i+r)%len(order)](); err != nil {
				return err
			}
		}
	}
	fmt.Printf("# cairn bench values: GOMAXPROCS=%d, %s/%s, %s, %d bytes, rounds=%d (median)\n\n",
		runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, runtime.Version(), *size, *rounds)
	fmt.Println("| workload | Cairn | object store put/get in process, same run | ratio |")
	fmt.Println("|---|---|---|---|")
	for _, row := range []struct {
		what      string
		got, base []float64
	}{
		{"upload over HTTP", up, floorUp}, {"upload over NATS (PutValue)", natsUp, floorUp},
		{"download over HTTP", down, floorDown}, {"download over NATS (OpenValue)", natsDown, floorDown},
		{"archive of an entity holding it, the value copied (the floor: get piped into put)", moved, floorCopy},
	} {
		if len(row.base) == 0 {
			fmt.Printf("| %s, a large value (%d MiB) | %.0f MiB/s | none | |\n", row.what, *size>>20, median(row.got))
			continue
		}
		fmt.Printf("| %s, a large value (%d MiB) | %.0f MiB/s | %.0f MiB/s | %.2f |\n", row.what, *size>>20, median(row.got), median(row.base), median(row.got)/median(row.base))
	}
	if floorFailed != "" {
		fmt.Printf("\nNo floor in some rounds: %s\n", floorFailed)
	}
	return nil
}

// archiveAndWait asks the built-in archive to move the entity (p, rk) from
// table to archive, and waits until it is gone from table (its delete is
// the archive's last commit), polling every 5 ms.
func archiveAndWait(ctx context.Context, b *benchNode, hc *http.Client, base, table, archive, rk string) error {
	msg := fmt.Appendf(nil, `{"from":%q,"to":%q,"partitionKey":"p","rowKey":%q}`, table, archive, rk)
	if err := b.h.Functions().Queues().Enqueue(ctx, "archive", msg); err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	entity := fmt.Sprintf("/%s(PartitionKey='p',RowKey='%s')", table, rk)
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		if err := signedDo(ctx, hc, "GET", base, entity, nil, nil, http.StatusNotFound); err == nil {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return fmt.Errorf("archive: %s still in %s after 5 minutes", rk, table)
}

// countingHash hashes what is written to it, and counts it.
type countingHash struct {
	h interface {
		io.Writer
		Sum([]byte) []byte
	}
	n int64
}

func (c *countingHash) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return c.h.Write(p)
}

// check compares what was written with want.
func (c *countingHash) check(want []byte) error {
	sum := sha256.Sum256(want)
	if c.n != int64(len(want)) || !bytes.Equal(c.h.Sum(nil), sum[:]) {
		return fmt.Errorf("read %d bytes that differ from the %d written", c.n, len(want))
	}
	return nil
}

// signDev signs req for the development account as a Tables API client
// does, with scheme SharedKey (the method, the content type, the date and
// the resource) or SharedKeyLite (the date and the resource).
func signDev(req *http.Request, scheme string) {
	date := time.Now().UTC().Format(http.TimeFormat)
	req.Header.Set("x-ms-date", date)
	sts := date + "\n/" + httpapi.DevAccountName + req.URL.EscapedPath()
	if scheme == "SharedKey" {
		sts = req.Method + "\n\n" + req.Header.Get("Content-Type") + "\n" + sts
	}
	key, _ := base64.StdEncoding.DecodeString(httpapi.DevAccountKey)
	m := hmac.New(sha256.New, key)
	m.Write([]byte(sts))
	req.Header.Set("Authorization", scheme+" "+httpapi.DevAccountName+":"+base64.StdEncoding.EncodeToString(m.Sum(nil)))
}

// signedDo sends a request signed with SharedKeyLite and the development
// account's key to base+path and checks its status; into, when set, takes
// the body: an io.Writer streams it there, anything else decodes its JSON.
func signedDo(ctx context.Context, hc *http.Client, method, base, path string, body io.Reader, into any, status int) error {
	req, err := http.NewRequestWithContext(ctx, method, base+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("x-ms-version", "2019-02-02")
	req.Header.Set("Accept", "application/json;odata=nometadata")
	req.Header.Set("Content-Type", "application/json")
	signDev(req, "SharedKeyLite")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != status {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, msg)
	}
	switch into := into.(type) {
	case nil:
		_, err = io.Copy(io.Discard, resp.Body)
	case io.Writer:
		_, err = io.Copy(into, resp.Body)
	default:
		err = json.NewDecoder(resp.Body).Decode(into)
	}
	return err
}
