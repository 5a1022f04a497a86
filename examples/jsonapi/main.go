//go:build wasip1

// Command jsonapi is a Cairn function behind HTTP routes: a small JSON
// API over the employee directory of examples/directory, table Employees
// (PartitionKey = department, RowKey = employee id) and its declared index
// EmployeesByEmail. Every route needs a function key (x-functions-key).
//
//	GET /fn/jsonapi/employees/{dept}/{id}   one employee, its ETag in the header ETag
//	PUT /fn/jsonapi/employees/{dept}/{id}   hire (no If-Match) or replace (If-Match: the ETag read)
//	GET /fn/jsonapi/employees?email=<addr>  the employees with that address, found through the index
//
// Deploy it with go run ./cmd/host deploy ./examples/jsonapi. See
// README.md.
package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/functions/abi"
	"github.com/cairn-dev/cairn/functions/sdk"
)

func init() { sdk.Handle(serve) }

func main() {}

// The directory's table and its index on Email
// (examples/directory/projections/by-email.json).
const (
	employees = "Employees"
	byEmail   = "EmployeesByEmail"
)

// employee is an employee as the API shows it and takes it (a PUT's body
// has no department, id or etag: the path and If-Match say them).
type employee struct {
	Department string `json:"department,omitempty"`
	ID         string `json:"id,omitempty"`
	FirstName  string `json:"firstName"`
	LastName   string `json:"lastName"`
	Email      string `json:"email"`
	Salary     *int64 `json:"salary"`
	ETag       string `json:"etag,omitempty"`
}

// serve answers each route; every answer is JSON, a refusal
// {"error": {"code": …, "message": …}} as the host's own.
func serve(ctx *sdk.Context) error {
	req := ctx.HTTP()
	if req == nil {
		return refuse(ctx, http.StatusBadRequest, "InvalidInput", "this function answers HTTP requests only")
	}
	switch req.Method + " " + req.Route {
	case "GET /employees/{dept}/{id}", "HEAD /employees/{dept}/{id}":
		return get(ctx, req.Params["dept"], req.Params["id"])
	case "PUT /employees/{dept}/{id}":
		return put(ctx, req)
	case "GET /employees", "HEAD /employees":
		return find(ctx, req.Query)
	}
	// The host answers 404 and 405 itself for what cairn.json does not
	// route: this is reached only by a route added there and not here.
	return refuse(ctx, http.StatusNotFound, "RouteNotFound", "no such route: "+req.Method+" "+req.Route)
}

// get is a point read by both keys: one entity, its ETag in the header.
func get(ctx *sdk.Context, dept, id string) error {
	if !validKey(dept) || !validKey(id) {
		return refuse(ctx, http.StatusBadRequest, "InvalidInput", "a department and an id are 1 to 64 letters, digits, '-' or '_'")
	}
	e, etag, err := ctx.Get(employees, dept, id)
	if err != nil {
		return err
	}
	if e == nil {
		return refuse(ctx, http.StatusNotFound, string(engine.CodeResourceNotFound), "no employee "+dept+"/"+id)
	}
	return reply(ctx, http.StatusOK, map[string][]string{"ETag": {etag}}, show(e, etag))
}

// find looks an address up in the index EmployeesByEmail: one partition
// (the address), whose entities name the employees by SourcePartitionKey
// and SourceRowKey; each is then a point read of Employees. No scan of
// Employees, whatever its size.
func find(ctx *sdk.Context, rawQuery string) error {
	q, err := url.ParseQuery(rawQuery)
	email := q.Get("email")
	if err != nil || email == "" || len(email) > 254 {
		return refuse(ctx, http.StatusBadRequest, "InvalidInput", "give ?email=<address>")
	}
	hits, err := ctx.Query(byEmail, email, "", 100)
	if err != nil {
		return err
	}
	found := []employee{}
	for _, h := range hits {
		pk, _ := h.Get("SourcePartitionKey")
		rk, _ := h.Get("SourceRowKey")
		e, etag, err := ctx.Get(employees, pk.Str(), rk.Str())
		if err != nil {
			return err
		}
		if e != nil { // always, as the index moves with its source; a guard only
			found = append(found, show(e, etag))
		}
	}
	return reply(ctx, http.StatusOK, nil, map[string]any{"email": email, "employees": found})
}

