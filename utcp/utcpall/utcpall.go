package utcpall

import (
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/grpctransport"
	"github.com/exprd/exprd/utcp/httptransport"
	"github.com/exprd/exprd/utcp/mcptransport"
	"github.com/exprd/exprd/utcp/openapi"
	"github.com/exprd/exprd/utcp/search"
)

// New returns utcp.New(Options() followed by opts...): a registry with
// every transport, the OpenAPI converter and exprd's search. An option of
// opts replaces the default it overlaps (a utcp.WithTransport of the grpc
// type with a configured grpctransport.NewFactory, say).
func New(opts ...utcp.Option) (*utcp.Registry, error) {
	defaults, err := Options()
	if err != nil {
		return nil, err
	}
	return utcp.New(append(defaults, opts...)...)
}

// Options are New's defaults, for a caller that builds its registry with
// utcp.New itself.
func Options() ([]utcp.Option, error) {
	httpTransports, err := httptransport.Transports()
	if err != nil {
		return nil, err
	}
	return []utcp.Option{
		utcp.WithTransports(httpTransports),
		utcp.WithTransport(grpctransport.Type, grpctransport.New),
		utcp.WithTransport(mcptransport.Type, mcptransport.New),
		utcp.WithConverter(openapi.Converter{}),
		utcp.WithIndex(search.New()),
	}, nil
}
