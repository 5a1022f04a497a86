// Command largevalues is the large entities pattern of the Azure Table
// design guide, against a running Cairn host: an employee's photo is
// stored as a large value (docs/VALUES.md) and the employee's entity, in
// table EmployeeProfiles (PartitionKey = department, RowKey = employee
// id), holds its reference in the String property Photo.
//
//	go run ./examples/largevalues hire <dept> <id> <first> <last> [-photo file]   upload the photo, insert the employee with its reference, read the photo back and compare
//	go run ./examples/largevalues photo <dept> <id> [-o file]                     read the employee and download its photo
//	go run ./examples/largevalues new-photo <dept> <id> [-photo file]             upload a new photo and replace the reference; the old photo is swept later
//	go run ./examples/largevalues copy-photo <dept> <from> <to>                   copy one employee's reference to another: refused
//
// Without -photo a photo is made up: -size bytes (256 KiB, four times what
// a property may hold), the same for the same employee and command. The
// entity goes through the Azure SDK; the value, which the SDK has no call
// for, through net/http with the request signed with the account key
// (SharedKey, as the SDK signs). It exits 1 with the host's coded error on
// stderr.
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/examples/internal/demo"
)

func main() { demo.Main("largevalues", run) }

const (
	table = "EmployeeProfiles"
	// property holds the photo's reference.
	property = "Photo"
)

// The host's defaults that bound an unreferenced value's life
// (docs/VALUES.md): it is removed once older than the claim window plus
// the margin, by the first scan after that.
const (
	claimWindow = time.Hour
	sweepMargin = 5 * time.Minute
	scanEvery   = 10 * time.Minute
)

func run(args []string) error {
	fs := demo.NewFlags("largevalues", "hire <dept> <id> <first> <last> | photo <dept> <id> | new-photo <dept> <id> | copy-photo <dept> <from> <to>")
	var host demo.Host
	host.HTTPFlag(fs, "the account and the host's HTTP API")
	photoFile := fs.String("photo", "", "hire, new-photo: the photo's file (none: a made-up photo of -size bytes)")
	size := fs.Int("size", 256<<10, "hire, new-photo: the made-up photo's size in bytes")
	out := fs.String("o", "", "photo: write the photo to this file")
	cmd, rest, err := demo.Parse(fs, args, map[string]int{"hire": 4, "photo": 2, "new-photo": 2, "copy-photo": 3})
	if err != nil {
		return err
	}
	acct, err := host.Account()
	if err != nil {
		return err
	}
	t, err := host.Table(table)
	if err != nil {
		return err
	}
	ctx, cancel := demo.Context()
	defer cancel()
	p := profiles{acct: acct, t: t}
	load := func(version string) ([]byte, error) {
		if *photoFile != "" {
			return os.ReadFile(*photoFile)
		}
		return madeUpPhoto(rest[0]+"/"+rest[1]+"/"+version, *size), nil
	}
	switch cmd {
	case "hire":
		photo, err := load("1")
		if err != nil {
			return err
		}
		return p.hire(ctx, rest[0], rest[1], rest[2]+" "+rest[3], photo)
	case "photo":
		return p.photo(ctx, rest[0], rest[1], *out)
	case "new-photo":
		photo, err := load("2")
		if err != nil {
			return err
		}
		return p.newPhoto(ctx, rest[0], rest[1], photo)
	}
	return p.copyPhoto(ctx, rest[0], rest[1], rest[2])
}

// madeUpPhoto is n bytes that stand for a photo, the same for the same
// seed.
func madeUpPhoto(seed string, n int) []byte {
	var s [32]byte
	copy(s[:], seed)
	b := make([]byte, n)
	_, _ = rand.NewChaCha8(s).Read(b)
	return b
}

// profiles is the employees' table, through the Azure SDK, and their
// photos, through the host's $value requests.
type profiles struct {
	acct demo.Account
	t    *aztables.Client
}

// employee is an employee's entity as the example reads it.
type employee struct {
	PartitionKey, RowKey string
	Name                 string
	Photo                string
}

// digest is a value's size and the start of its SHA-256.
func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return fmt.Sprintf("%d bytes, sha256 %s", len(b), hex.EncodeToString(sum[:8]))
}