// put hires an employee (no If-Match: 201, or 409 if one has those keys)
// or replaces one (If-Match: the ETag it was read with, or "*"; 404 if
// there is none, 412 if it changed since). The new ETag is not known
// until the write commits, after the function returns: a client that
// needs it reads the employee again.
func put(ctx *sdk.Context, req *abi.HTTPRequest) error {
	dept, id := req.Params["dept"], req.Params["id"]
	if !validKey(dept) || !validKey(id) {
		return refuse(ctx, http.StatusBadRequest, "InvalidInput", "a department and an id are 1 to 64 letters, digits, '-' or '_'")
	}
	var in employee
	d := json.NewDecoder(bytes.NewReader(ctx.Trigger().Body))
	d.DisallowUnknownFields()
	if err := d.Decode(&in); err != nil || d.More() {
		return refuse(ctx, http.StatusBadRequest, "InvalidInput", `the body must be one JSON object {"firstName", "lastName", "email", "salary"}`)
	}
	if msg := in.check(); msg != "" {
		return refuse(ctx, http.StatusBadRequest, "InvalidInput", msg)
	}
	e := engine.NewEntity(dept, id,
		engine.Property{Name: "FirstName", Value: engine.String(in.FirstName)},
		engine.Property{Name: "LastName", Value: engine.String(in.LastName)},
		engine.Property{Name: "Email", Value: engine.String(in.Email)},
		engine.Property{Name: "Salary", Value: engine.Int64(*in.Salary)},
	)
	ifMatch := req.HeaderValue("If-Match")
	if ifMatch == "" {
		err := ctx.Insert(employees, e)
		if engine.ErrorCode(err) == engine.CodeEntityAlreadyExists {
			return refuse(ctx, http.StatusConflict, string(engine.CodeEntityAlreadyExists), "employee "+dept+"/"+id+" exists: send If-Match with its ETag to replace it")
		}
		if err != nil {
			return err
		}
		return reply(ctx, http.StatusCreated, map[string][]string{"Location": {"/fn/jsonapi/employees/" + dept + "/" + id}}, map[string]string{"department": dept, "id": id})
	}
	switch err := ctx.Replace(employees, e, ifMatch); {
	case engine.ErrorCode(err) == engine.CodeResourceNotFound:
		return refuse(ctx, http.StatusNotFound, string(engine.CodeResourceNotFound), "no employee "+dept+"/"+id)
	case engine.ErrorCode(err) == engine.CodeUpdateConditionNotSatisfied:
		return refuse(ctx, http.StatusPreconditionFailed, string(engine.CodeUpdateConditionNotSatisfied), "employee "+dept+"/"+id+" changed since it was read: read it again")
	case err != nil:
		return err
	}
	return ctx.Respond(http.StatusNoContent, nil)
}

// check says what is wrong with a PUT's employee, or "".
func (in *employee) check() string {
	switch {
	case in.Department != "" || in.ID != "" || in.ETag != "":
		return "the path gives the department and the id, and If-Match the ETag: not the body"
	case in.FirstName == "" || len(in.FirstName) > 100 || in.LastName == "" || len(in.LastName) > 100:
		return "firstName and lastName are 1 to 100 bytes"
	case len(in.Email) > 254 || strings.Count(in.Email, "@") != 1 || strings.HasPrefix(in.Email, "@") || strings.HasSuffix(in.Email, "@"):
		return "email is an address: name@domain"
	case in.Salary == nil || *in.Salary < 0:
		return "salary is a number, 0 or more"
	}
	return ""
}

// show is an entity of Employees as the API shows it.
func show(e *engine.Entity, etag string) employee {
	str := func(name string) string { v, _ := e.Get(name); return v.Str() }
	salary, _ := e.Get("Salary")
	n := salary.Int()
	return employee{Department: e.PartitionKey, ID: e.RowKey, FirstName: str("FirstName"), LastName: str("LastName"),
		Email: str("Email"), Salary: &n, ETag: etag}
}

// validKey reports whether s may be a department or an id here: 1 to 64
// letters, digits, '-' or '_'.
func validKey(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// refuse answers status with a coded JSON error; nothing is written.
func refuse(ctx *sdk.Context, status int, code, msg string) error {
	return reply(ctx, status, nil, map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

// reply answers status with v as JSON and the headers given.
func reply(ctx *sdk.Context, status int, h map[string][]string, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // "<address>", not "\u003caddress\u003e"
	if err := enc.Encode(v); err != nil {
		return err
	}
	if h == nil {
		h = map[string][]string{}
	}
	h["Content-Type"] = []string{"application/json"}
	if err := ctx.Respond(status, h); err != nil {
		return err
	}
	return ctx.Reply(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}
