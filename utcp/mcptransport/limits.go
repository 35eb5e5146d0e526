package mcptransport

import "time"

// What an MCP server may make exprd do, per registry. Each is a named
// default; tests hold each at the limit and one past it.
const (
	// MaxListPages bounds the pages of one server's tools/list that
	// exprd follows (nextCursor); past it discovery fails, naming it.
	MaxListPages = 100
	// MaxToolsPerServer bounds the tools one server may list.
	MaxToolsPerServer = 1000
	// MaxStdioServers bounds the stdio servers (processes) a registry runs
	// at once; a connection past it fails.
	MaxStdioServers = 16
	// MaxProgressPerCall bounds the progress notifications one stream may
	// receive: past it the call fails (the server is flooding it). They
	// do not count against NotificationRate: the call asked for them.
	MaxProgressPerCall = 10_000
	// FinishedTokens is how many ended streams' progress tokens a server
	// remembers: progress sent just before a result may be handled after
	// it, and stays the stream's (bounded by MaxProgressPerCall).
	FinishedTokens = 64
	// ProgressBuffer is how many progress notifications a stream holds
	// for a reader that has not taken them yet; past it further ones are
	// dropped until the reader takes some, never the result.
	ProgressBuffer = 64
	// NotificationRate and NotificationBurst bound what a server sends
	// unasked (notifications and requests other than a stream's own
	// progress, per second, sustained and at once): past them its session
	// is closed as hostile, and the next call reconnects after the
	// back-off.
	NotificationRate  = 200
	NotificationBurst = 2000
	// MaxStderrLineBytes cuts each line a stdio server writes to its
	// stderr before it is logged; StderrLinesPerMinute bounds the lines
	// logged (the rest are counted, and the count logged).
	MaxStderrLineBytes   = 1024
	StderrLinesPerMinute = 120
)

// Connection timing.
const (
	// ConnectTimeout bounds a connection's set-up: the process started or
	// the first request answered, the protocol negotiated, every page of
	// tools/list read.
	ConnectTimeout = 30 * time.Second
	// MinBackoff and MaxBackoff bound the wait before a server that failed
	// (a connection refused, a process that exited, a session that ended
	// soon after it began) is tried again: MinBackoff, doubled at each
	// failure in a row, at most MaxBackoff.
	MinBackoff = 250 * time.Millisecond
	MaxBackoff = 30 * time.Second
	// StableAfter is how long a session must have lived for its end not to
	// count as a failure in a row.
	StableAfter = 10 * time.Second
	// IdleTimeout closes a session (and stops its process) unused for
	// this long; the next call connects again.
	IdleTimeout = 10 * time.Minute
	// RelistInterval is the least time between two re-lists of a server's
	// tools that list_changed notifications ask for.
	RelistInterval = time.Second
	// StopGrace is how long a stdio server has to exit once its stdin is
	// closed, then again after SIGTERM, before it is killed.
	StopGrace = 2 * time.Second
)
