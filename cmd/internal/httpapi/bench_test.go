package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
)

// BenchmarkPointRead reads one entity through the Go SDK, client and server
// in one process: the SDK's share is most of it (see docs/PERFORMANCE.md).
func BenchmarkPointRead(b *testing.B) {
	_, c := pointReadServer(b)
	parallelReads(b, func() error {
		_, err := c.GetEntity(context.Background(), "p", "r", nil)
		return err
	})
}

// pointReadServer starts a server with one entity, p/r, in table Bench.
func pointReadServer(b *testing.B) (*server, *aztables.Client) {
	s := startServer(b, httpapiDefaults)
	c := s.table(b, "Bench")
	if _, err := c.AddEntity(context.Background(), entity("p", "r", map[string]any{"Name": "x", "N": int32(1)}), nil); err != nil {
		b.Fatal(err)
	}
	return s, c
}

// parallelReads runs read with 16 requests in flight on two cores.
func parallelReads(b *testing.B, read func() error) {
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := read(); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkRawPointRead is the same read with a plain signed request.
func BenchmarkRawPointRead(b *testing.B) {
	s, _ := pointReadServer(b)
	parallelReads(b, func() error {
		if resp, _ := s.raw(b, "GET", "/Bench(PartitionKey='p',RowKey='r')", nil, nil); resp.StatusCode != 200 {
			return errors.New(resp.Status)
		}
		return nil
	})
}

// BenchmarkQueryPage reads a page of 1,000 entities through the SDK.
func BenchmarkQueryPage(b *testing.B) {
	s := startServer(b, httpapiDefaults)
	c := s.table(b, "Bench")
	ctx := context.Background()
	for start := 0; start < 1000; start += 100 {
		var ops []aztables.TransactionAction
		for i := start; i < start+100; i++ {
			ops = append(ops, aztables.TransactionAction{ActionType: aztables.TransactionTypeAdd, Entity: entity("p", fmt.Sprintf("%04d", i), map[string]any{"Name": "x", "N": int32(i)})})
		}
		if _, err := c.SubmitTransaction(ctx, ops, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := c.NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: ptr("PartitionKey eq 'p'")})
		page, err := p.NextPage(ctx)
		if err != nil || len(page.Entities) != 1000 {
			b.Fatal(len(page.Entities), err)
		}
	}
}
