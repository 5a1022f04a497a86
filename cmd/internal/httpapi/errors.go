package httpapi

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/wire"
)

// Codes of the HTTP front door, beyond the engine's.
const (
	codeAuthenticationFailed    engine.Code = engine.CodeAuthenticationFailed
	codeAuthorizationFailure    engine.Code = engine.CodeAuthorizationFailure
	codePermissionMismatch      engine.Code = engine.CodePermissionMismatch
	codeInvalidURI              engine.Code = "InvalidUri"
	codeUnsupportedVerb         engine.Code = "UnsupportedHttpVerb"
	codeNotImplemented          engine.Code = "NotImplemented"
	codeInvalidHeaderValue      engine.Code = "InvalidHeaderValue"
	codeMissingRequiredHeader   engine.Code = "MissingRequiredHeader"
	codeInvalidQueryParameter   engine.Code = "InvalidQueryParameterValue"
	codeInvalidContinuation     engine.Code = "InvalidContinuationToken"
	codePositionNotReached      engine.Code = engine.CodePositionNotReached
	codeRequestBodyTooLarge     engine.Code = engine.CodeRequestBodyTooLarge
	codeAuthenticationMalformed engine.Code = "InvalidAuthenticationInfo"
	codeCorsPreflightFailure    engine.Code = "CorsPreflightFailure"
	codeOriginNotAllowed        engine.Code = "OriginNotAllowed"
	codeHostNotAllowed          engine.Code = "HostNotAllowed"              // DNS rebinding protection (HostGuard)
	codeHeaderTooLarge          engine.Code = "RequestHeaderFieldsTooLarge" // X-Cairn-Messages over its limit
)

// status maps an error code to its HTTP status, as the Table service does.
func status(code engine.Code) int {
	switch code {
	case engine.CodeEntityAlreadyExists, engine.CodeTableAlreadyExists, engine.CodeTableQuotaExceeded, engine.CodeProjectionReadOnly:
		return http.StatusConflict
	case engine.CodeResourceNotFound, engine.CodeTableNotFound:
		return http.StatusNotFound
	case engine.CodeUpdateConditionNotSatisfied:
		return http.StatusPreconditionFailed
	case engine.CodeHistoryTruncated:
		return http.StatusGone
	case engine.CodeRequestBodyTooLarge, engine.CodeEntityTooLarge:
		return http.StatusRequestEntityTooLarge
	case engine.CodeServerBusy, codePositionNotReached, engine.CodeTableFaulted, engine.CodeProjectionNotReady:
		return http.StatusServiceUnavailable
	case engine.CodeOperationTimedOut, engine.CodeInternalError:
		return http.StatusInternalServerError
	case codeAuthenticationFailed, codeAuthorizationFailure, codePermissionMismatch, codeCorsPreflightFailure, codeOriginNotAllowed, codeHostNotAllowed:
		return http.StatusForbidden
	case codeUnsupportedVerb:
		return http.StatusMethodNotAllowed
	case codeHeaderTooLarge:
		return http.StatusRequestHeaderFieldsTooLarge
	case codeNotImplemented:
		return http.StatusNotImplemented
	}
	return http.StatusBadRequest
}

func errInvalidURI(format string, args ...any) *engine.Error {
	return engine.Errorf(codeInvalidURI, format, args...)
}

func errMethod(method, resource string) *engine.Error {
	return engine.Errorf(codeUnsupportedVerb, "%s is not supported on %s", method, resource)
}

func notImplemented(what string) *engine.Error {
	return engine.Errorf(codeNotImplemented, "%s are not implemented by Cairn", what)
}

// compNotImplemented refuses one of Azure's ?comp= resources.
func compNotImplemented(comp string) *engine.Error {
	switch comp {
	case "acl":
		return notImplemented("table access policies (?comp=acl)")
	case "properties", "stats":
		return notImplemented("service properties and statistics (?comp=" + comp + ")")
	}
	return engine.Errorf(codeNotImplemented, "?comp=%.40q is not implemented by Cairn", comp)
}

// errorBody is Azure's JSON error: the message ends with the request id and
// time, as the service writes them.
func errorBody(e *engine.Error, requestID string, index int) []byte {
	msg := e.Message
	if index >= 0 {
		msg = strconv.Itoa(index) + ":" + msg
	}
	msg += "\nRequestId:" + requestID + "\nTime:" + time.Now().UTC().Format("2006-01-02T15:04:05.0000000Z")
	b := []byte(`{"odata.error":{"code":`)
	b = strconv.AppendQuote(b, string(e.Code))
	b = append(b, `,"message":{"lang":"en-US","value":`...)
	b = wire.AppendJSONString(b, msg)
	return append(b, "}}}"...)
}

// fail answers the request with err. Errors without a code are internal:
// logged in full, reported as InternalError.
func (c *call) fail(err error) {
	e := engine.AsError(err)
	var ce *engine.Error
	if !errors.As(err, &ce) || e.Code == engine.CodeInternalError {
		c.s.log.Error("http request failed", "method", c.r.Method, "path", c.r.URL.Path, "err", err, "request", c.id)
	}
	c.s.metrics.failure(e.Code)
	h := c.w.Header()
	h.Set("x-ms-error-code", string(e.Code))
	h.Set("Content-Type", "application/json;odata=minimalmetadata;streaming=true;charset=utf-8")
	c.w.WriteHeader(status(e.Code))
	_, _ = c.w.Write(errorBody(e, c.id, -1))
}
