// Package layout holds the tests that keep exprd's imports running one way,
// as docs/architecture.md draws them (its table lists each package and what
// it may import):
//
//   - TestImportAllowlist: each package imports only the module's packages
//     its line in allowed lists, the same table in Go; a package or an edge
//     not listed fails, so a new edge is added here and in the doc together.
//   - TestImportDirection: no package of the core (evaluator, codemode,
//     agent, utcp, model) nor mcpserve reaches server/ or client/ through
//     any chain of imports; evaluator, model and mcpserve do not depend on
//     gRPC at all; codemode, agent, mcpserve and utcp do not import gRPC's
//     status or codes, since only server/ turns core errors into statuses
//     (utcp/grpctransport, which reads providers' statuses, may); client
//     and gen reach neither server nor evaluator.
package layout
