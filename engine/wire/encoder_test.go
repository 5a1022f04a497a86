package wire

import (
	"fmt"
	"sync"
	"testing"

	"github.com/cairn-dev/cairn/engine"
)

// The encoders are pooled: what one call returned stays as it was while
// other calls, at once and after, encode with the same encoders.
func TestEncodedBytesAreTheCallers(t *testing.T) {
	const workers, each = 8, 200
	got := make([][][]byte, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				got[w] = append(got[w], EncodeReplyMsgpack(&engine.Reply{ETag: fmt.Sprintf("W/\"%d.%d\"", w, i), Seq: uint64(w*each + i + 1)}))
			}
		})
	}
	wg.Wait()
	for w := range workers {
		for i, b := range got[w] {
			r, err := DecodeReplyMsgpack(b)
			if err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("W/\"%d.%d\"", w, i); r.ETag != want || r.Seq != uint64(w*each+i+1) {
				t.Fatalf("reply %d of worker %d reads %q, seq %d: another call's bytes", i, w, r.ETag, r.Seq)
			}
		}
	}
}
