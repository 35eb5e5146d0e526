package utcp

import (
	"context"

	"github.com/exprd/exprd/utcp/manual"
	"github.com/exprd/exprd/utcp/vars"
)

// Package manual's and package vars' names under the utcp names
// utcp/openapi and utcp/search still write: the same types and values.
// Other code writes manual's and vars'.
type (
	Manual          = manual.Manual
	Tool            = manual.Tool
	ToolAnnotations = manual.ToolAnnotations
	CallTemplate    = manual.CallTemplate
	Auth            = manual.Auth
	ManualError     = manual.Error
	SkippedTool     = manual.SkippedTool

	VariableLoaderFunc = vars.LoaderFunc
)

// Package manual's constants and sentinels under their utcp names.
const (
	AuthAPIKey           = manual.AuthAPIKey
	AuthBasic            = manual.AuthBasic
	AuthOAuth2           = manual.AuthOAuth2
	LocationHeader       = manual.LocationHeader
	DefaultUTCPVersion   = manual.DefaultUTCPVersion
	DefaultManualVersion = manual.DefaultManualVersion
	MaxSchemaDepth       = manual.MaxSchemaDepth
	MaxSchemaNodes       = manual.MaxSchemaNodes
)

var (
	ErrInvalidManual    = manual.ErrInvalid
	ErrInvalidArguments = manual.ErrInvalidArguments
)

// ReadConverted is manual.ReadConverted.
func ReadConverted(ctx context.Context, doc map[string]any, name string) (*Manual, []SkippedTool, error) {
	return manual.ReadConverted(ctx, doc, name)
}
