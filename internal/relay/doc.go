// Package relay is the Buzz-compatible Nostr relay: NIP-01 over WebSocket with NIP-42 auth,
// NIP-11, the NIP-98 HTTP bridge (/events, /query, /count), NIP-29-style channels with
// relay-signed 39000-series state, and NIP-50 search, all on one http.Handler.
//
// Why not khatru: the team design asked for github.com/fiatjaf/khatru v0.18.0 with Buzz rules
// as its hooks. Its socket loop owns several behaviours Buzz pins and offers no hook for, so the
// WebSocket layer here is our own (on github.com/coder/websocket) and khatru is not used:
//   - AUTH is validated inside khatru's read loop with nip42.ValidateAuthEvent: a ±10 min window,
//     exact host match and the wall clock. Buzz needs ±60 s, loopback spellings treated as equal,
//     an injectable clock, a 32-byte challenge sent on connect and "already authenticated" /
//     pinned-failure answers.
//   - A duplicate EVENT gets OK true with an empty reason; Buzz says "duplicate: ...".
//   - An ephemeral event nobody listens to gets OK false "mute: ..."; Buzz answers OK true.
//   - NIP-09 kind 5 deletions run before RejectEvent, i.e. before auth and membership checks.
//   - An oversized frame closes the socket silently; Buzz sends a NOTICE first.
//   - Live fan-out must re-check private-channel membership per subscriber at send time, with
//     state (members) khatru does not know about; and the HTTP bridge (per-filter limits,
//     before_id keyset paging, NIP-98 replay guard) is outside khatru altogether.
//
// The event pipeline (ingest.go) is shared by WS EVENT and POST /events. Channel state lives in
// the store and is mirrored in memory (acl.go) so access checks on the hot paths need no query;
// acl.go is also the one place read access is decided (stored queries carry its store.Access).
// Each NIP-29 admin kind has its own rule function (admin_rules.go).
//
// Several nodes may share one PostgreSQL database (Config.Database, same relay.key). cluster.go
// keeps the per-node state right across them: every write NOTIFYs on commit, and each node
// fans other nodes' events out to its own sockets and reloads (and revokes on) changed channels;
// a channel's admin actions take a cross-node lock and stamp 39000-series events past the newest
// stored; a node whose change feed is down refuses writes (retryable) and, reconnected, catches
// up from the database.
package relay
