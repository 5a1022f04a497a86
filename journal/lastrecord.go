package journal

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// storedRecord is a record as the stream's leader holds it.
type storedRecord struct {
	Seq     uint64 `json:"seq"`
	Subject string `json:"subject"`
	Data    []byte `json:"data"`
}

// lastRecord returns stream's last record on a subject matching filter
// (nil: none), as the stream's leader holds it. A direct get, which any
// replica answers, may miss a record the leader has already acknowledged
// to its writer or refused an append for; whoever must see every such
// record asks here. With no leader (an election under way) the request
// goes unanswered until ctx ends.
func (j *Journal) lastRecord(ctx context.Context, stream, filter string) (*storedRecord, error) {
	req, err := json.Marshal(struct {
		LastBySubject string `json:"last_by_subj"`
	}{filter})
	if err != nil {
		return nil, err
	}
	m, err := j.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+stream, req)
	if err != nil {
		return nil, fmt.Errorf("last record on %s: %w", filter, err)
	}
	var resp struct {
		Message *storedRecord       `json:"message"`
		Error   *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return nil, fmt.Errorf("last record on %s: %w", filter, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return nil, nil
	case resp.Error != nil:
		return nil, fmt.Errorf("last record on %s: %w", filter, resp.Error)
	case resp.Message == nil:
		return nil, fmt.Errorf("last record on %s: an answer without a message", filter)
	}
	return resp.Message, nil
}

// lastOn returns the sequence of stream's last record on a subject
// matching filter (0: none), as the stream's leader holds it.
func (j *Journal) lastOn(ctx context.Context, stream, filter string) (uint64, error) {
	r, err := j.lastRecord(ctx, stream, filter)
	if r == nil || err != nil {
		return 0, err
	}
	return r.Seq, nil
}
