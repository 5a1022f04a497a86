package engine

import (
	"errors"
	"fmt"
)

// Code is an Azure Table service error code. Codes are part of the public
// protocol: clients switch on them, so existing codes never change.
type Code string

// The error codes Cairn returns. They are the Azure Table service's codes,
// so existing clients recognise them.
const (
	CodeEntityAlreadyExists                     Code = "EntityAlreadyExists"
	CodeResourceNotFound                        Code = "ResourceNotFound"
	CodeTableNotFound                           Code = "TableNotFound"
	CodeTableAlreadyExists                      Code = "TableAlreadyExists"
	CodeUpdateConditionNotSatisfied             Code = "UpdateConditionNotSatisfied"
	CodeEntityTooLarge                          Code = "EntityTooLarge"
	CodePropertyValueTooLarge                   Code = "PropertyValueTooLarge"
	CodeKeyValueTooLarge                        Code = "KeyValueTooLarge"
	CodeTooManyProperties                       Code = "TooManyProperties"
	CodePropertyNameInvalid                     Code = "PropertyNameInvalid"
	CodePropertyNameTooLong                     Code = "PropertyNameTooLong"
	CodeDuplicatePropertiesSpecified            Code = "DuplicatePropertiesSpecified"
	CodeInvalidInput                            Code = "InvalidInput"
	CodePropertiesNeedValue                     Code = "PropertiesNeedValue"
	CodeInvalidValueType                        Code = "InvalidValueType"
	CodeOutOfRangeInput                         Code = "OutOfRangeInput"
	CodeInvalidDuplicateRow                     Code = "InvalidDuplicateRow"
	CodeCommandsInBatchActOnDifferentPartitions Code = "CommandsInBatchActOnDifferentPartitions"
	CodeRequestBodyTooLarge                     Code = "RequestBodyTooLarge"
	CodeServerBusy                              Code = "ServerBusy"
	CodeOperationTimedOut                       Code = "OperationTimedOut"
	CodeInternalError                           Code = "InternalError"

	// CodeTableFaulted is Cairn's own: the table's journal holds a record
	// this host cannot apply (undecodable, invalid, or history missing),
	// so its view stopped at the last good record and neither reads nor
	// writes are served until an operator repairs the journal.
	CodeTableFaulted Code = "TableFaulted"

	// CodeTableQuotaExceeded is Cairn's own: the account already has as
	// many tables as the node allows one account (nothing was created).
	CodeTableQuotaExceeded Code = "TableQuotaExceeded"

	// CodeProjectionReadOnly is Cairn's own: the table named is a declared
	// projection, which only its source table's journal changes; a write
	// to it (or creating or deleting a table of its name) is refused.
	CodeProjectionReadOnly Code = "ProjectionReadOnly"

	// CodeProjectionNotReady is Cairn's own: the projection's first
	// version is still being built from its source table (retry).
	CodeProjectionNotReady Code = "ProjectionNotReady"

	// CodePositionNotReached is Cairn's own: a read asked for a journal
	// position (read your writes) the view did not reach in time.
	CodePositionNotReached Code = "PositionNotReached"

	// CodeInvalidAsOfPosition is Cairn's own: an as-of read named no
	// position of the table's journal (0, or beyond the view's position).
	CodeInvalidAsOfPosition Code = "InvalidAsOfPosition"

	// CodeAsOfTooFar is Cairn's own: an as-of read would replay more
	// records than the node allows one as-of read.
	CodeAsOfTooFar Code = "AsOfTooFar"

	// CodeHistoryTruncated is Cairn's own: what a request asks of a
	// table's history is before its horizon, where the journal's records
	// were removed (a table's retention, or a purge): a change feed read
	// from there, a read as of a position before it, an outbox message
	// there to skip. It was AsOfHistoryGone for as-of reads before the
	// journal had a retention.
	CodeHistoryTruncated Code = "HistoryTruncated"

	// The codes of a request's signature (Azure's): none, or one that does
	// not match (403 in the Tables API, 401 on a function's route); one
	// that grants not what is asked (403 both).
	CodeAuthenticationFailed Code = "AuthenticationFailed"
	CodeAuthorizationFailure Code = "AuthorizationFailure"
	CodePermissionMismatch   Code = "AuthorizationPermissionMismatch"
)

// NoIndex is Error.Index when the error is not about one operation of a batch.
const NoIndex = -1

// Error is the one error type that crosses Cairn's boundaries: an Azure error
// code, a message for a human, and, for an entity group transaction, the
// 0-based index of the operation that failed (NoIndex otherwise).
type Error struct {
	Code    Code
	Message string
	Index   int
}

func (e *Error) Error() string {
	if e.Index >= 0 {
		return fmt.Sprintf("%s: operation %d: %s", e.Code, e.Index, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Is reports whether target is an *Error with the same code, so that
// errors.Is(err, &Error{Code: CodeTableNotFound}) works on wrapped errors.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Errorf builds an *Error with the given code and no batch index.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Index: NoIndex}
}

// AtIndex returns a copy of e attributed to operation i of a batch.
func (e *Error) AtIndex(i int) *Error {
	c := *e
	c.Index = i
	return &c
}

// ErrorCode returns the code of err, or CodeInternalError when err carries
// none. Anything without a code is a bug or an infrastructure failure and is
// reported to the user as InternalError (and logged in full by the caller).
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternalError
}

// AsError converts any error into an *Error: coded errors pass through,
// others become InternalError with their text.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: CodeInternalError, Message: err.Error(), Index: NoIndex}
}

// Errors of an append, the contract between the committer and a journal.
// A journal returns errors that wrap them (test with errors.Is); any other
// error of an append leaves its outcome unknown: the record may or may not
// have been stored. They carry no Code because no user ever sees them: the
// committer turns each into the answer it means (deciding again after a
// conflict, TableNotFound for a table gone).
var (
	// ErrConflict: the partition (or, for the catalog, the table name) has
	// moved past the expected sequence; nothing was stored.
	ErrConflict = errors.New("the partition has moved on (wrong last sequence)")
	// ErrTableGone: the table's journal does not exist (the table was
	// deleted); nothing was stored.
	ErrTableGone = errors.New("the table's journal does not exist")
	// ErrNotSent: the journal refused the append before sending it (the
	// record cannot be encoded or is larger than the server takes, or the
	// connection is closed); nothing was stored.
	ErrNotSent = errors.New("the append was not sent")
)
