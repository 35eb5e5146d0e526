package client

import (
	"context"
	"iter"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
)

// Tools yields the registry's tools that req asks for (one manual's or
// all, in req.View; nil: all, without schemas) in name order, across every
// page: ListTools is asked for the next page, of req.PageSize (0: the
// server's default), when the loop reaches it. req.PageToken, when set, is
// where the listing starts; req itself is not changed. An error is yielded
// once, with a nil tool, and ends the sequence.
func (c *Client) Tools(ctx context.Context, req *exprdv1.ListToolsRequest, opts ...grpc.CallOption) iter.Seq2[*exprdv1.ToolInfo, error] {
	return func(yield func(*exprdv1.ToolInfo, error) bool) {
		page := &exprdv1.ListToolsRequest{}
		if req != nil {
			page = proto.Clone(req).(*exprdv1.ListToolsRequest)
		}
		for {
			resp, err := c.ToolRegistry().ListTools(ctx, page, opts...)
			if err != nil {
				yield(nil, err)
				return
			}
			for _, t := range resp.GetTools() {
				if !yield(t, nil) {
					return
				}
			}
			if page.PageToken = resp.GetNextPageToken(); page.PageToken == "" {
				return
			}
		}
	}
}
