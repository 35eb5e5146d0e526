// Package redact strips what a client must not see from text that comes
// from an untrusted upstream (a tool provider's or a model server's error
// message) before exprd shows it: where the upstream lives and what it
// authenticates with. Text replaces, in one left-to-right pass:
//
//   - URLs: scheme://... (scheme of letters, digits, + . -) up to whitespace,
//     a quote or an unbalanced closing paren, bracket or brace, without
//     trailing punctuation; and a host or IP address followed by a /path
//     (with or without :port): "[url]".
//   - IP addresses: IPv4 dotted quads (0-255, optional :port or /prefix);
//     IPv6 addresses that net/netip accepts and that have at least two
//     colons, bare (fe80::1, ::ffff:10.0.0.1, fe80::1%eth0) or in brackets
//     with an optional port ([::1]:443): "[address]". Times such as 12:30
//     or 12:30:45 are no IPv6 address.
//   - Host names: two or more dot-separated labels of [A-Za-z0-9_-], none
//     empty, the last alphabetic of length ≥ 2 (api.openai.com,
//     db-7.internal.corp), or localhost alone, with an optional :port:
//     "[host]". A file name such as config.json is replaced too (over-
//     redaction is the safe side), but a sentence's final period, a decimal
//     number (3.14) or an abbreviation (e.g.) is not a host.
//   - E-mail addresses (local@host): "[email]".
//   - Key-like strings: "[secret]" for well-known token prefixes (sk-,
//     sk_live_, ghp_, github_pat_, xoxb-, AKIA + 16, AIza, JWTs eyJ....),
//     the credential after Bearer or Basic, the value of key=VALUE,
//     token: VALUE, "password": "VALUE" and the like (a name ending, in any
//     case, in a segment key, token, secret, password, ...; a quoted value
//     left unclosed runs to the end of the line), and any run of 24 or more
//     [A-Za-z0-9_-+/=] that mixes letters and digits (hashes, UUIDs and
//     base64 blobs go too). "token: expired" loses its "expired": a value
//     is not told from prose.
//
// Everything else is kept byte for byte: ordinary prose survives. Text
// runs in time linear in the length of its input, never panics, returns
// valid UTF-8 (invalid bytes become U+FFFD) and is idempotent: a
// placeholder is never redacted again, and Clean(Text(s)) holds.
package redact
