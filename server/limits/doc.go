// Package limits holds what bounds exprd's connections and streams before
// and around auth, apart from the memory budget: Conns, the connections
// open at once from one peer and in all (a connection past its peer's
// limit is closed as soon as it is accepted; at the total, a new one takes
// the place of the oldest that carried no admitted call); Streams, the
// streaming RPCs open on one connection and the Session streams of a
// replica; Infra, the health and reflection calls open on one connection,
// which need no token. A connection is named by its remote address
// (ConnKey, RemoteKey), a peer by its address, an IPv6 one by its /64
// (PeerKey). Their defaults, options and flags are the server's
// (docs/configuration.md).
package limits
