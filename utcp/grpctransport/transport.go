package grpctransport

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/exprd/exprd/utcp"
)

// Type is the call template type this package serves.
const Type = "grpc"

// New is the grpc TransportFactory with the defaults, for
// utcp.WithTransport(grpctransport.Type, grpctransport.New): TLS (use_ssl) checks
// the provider's certificate against the system's roots. It does no I/O;
// connections are opened on the first call and shared through env.Shared.
func New(template json.RawMessage, env utcp.Env) (utcp.Transport, error) {
	return defaultFactory.build(template, env)
}

var defaultFactory = &factory{}

// Option configures NewFactory. An invalid value makes NewFactory fail.
type Option func(*factory) error

// WithTLSConfig sets the TLS configuration of use_ssl connections: a private
// CA's roots (RootCAs), a client certificate for mTLS. The configuration is
// cloned; ServerName is set per provider from the template's host unless
// given. Default: the system's roots, TLS 1.2 at least.
func WithTLSConfig(c *tls.Config) Option {
	return func(f *factory) error {
		if c == nil {
			return errors.New("grpctransport: WithTLSConfig(nil)")
		}
		f.tls = c.Clone()
		return nil
	}
}

// NewFactory returns a grpc TransportFactory configured by opts, for
// utcp.WithTransport(grpctransport.Type, f).
func NewFactory(opts ...Option) (utcp.TransportFactory, error) {
	f := &factory{}
	for _, o := range opts {
		if err := o(f); err != nil {
			return nil, err
		}
	}
	return f.build, nil
}

type factory struct {
	tls *tls.Config // nil: system roots
}

func (f *factory) build(template json.RawMessage, env utcp.Env) (utcp.Transport, error) {
	s, err := decodeSpec(template)
	if err != nil {
		return nil, err
	}
	if env.Shared == nil {
		return nil, fmt.Errorf("grpctransport: no Env.Shared to keep connections in (build transports through a utcp.Registry)")
	}
	if err := env.CheckHostField("host", s.host); err != nil {
		return nil, err
	}
	s.env = env
	c := &conns{spec: s, env: env, tls: f.tls}
	if s.utcpService() {
		return &utcpTransport{spec: s, conns: c, streamCall: s.method == methodCallToolStream}, nil
	}
	return &reflectTransport{spec: s, conns: c, fullMethod: "/" + s.service + "/" + s.method}, nil
}
