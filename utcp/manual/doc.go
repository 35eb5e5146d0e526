// Package manual is the UTCP manual format as exprd reads it: a manual
// and its tools (Manual, Tool), their call templates (CallTemplate, Auth),
// the JSON Schemas of their inputs and outputs, and the ${VAR} references
// a template may hold. It reads; utcp's Registry registers what it reads.
//
// A manual is {utcp_version, manual_version, tools}; each tool is {name,
// description, inputs, outputs, tags, average_response_size,
// tool_call_template}. The older go-utcp form ({version, tools} with
// `tool_provider` or `provider` holding a `provider_type`) is read too. An
// unknown key on a manual or a tool is refused, unknown keys inside a call
// template are ignored, and a manual is refused whole, with an *Error
// naming the JSON path of what is wrong (`tools[3].tool_call_template.url:
// missing`). Input and output schemas are compiled (draft 2020-12 unless
// `$schema` says otherwise) as they are read, under MaxSchemaDepth and
// MaxSchemaNodes; their $refs may only point inside the schema. A
// converted document's manual is read tolerantly (ReadConverted): an
// operation it cannot read is skipped, and reported (SkippedTool).
//
// ${VAR} and $VAR in any string of a call template (except strings
// containing `$ref`) refer to variables (HasVariables, ReplaceVariables);
// package vars holds the operator's values of them. A {name} path
// parameter of a URL may not hold one (PathParameterVariable).
//
// Tool.ValidateArgs checks a call's arguments against the tool's input
// schema (*InvalidArgumentsError). A transport refuses a template's field
// with a *FieldError (DecodeFields names a mistyped one), which the
// registry reports as an *Error at the template's place (ErrorAt).
package manual
