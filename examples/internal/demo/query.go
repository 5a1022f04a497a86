package demo

import (
	"context"
	"encoding/json"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
)

// Each calls f with each entity of t that opts selects, decoded into a
// T, page by page as the host answers them (one request per page), in
// the order the host answers: key order unless the request asks
// otherwise. It stops at the first error, f's or the Azure SDK's (as the
// SDK returns it).
func Each[T any](ctx context.Context, t *aztables.Client, opts *aztables.ListEntitiesOptions, f func(T) error) error {
	pager := t.NewListEntitiesPager(opts)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return err
		}
		for _, raw := range page.Entities {
			var e T
			if err := json.Unmarshal(raw, &e); err != nil {
				return err
			}
			if err := f(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// Query returns the entities of t that opts selects, all of them, as
// Each reads them.
func Query[T any](ctx context.Context, t *aztables.Client, opts *aztables.ListEntitiesOptions) ([]T, error) {
	var out []T
	err := Each(ctx, t, opts, func(e T) error {
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Where is the query options of an OData filter; "" reads every entity.
func Where(filter string) *aztables.ListEntitiesOptions {
	if filter == "" {
		return &aztables.ListEntitiesOptions{}
	}
	return &aztables.ListEntitiesOptions{Filter: &filter}
}
