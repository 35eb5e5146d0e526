package client

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
)

// Client is a connection to an exprd server's ExprTool service. It is safe
// for concurrent use.
type Client struct {
	conn *grpc.ClientConn
	et   exprdv1.ExprToolClient
}

// Dial returns a Client for target (e.g. "localhost:50051"), made with
// grpc.NewClient: it connects on first use. The connection is insecure
// (plaintext) unless opts carry credentials, which suits loopback and a mesh
// that encrypts for you; pass grpc.WithTransportCredentials for TLS.
func Dial(target string, opts ...grpc.DialOption) (*Client, error) {
	// Options apply in order, so credentials in opts replace the default.
	all := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)
	conn, err := grpc.NewClient(target, all...)
	if err != nil {
		return nil, fmt.Errorf("exprd client: %w", err)
	}
	return &Client{conn: conn, et: exprdv1.NewExprToolClient(conn)}, nil
}

// Close closes the connection. Sessions still open on it end with an error.
func (c *Client) Close() error { return c.conn.Close() }

// ExprTool returns the generated client, for what this package does not wrap.
func (c *Client) ExprTool() exprdv1.ExprToolClient { return c.et }

// Describe renders the tool and the system-prompt partials for settings
// (nil: the defaults).
func (c *Client) Describe(ctx context.Context, settings *exprdv1.Settings, opts ...grpc.CallOption) (*exprdv1.DescribeResponse, error) {
	return c.et.Describe(ctx, &exprdv1.DescribeRequest{Settings: settings}, opts...)
}

// Call runs one call on the state sent with it. Confirm steps are declined
// and client-run functions are refused (unknown-reference): use a Session
// for those.
func (c *Client) Call(ctx context.Context, req *exprdv1.CallRequest, opts ...grpc.CallOption) (*exprdv1.CallResponse, error) {
	return c.et.Call(ctx, req, opts...)
}

// AgentLoop returns the generated AgentLoop client on the same connection.
func (c *Client) AgentLoop() exprdv1.AgentLoopClient { return exprdv1.NewAgentLoopClient(c.conn) }

// CodeMode returns the generated CodeMode client on the same connection.
func (c *Client) CodeMode() exprdv1.CodeModeClient { return exprdv1.NewCodeModeClient(c.conn) }

// ToolRegistry returns the generated ToolRegistry client on the same
// connection.
func (c *Client) ToolRegistry() exprdv1.ToolRegistryClient {
	return exprdv1.NewToolRegistryClient(c.conn)
}
