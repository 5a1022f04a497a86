package journal

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// storedRecord is a record as the stream's leader holds it.
type storedRecord struct {
	Seq  uint64 `json:"seq"`
	Data []byte `json:"data"`
}

// lastRecord returns stream's last record on a subject matching filter
// (nil: none), as the stream's leader holds it. A direct get, which any
// replica answers, may miss a record the leader has already acknowledged
// to its writer or refused an append for; whoever must see every such
// record asks here. With no leader (an election under way) the request
// goes unanswered until ctx ends.
func (j *Journal) lastRecord(ctx context.Context, stream, filter string) (*storedRecord, error) {
	var r storedRecord
	if found, err := j.lastMsg(ctx, stream, filter, &r); !found || err != nil {
		return nil, err
	}
	return &r, nil
}

// lastOn returns the sequence of stream's last record on a subject
// matching filter (0: none), as the stream's leader holds it; the
// record's data is not decoded.
func (j *Journal) lastOn(ctx context.Context, stream, filter string) (uint64, error) {
	var r struct {
		Seq uint64 `json:"seq"`
	}
	_, err := j.lastMsg(ctx, stream, filter, &r)
	return r.Seq, err
}

// lastMsg asks the leader of stream for its last record on a subject
// matching filter and decodes the answer's message into msg; found is
// false when there is none.
func (j *Journal) lastMsg(ctx context.Context, stream, filter string, msg any) (found bool, err error) {
	req, err := json.Marshal(struct {
		LastBySubject string `json:"last_by_subj"`
	}{filter})
	if err != nil {
		return false, err
	}
	m, err := j.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+stream, req)
	if err != nil {
		return false, fmt.Errorf("last record on %s: %w", filter, err)
	}
	var resp struct {
		Message json.RawMessage     `json:"message"`
		Error   *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return false, fmt.Errorf("last record on %s: %w", filter, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return false, nil
	case resp.Error != nil:
		return false, fmt.Errorf("last record on %s: %w", filter, resp.Error)
	case len(resp.Message) == 0 || string(resp.Message) == "null":
		return false, fmt.Errorf("last record on %s: an answer without a message", filter)
	}
	if err := json.Unmarshal(resp.Message, msg); err != nil {
		return false, fmt.Errorf("last record on %s: %w", filter, err)
	}
	return true, nil
}