// hire creates the table if it does not exist (a value's table must),
// uploads the photo, inserts the employee with its reference, and reads
// the photo back through the entity.
func (p profiles) hire(ctx context.Context, dept, id, name string, photo []byte) error {
	if _, err := p.t.CreateTable(ctx, nil); err != nil && !tableExists(err) {
		return demo.Coded(err)
	}
	ref, err := p.upload(ctx, dept, id, photo)
	if err != nil {
		return err
	}
	fmt.Printf("%s %s/%s: photo uploaded, %s\n  reference %s\n", table, dept, id, digest(photo), ref)
	e, _ := json.Marshal(employee{PartitionKey: dept, RowKey: id, Name: name, Photo: ref})
	if _, err := p.t.AddEntity(ctx, e, nil); err != nil {
		return fmt.Errorf("%s %s/%s: %w", table, dept, id, demo.Coded(err))
	}
	fmt.Printf("%s %s/%s: %s hired, %s = the reference\n", table, dept, id, name, property)
	got, _, err := p.download(ctx, dept, id)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, photo) {
		return fmt.Errorf("%s %s/%s: the photo read back (%s) is not the one uploaded (%s)", table, dept, id, digest(got), digest(photo))
	}
	fmt.Printf("read back through GET …/$value/%s: %s, the same as uploaded\n", property, digest(got))
	return nil
}

// photo reads the employee and downloads its photo.
func (p profiles) photo(ctx context.Context, dept, id, out string) error {
	e, _, err := p.get(ctx, dept, id)
	if err != nil {
		return err
	}
	b, ref, err := p.download(ctx, dept, id)
	if err != nil {
		return err
	}
	fmt.Printf("%s %s/%s: %s, %s %s\n  %s", table, dept, id, e.Name, property, ref, digest(b))
	if out != "" {
		if err := os.WriteFile(out, b, 0o644); err != nil {
			fmt.Println()
			return err
		}
		fmt.Printf(", written to %s", out)
	}
	fmt.Println()
	return nil
}

// newPhoto uploads a new photo and replaces the employee's reference, if
// the entity is still the one read (If-Match). Nothing removes the old
// photo here: the sweep does, once no entity holds it.
func (p profiles) newPhoto(ctx context.Context, dept, id string, photo []byte) error {
	old, etag, err := p.get(ctx, dept, id)
	if err != nil {
		return err
	}
	ref, err := p.upload(ctx, dept, id, photo)
	if err != nil {
		return err
	}
	fmt.Printf("%s %s/%s: new photo uploaded, %s\n  reference %s\n", table, dept, id, digest(photo), ref)
	e, _ := json.Marshal(map[string]string{"PartitionKey": dept, "RowKey": id, property: ref})
	if _, err := p.t.UpdateEntity(ctx, e, &aztables.UpdateEntityOptions{IfMatch: &etag, UpdateMode: aztables.UpdateModeMerge}); err != nil {
		return fmt.Errorf("%s %s/%s: %w", table, dept, id, demo.Coded(err))
	}
	fmt.Printf("%s %s/%s: %s now holds the new reference (merged, If-Match %s)\n", table, dept, id, property, etag)
	from, to := sweepWindow(old.Photo, time.Now())
	fmt.Printf("the old photo %s is held by no entity now:\n  values-sweep removes it between %s and %s UTC (its upload + claim window %v + margin %v, then the next scan, every %v: the host's defaults)\n",
		old.Photo, from.Format("15:04"), to.Format("15:04"), short(claimWindow), short(sweepMargin), short(scanEvery))
	return nil
}

