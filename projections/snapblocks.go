package projections

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/cairn-dev/cairn/engine"
)

// entityBlock is a block of a base's entities (SnapshotFormat 2) on its
// way from the file to the view: read, then decoded by a worker, then
// loaded in the file's order.
type entityBlock struct {
	first uint64 // the position in the file of its first entity
	n     int    // the entities it says it holds
	data  []byte
	ents  []engine.Packed
	err   error
	done  chan struct{} // closed once decoded
}

// decodeEntities reads total entities from dec, as a file of the given
// format version holds them (a base's and a delta's formats number their
// entities alike: one after another in version 1, in blocks since 2), and
// hands them to load in the file's order.
func decodeEntities(dec *msgpack.Decoder, version, total uint64, load func(engine.Packed) error) error {
	if version >= 2 {
		return decodeEntityBlocks(dec, total, load)
	}
	for i := uint64(0); i < total; i++ {
		e, err := decodeEntity(dec)
		if err != nil {
			return fmt.Errorf("entity %d: %w", i, err)
		}
		if err := load(engine.Pack(e)); err != nil {
			return err
		}
	}
	return nil
}

// decodeEntityBlocks reads from dec the blocks that hold total entities,
// decodes them on every core, and hands the entities to load one at a
// time, in the file's order, on the calling goroutine: the tree they go
// into takes them in key order from one goroutine. It returns the first
// error, of the reading, a block or load, once its goroutines ended.
//
// One goroutine reads the blocks (dec is not touched by anyone else
// until this returns); GOMAXPROCS workers decode them; at most
// 3×GOMAXPROCS blocks are in flight, about a megabyte per core.
func decodeEntityBlocks(dec *msgpack.Decoder, total uint64, load func(engine.Packed) error) error {
	workers := max(runtime.GOMAXPROCS(0), 1)
	stop := make(chan struct{})
	jobs := make(chan *entityBlock, workers)
	order := make(chan *entityBlock, 2*workers)
	// The blocks' buffers go round: memory the process has not touched
	// yet costs a page fault per page, as much as decoding into it.
	free := make(chan []byte, 3*workers+1)
	var readErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(jobs)
		defer close(order)
		for read := uint64(0); read < total; {
			n, err := dec.DecodeUint64()
			var data []byte
			if err == nil && (n == 0 || n > blockEntities || n > total-read) {
				err = fmt.Errorf("a block of %d entities, %d of %d left", n, total-read, total)
			}
			if err == nil {
				data, err = readBlock(dec, free)
			}
			if err != nil {
				readErr = fmt.Errorf("the block at entity %d: %w", read, err)
				return
			}
			b := &entityBlock{first: read, n: int(n), data: data, done: make(chan struct{})}
			select {
			case order <- b:
			case <-stop:
				return
			}
			select {
			case jobs <- b:
			case <-stop:
				return
			}
			read += n
		}
	}()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var r bytes.Reader
			bdec := msgpack.NewDecoder(&r)
			for b := range jobs {
				r.Reset(b.data)
				bdec.Reset(&r)
				b.ents, b.err = decodeBlock(bdec, &r, b)
				select {
				case free <- b.data:
				default:
				}
				b.data = nil
				close(b.done)
			}
		}()
	}
	var err error
	for b := range order {
		<-b.done
		if err = b.err; err == nil {
			for _, e := range b.ents {
				if err = load(e); err != nil {
					break
				}
			}
		}
		if err != nil {
			close(stop)
			break
		}
	}
	wg.Wait()
	if err == nil {
		err = readErr
	}
	return err
}

// maxBlockBytes bounds the bytes of a block a reader accepts: a writer
// ends a block once it holds blockBytes, so one entity (at most 1 MiB
// encoded, with room to spare) past that. A file is checked against its
// checksum before it is decoded, so only a file written wrong can say
// more, and it must not make the reader allocate what it says.
const maxBlockBytes = blockBytes + 2<<20

// readBlock reads a block's bytes from dec into a buffer of free, if one
// is there and large enough, else into a new one.
func readBlock(dec *msgpack.Decoder, free chan []byte) ([]byte, error) {
	n, err := dec.DecodeBytesLen()
	if err != nil {
		return nil, err
	}
	if n < 0 || n > maxBlockBytes {
		return nil, fmt.Errorf("a block of %d bytes", n)
	}
	var buf []byte
	select {
	case buf = <-free:
	default:
	}
	if cap(buf) < n {
		buf = make([]byte, n, max(n, blockBytes+blockBytes/4))
	}
	buf = buf[:n]
	_, err = io.ReadFull(dec.Buffered(), buf)
	return buf, err
}

// decodeBlock decodes the entities of b from dec, which reads r, a
// reader of b's data: exactly b.n of them, and nothing after.
func decodeBlock(dec *msgpack.Decoder, r *bytes.Reader, b *entityBlock) ([]engine.Packed, error) {
	ents := make([]engine.Packed, b.n)
	for i := range ents {
		e, err := decodeEntity(dec)
		if err != nil {
			return nil, fmt.Errorf("entity %d: %w", b.first+uint64(i), err)
		}
		ents[i] = engine.Pack(e) // here, on the block's worker
	}
	if r.Len() != 0 {
		return nil, fmt.Errorf("the block at entity %d holds %d bytes after its %d entities", b.first, r.Len(), b.n)
	}
	return ents, nil
}
