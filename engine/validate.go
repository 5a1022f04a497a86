package engine

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// ValidateTableName checks a table name: 3 to 63 ASCII letters and digits,
// starting with a letter; "tables" is reserved.
func ValidateTableName(name string) error {
	if len(name) < MinTableNameLen || len(name) > MaxTableNameLen {
		return Errorf(CodeInvalidInput, "table name %q must be %d to %d characters long", name, MinTableNameLen, MaxTableNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		isLetter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if i == 0 && !isLetter {
			return Errorf(CodeInvalidInput, "table name %q must start with a letter", name)
		}
		if !isLetter && !(c >= '0' && c <= '9') {
			return Errorf(CodeInvalidInput, "table name %q may contain only letters and digits (found %q at %d)", name, c, i)
		}
	}
	if strings.EqualFold(name, "tables") {
		return Errorf(CodeInvalidInput, "table name %q is reserved", name)
	}
	return nil
}

// ValidateKey checks a PartitionKey or RowKey (which names it): at most
// 512 UTF-16 units, none of / \ # ? and no control characters
// (U+0000–U+001F, U+007F–U+009F). The empty key is allowed.
func ValidateKey(which, key string) error {
	if !utf8.ValidString(key) {
		return Errorf(CodeInvalidInput, "%s is not valid UTF-8", which)
	}
	if n := UTF16Len(key); n > MaxKeyUnits {
		return Errorf(CodeKeyValueTooLarge, "%s is %d UTF-16 code units long; the limit is %d (1 KiB)", which, n, MaxKeyUnits)
	}
	pos := 0
	for _, r := range key {
		switch {
		case r == '/' || r == '\\' || r == '#' || r == '?':
			return Errorf(CodeOutOfRangeInput, "%s contains the forbidden character %q at position %d (/ \\ # ? are not allowed)", which, r, pos)
		case r <= 0x1f || r >= 0x7f && r <= 0x9f:
			return Errorf(CodeOutOfRangeInput, "%s contains the control character U+%04X at position %d", which, r, pos)
		}
		pos++
	}
	return nil
}

var reservedNames = map[string]bool{"PartitionKey": true, "RowKey": true, "Timestamp": true, "ETag": true}

func validName(name string) bool {
	for i, r := range name {
		if r == '_' || unicode.IsLetter(r) || i > 0 && unicode.IsDigit(r) {
			continue
		}
		return false
	}
	return name != ""
}

// ValidateProperties checks the properties of an entity to be written.
func ValidateProperties(props []Property) error {
	if len(props) > MaxUserProperties {
		return Errorf(CodeTooManyProperties, "the entity has %d properties; the limit is %d besides PartitionKey, RowKey and Timestamp", len(props), MaxUserProperties)
	}
	// Properties are normally sorted by name (NewEntity, the decoders), so
	// a duplicate is next to its twin; only unsorted input needs a set.
	var seen map[string]struct{}
	for i := 1; i < len(props) && seen == nil; i++ {
		if props[i-1].Name > props[i].Name {
			seen = make(map[string]struct{}, len(props))
		}
	}
	for i, p := range props {
		switch {
		case !utf8.ValidString(p.Name):
			return Errorf(CodeInvalidInput, "property name %q is not valid UTF-8", p.Name)
		case utf8.RuneCountInString(p.Name) > MaxPropertyNameLen:
			return Errorf(CodePropertyNameTooLong, "property name %.40q… is %d characters long; the limit is %d", p.Name, utf8.RuneCountInString(p.Name), MaxPropertyNameLen)
		case reservedNames[p.Name]:
			return Errorf(CodePropertyNameInvalid, "property name %q is reserved", p.Name)
		case !validName(p.Name):
			return Errorf(CodePropertyNameInvalid, "property name %q is not an identifier (a letter or _, then letters, digits or _)", p.Name)
		}
		dup := i > 0 && props[i-1].Name == p.Name
		if seen != nil {
			_, dup = seen[p.Name]
			seen[p.Name] = struct{}{}
		}
		if dup {
			return Errorf(CodeDuplicatePropertiesSpecified, "property %q is given twice", p.Name)
		}
		if err := validateValue(p.Name, p.Value); err != nil {
			return err
		}
	}
	return nil
}

func validateValue(name string, v Value) error {
	switch v.t {
	case TypeString:
		if !utf8.ValidString(v.s) {
			return Errorf(CodeInvalidInput, "property %q: the string is not valid UTF-8", name)
		}
		// A string has at most as many UTF-16 units as bytes: only a long
		// one needs counting.
		if len(v.s) > MaxStringUnits {
			if n := UTF16Len(v.s); n > MaxStringUnits {
				return Errorf(CodePropertyValueTooLarge, "property %q: the string is %d UTF-16 code units long; the limit is %d (64 KiB)", name, n, MaxStringUnits)
			}
		}
	case TypeBinary:
		if len(v.s) > MaxBinaryBytes {
			return Errorf(CodePropertyValueTooLarge, "property %q: the binary value is %d bytes long; the limit is %d", name, len(v.s), MaxBinaryBytes)
		}
	case TypeDateTime:
		if t := v.Ticks(); t < TimeToTicks(MinDateTime) || t > TimeToTicks(MaxDateTime) {
			return Errorf(CodeOutOfRangeInput, "property %q: DateTime %s is outside 1601-01-01..9999-12-31", name, v.Time().Format("2006-01-02T15:04:05Z07:00"))
		}
	case TypeInt32, TypeInt64, TypeDouble, TypeBoolean, TypeGuid:
	default:
		return Errorf(CodeInvalidValueType, "property %q has no valid type", name)
	}
	return nil
}

// ValidateEntity checks an entity to be written: keys, properties, size.
func ValidateEntity(e *Entity) error {
	_, err := validateEntity(e)
	return err
}

func validateEntity(e *Entity) (int, error) {
	if e == nil {
		return 0, Errorf(CodeInvalidInput, "the operation has no entity")
	}
	if err := ValidateKey("PartitionKey", e.PartitionKey); err != nil {
		return 0, err
	}
	if err := ValidateKey("RowKey", e.RowKey); err != nil {
		return 0, err
	}
	if err := ValidateProperties(e.Properties); err != nil {
		return 0, err
	}
	n := EntitySize(e)
	if n > MaxEntitySize {
		return n, Errorf(CodeEntityTooLarge, "the entity is %d bytes; the limit is %d (1 MiB)", n, MaxEntitySize)
	}
	return n, nil
}

func validateQueueName(q string) bool {
	if q == "" || len(q) > MaxQueueNameLen {
		return false
	}
	for i := 0; i < len(q); i++ {
		c := q[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// ValidateMessages checks a command's outbox messages, as ValidateCommand
// does: at most MaxCommandMessages (InvalidInput, like a batch of too many
// operations), ids of valid UTF-8, exactly one destination each (a valid
// queue name or subject), bodies within MaxMessageBytes, and at most
// MaxCommandMessageBytes in all (RequestBodyTooLarge). The error names a
// message by its index.
func ValidateMessages(msgs []Message) error {
	if err := ValidateMessageCount(len(msgs)); err != nil {
		return err
	}
	size := 0
	for i := range msgs {
		if !utf8.ValidString(msgs[i].ID) {
			return Errorf(CodeInvalidInput, "message %d: the id is not valid UTF-8", i)
		}
		if err := validateMessage(i, &msgs[i]); err != nil {
			return err
		}
		size += MessageSize(&msgs[i])
	}
	if size > MaxCommandMessageBytes {
		return Errorf(CodeRequestBodyTooLarge, "the command's messages are %d bytes in all (destinations, ids and bodies); the limit is %d (2 MiB)", size, MaxCommandMessageBytes)
	}
	return nil
}

// ValidateMessageCount refuses n outbox messages for one command when
// they are more than MaxCommandMessages: what decoders call on an array's
// length before they decode its messages.
func ValidateMessageCount(n int) error {
	if n > MaxCommandMessages {
		return Errorf(CodeInvalidInput, "a command carries at most %d outbox messages, not %d", MaxCommandMessages, n)
	}
	return nil
}

// validateMessage checks the i-th outbox message's destination (exactly
// one of a queue and a subject) and its size.
func validateMessage(i int, m *Message) error {
	switch {
	case m.Queue != "" && m.Subject != "":
		return Errorf(CodeInvalidInput, "message %d has a queue (%q) and a subject (%q): give one destination", i, m.Queue, m.Subject)
	case m.Subject != "":
		if err := ValidateSubject(m.Subject); err != nil {
			return Errorf(CodeInvalidInput, "message %d: %s", i, AsError(err).Message)
		}
	case m.Queue == "":
		return Errorf(CodeInvalidInput, "message %d has no destination: give a queue or a subject", i)
	case !validateQueueName(m.Queue):
		return Errorf(CodeInvalidInput, "message %d: queue name %q must be 1-%d of A-Z, a-z, 0-9, _ and -", i, m.Queue, MaxQueueNameLen)
	}
	if len(m.Body) > MaxMessageBytes {
		return Errorf(CodeInvalidInput, "message %d: the body is %d bytes; the limit is %d", i, len(m.Body), MaxMessageBytes)
	}
	return nil
}

// ValidateBatchOps refuses n operations for one batch when they are more
// than MaxBatchOps, with Azure's message: what decoders call on an array's
// length before they decode its operations.
func ValidateBatchOps(n int) error {
	if n > MaxBatchOps {
		return Errorf(CodeInvalidInput, "The batch request operation exceeds the maximum %d changes per change set (it has %d).", MaxBatchOps, n)
	}
	return nil
}

// ValidateCommand checks everything about a command that does not depend on
// state. Errors about one operation of a batch carry its index.
//
// It is the one gate every front door passes (NATS in msgpack or JSON,
// HTTP, functions): no string that is not valid UTF-8 gets past it, in a
// key, a property name, a string value or an id, since a decoder that
// replaced the bad bytes would make two different inputs one.
func ValidateCommand(c *Command) error {
	if err := ValidateFullTableName(c.Table); err != nil {
		return err
	}
	if !utf8.ValidString(c.ID) {
		return Errorf(CodeInvalidInput, "the command id is not valid UTF-8")
	}
	if len(c.Ops) == 0 {
		return Errorf(CodeInvalidInput, "the command has no operation")
	}
	if !c.Batch && len(c.Ops) != 1 {
		return Errorf(CodeInvalidInput, "a command that is not a batch has exactly one operation, not %d", len(c.Ops))
	}
	if err := ValidateBatchOps(len(c.Ops)); err != nil {
		return err
	}
	at := func(i int, err error) error {
		if c.Batch {
			return AsError(err).AtIndex(i)
		}
		return err
	}
	rows := make(map[string]int, len(c.Ops))
	size := 0
	for i, op := range c.Ops {
		if op.Op < OpInsert || op.Op > OpDelete {
			return at(i, Errorf(CodeInvalidInput, "unknown operation %d", op.Op))
		}
		if op.Entity == nil {
			return at(i, Errorf(CodeInvalidInput, "%s without an entity", op.Op))
		}
		var err error
		n := 0
		if op.Op == OpDelete {
			if err = ValidateKey("PartitionKey", op.Entity.PartitionKey); err == nil {
				err = ValidateKey("RowKey", op.Entity.RowKey)
			}
			n = EntitySize(&Entity{PartitionKey: op.Entity.PartitionKey, RowKey: op.Entity.RowKey})
		} else {
			n, err = validateEntity(op.Entity)
		}
		if err != nil {
			return at(i, err)
		}
		size += n
		if !c.Batch {
			break
		}
		if pk := c.Ops[0].Entity.PartitionKey; op.Entity.PartitionKey != pk {
			return at(i, Errorf(CodeCommandsInBatchActOnDifferentPartitions,
				"all operations of a batch must have the same PartitionKey: %q is not %q", op.Entity.PartitionKey, pk))
		}
		if j, dup := rows[op.Entity.RowKey]; dup {
			return at(i, Errorf(CodeInvalidDuplicateRow, "RowKey %q appears in operations %d and %d of the batch", op.Entity.RowKey, j, i))
		}
		rows[op.Entity.RowKey] = i
	}
	if size > MaxBatchBytes {
		return Errorf(CodeRequestBodyTooLarge, "the batch is %d bytes; the limit is %d (4 MiB)", size, MaxBatchBytes)
	}
	if err := ValidateMessages(c.Messages); err != nil {
		return err
	}
	for i := range c.Messages {
		size += MessageSize(&c.Messages[i])
	}
	c.size = size
	return nil
}

// ValidateRecord checks a journal record before a view applies it: the
// rules every record the committer writes already follows (keys, property
// names and values, entity sizes, command references, outbox messages), so
// that a record forged on the journal's subjects, or damaged, is refused
// whole rather than applied in part. It does not check that the partition
// key matches the record's subject: that is the journal's layout. Nor the
// bounds of one command's messages (MaxCommandMessages,
// MaxCommandMessageBytes): a record holds a whole group commit's, and
// records written before those bounds must still apply.
func ValidateRecord(rec *Record) error {
	if err := ValidateKey("PartitionKey", rec.PartitionKey); err != nil {
		return err
	}
	for i := range rec.Events {
		ev := &rec.Events[i]
		var err error
		switch ev.Kind {
		case EventPut:
			_, err = validateEntity(&Entity{PartitionKey: rec.PartitionKey, RowKey: ev.RowKey, Properties: ev.Properties})
		case EventDelete:
			err = ValidateKey("RowKey", ev.RowKey)
		default:
			err = Errorf(CodeInvalidInput, "unknown event kind %d", ev.Kind)
		}
		if err != nil {
			e := AsError(err)
			return Errorf(e.Code, "event %d: %s", i, e.Message)
		}
	}
	for i, c := range rec.Commands {
		if uint64(c.First)+uint64(c.Count) > uint64(len(rec.Events)) {
			return Errorf(CodeInvalidInput, "command %d names events %d..%d of %d", i, c.First, uint64(c.First)+uint64(c.Count), len(rec.Events))
		}
	}
	for i := range rec.Messages {
		if err := validateMessage(i, &rec.Messages[i]); err != nil {
			return err
		}
	}
	return nil
}

// ValidateCatalogRecord checks a catalog record before the views apply it:
// a known kind and a valid full table name.
func ValidateCatalogRecord(rec *CatalogRecord) error {
	if rec.Kind != CatalogTableCreated && rec.Kind != CatalogTableDeleted {
		return Errorf(CodeInvalidInput, "unknown catalog record kind %d", rec.Kind)
	}
	return ValidateFullTableName(rec.Name)
}
