// Package redact chooses what exprd may show of an untrusted upstream's
// error answer (a tool provider's): an allowlist, not a search for what
// to hide. Nothing of the answer is shown but its JSON body's error type
// and code (Fields), each only when it is a short identifier-like token
// (Token). Free text, the `message` of an error, a plain-text or HTML
// body, is never shown: no list of patterns can tell every host name,
// address, key or stack frame in prose from the prose around it.
//
// Fields reads a decoded JSON object. `type` is the first of `error.type`
// (when `error` is an object, as OpenAI's and Anthropic's are) and the
// top-level `type` that is a string; `code` is the first of `error.code`,
// the top-level `code` and the top-level `error` (when it is a string, as
// OAuth2's error code is) that is a string or an integral number. Each is
// then kept only when Token accepts it and the caller's hidden function
// (the values bound to the manual) does not refuse it; a candidate that is
// refused is not replaced by the next one.
//
// Token accepts 1 to MaxTokenBytes bytes of ASCII letters, digits, '_',
// '-' and '.', holding a letter or a digit, in which no part between those
// separators looks like a key or a number that names something: a part
// mixing letters and digits, or made of digits only, is at most
// MaxPartBytes long (AKIAIOSFODNN7EXAMPLE, abc123def456 and an account id
// 123456789012 are refused; E11000, oauth2 and 429 are kept), and a token
// of digits and dots holds at most one dot (10.0.3.7 is refused). A token
// of letters alone is kept, a dotted name such as java.lang.Exception too,
// and with it a host name a provider chose to put there: the bound
// values are the caller's explicit check.
package redact
