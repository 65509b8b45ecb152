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
// The event pipeline (ingest.go) is shared by WS EVENT and POST /events: every client event runs
// through ingestRules (rules.go), an ordered list of small functions, each deciding one thing
// (a signature, a kind table, the h-tag rule, the write rule, an edit's target...) and tested
// alone (rules_test.go). Each returns nil to pass the event on, or the answer that ends the
// chain; an event that passes them all is stored and fanned out. Admin kinds and DM commands are
// applied by their step in the list, one channel at a time (submitAdmin), with one rule function
// per kind (admin_rules.go); ephemeral events fan out in theirs.
//
// Adding a rule (a rate limit, a created_at bound, a tag cap, a kind's own check) is one change
// in rules.go: write func(ctx, r, in) *result, refusing with refuse(status, protocol.ReasonX.Msg(…)),
// put it in ingestRules where it must run (checks of the event alone before databaseLive, write
// rules after applyDMCommand, anything ephemeral events must pass before fanOutEphemeral), and
// test it alone. Kinds are named in internal/protocol; answers are built with protocol.Reason, so
// clients can classify them.
//
// Channel state lives in the store and is mirrored in memory (acl.go) so access checks on the
// hot paths need no query; acl.go is also the one place read access is decided (stored queries
// carry its store.Access).
//
// Live subscriptions are bounded and matched in subs.go: each connection's writer matches
// broadcast events against its own subscriptions and writes the hits, so one with many or large
// filters slows only itself. REQ history is read a page at a time within a relay-wide byte
// budget (results.go).
//
// Files (Blossom) are served beside the events: PUT /upload stores a blob authorised by a
// kind-24242 token (upload.go), GET /media/<sha256> serves it to its uploaders and to readers of
// an uploader's event whose imeta names it (blobs.go); the bytes sit behind store.Blobs.
//
// Relay.Close ends the WebSocket connections and waits for every connection handler (and its
// reader, writer and pinger) and bridge request before it closes the store.
//
// Several nodes may share one PostgreSQL database (Config.Database, same relay.key). cluster.go
// keeps the per-node state right across them: every write NOTIFYs on commit, and each node
// fans other nodes' events out to its own sockets and reloads (and revokes on) changed channels;
// a channel's admin actions take a cross-node lock and stamp 39000-series events past the newest
// stored; a node whose change feed is down refuses writes (retryable) and, reconnected, catches
// up from the database.
package relay
