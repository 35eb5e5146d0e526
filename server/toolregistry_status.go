package server

import "context"

// registryStatus maps the registry's errors (statusOf): INVALID_ARGUMENT
// with a BadRequest naming field (the request field the error is about;
// for a refused manual, followed by the JSON path inside it), NOT_FOUND
// and ALREADY_EXISTS with a ResourceInfo naming the manual or tool. The
// messages are the registry's own, which name paths and keys and show of
// a provider's answer only its status and, where the operator opted in,
// its error's type and code (utcp.Env.ProviderFields). Anything else is INTERNAL, logged.
func (t *toolRegistry) registryStatus(err error, field string) error {
	return statusOf(context.Background(), t.log, err, field)
}
