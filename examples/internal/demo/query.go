package demo

import (
	"context"
	"encoding/json"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
)

// Query returns the entities of t that opts selects, all of them (one
// request per page), each decoded into a T, in the order the host
// answers: key order unless the request asks otherwise. Errors are the
// Azure SDK's, as it returns them.
func Query[T any](ctx context.Context, t *aztables.Client, opts *aztables.ListEntitiesOptions) ([]T, error) {
	var out []T
	pager := t.NewListEntitiesPager(opts)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, raw := range page.Entities {
			var e T
			if err := json.Unmarshal(raw, &e); err != nil {
				return nil, err
			}
			out = append(out, e)
		}
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