// short writes a whole number of hours or minutes without its zeros
// (1h, 5m).
func short(d time.Duration) string {
	s := d.String() // 1h0m0s, 5m0s
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// sweepWindow is when the sweep removes a value no entity holds since
// now: the first scan once it is older than the claim window and the
// margin, at the host's defaults. The reference names its upload time.
func sweepWindow(ref string, now time.Time) (from, to time.Time) {
	uploaded := now
	if id, ok := strings.CutPrefix(ref, engine.ValueRefPrefix); ok {
		stamp, _, _ := strings.Cut(id, "-")
		if t, err := time.Parse("20060102T150405.000000000Z", stamp); err == nil {
			uploaded = t
		}
	}
	from = uploaded.Add(claimWindow + sweepMargin)
	if from.Before(now) {
		from = now
	}
	return from.UTC(), from.Add(scanEvery).UTC()
}

// copyPhoto writes one employee's reference into another's entity. The
// host refuses it: a reference names a value of the entity it was
// uploaded for, and no other.
func (p profiles) copyPhoto(ctx context.Context, dept, from, to string) error {
	src, _, err := p.get(ctx, dept, from)
	if err != nil {
		return err
	}
	fmt.Printf("copying %s/%s's %s %s into %s/%s\n", dept, from, property, src.Photo, dept, to)
	e, _ := json.Marshal(map[string]string{"PartitionKey": dept, "RowKey": to, property: src.Photo})
	if _, err := p.t.UpdateEntity(ctx, e, &aztables.UpdateEntityOptions{UpdateMode: aztables.UpdateModeMerge}); err != nil {
		return fmt.Errorf("%s %s/%s: refused, nothing written: %w", table, dept, to, demo.Coded(err))
	}
	return fmt.Errorf("%s %s/%s: the host took a reference copied from another employee", table, dept, to)
}

// get reads an employee and its ETag.
func (p profiles) get(ctx context.Context, dept, id string) (employee, azcore.ETag, error) {
	resp, err := p.t.GetEntity(ctx, dept, id, nil)
	if err != nil {
		return employee{}, "", fmt.Errorf("%s %s/%s: %w", table, dept, id, demo.Coded(err))
	}
	var e employee
	if err := json.Unmarshal(resp.Value, &e); err != nil {
		return employee{}, "", err
	}
	return e, resp.ETag, nil
}

// valueURL is the URL of an employee's values: …/EmployeeProfiles(PartitionKey='…',RowKey='…')/$value.
func (p profiles) valueURL(dept, id string) string {
	key := func(s string) string { return url.PathEscape("'" + strings.ReplaceAll(s, "'", "''") + "'") }
	return fmt.Sprintf("%s/%s(PartitionKey=%s,RowKey=%s)/$value", p.acct.Endpoint, table, key(dept), key(id))
}

// upload streams photo to the host as a value of the employee
// (PUT …/$value) and returns its reference.
func (p profiles) upload(ctx context.Context, dept, id string, photo []byte) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, p.valueURL(dept, id), bytes.NewReader(photo))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := p.send(req)
	if err != nil {
		return "", fmt.Errorf("%s %s/%s: upload: %w", table, dept, id, err)
	}
	defer resp.Body.Close()
	var v struct {
		Reference string `json:"reference"`
		Size      int64  `json:"size"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return "", fmt.Errorf("%s %s/%s: upload: the answer: %w", table, dept, id, err)
	}
	if v.Size != int64(len(photo)) {
		return "", fmt.Errorf("%s %s/%s: upload: %d bytes sent, the host stored %d", table, dept, id, len(photo), v.Size)
	}
	return v.Reference, nil
}

// download reads the value the employee's Photo refers to
// (GET …/$value/Photo) and the reference the host names.
func (p profiles) download(ctx context.Context, dept, id string) ([]byte, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.valueURL(dept, id)+"/"+property, nil)
	if err != nil {
		return nil, "", err
	}
	resp, err := p.send(req)
	if err != nil {
		return nil, "", fmt.Errorf("%s %s/%s: download: %w", table, dept, id, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, "", fmt.Errorf("%s %s/%s: download: %w", table, dept, id, err)
	}
	return b, resp.Header.Get("X-Cairn-Value"), nil
}

// send signs and sends req; a refusal is the host's coded error.
func (p profiles) send(req *http.Request) (*http.Response, error) {
	if err := p.acct.Sign(req); err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	var body struct {
		Error struct {
			Code    string
			Message struct{ Value string } `json:"message"`
		} `json:"odata.error"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&body)
	code := body.Error.Code
	if code == "" {
		code = resp.Header.Get("x-ms-error-code")
	}
	msg, _, _ := strings.Cut(body.Error.Message.Value, "\n")
	if code == "" {
		return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return nil, engine.Errorf(engine.Code(code), "%s", msg)
}

// tableExists tells whether err is the SDK's refusal of a table that
// exists already.
func tableExists(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.ErrorCode == string(engine.CodeTableAlreadyExists)
}
