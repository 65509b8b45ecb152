-- Events: one row per stored event. seq is the FTS rowid and the event_tags key.
CREATE TABLE events (
    seq        INTEGER PRIMARY KEY,
    id         TEXT    NOT NULL UNIQUE,
    pubkey     TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    kind       INTEGER NOT NULL,
    tags       TEXT    NOT NULL,
    content    TEXT    NOT NULL,
    sig        TEXT    NOT NULL,
    channel_id TEXT,
    d_tag      TEXT,
    deleted_at INTEGER
);
CREATE INDEX events_created ON events (created_at DESC, id);
CREATE INDEX events_kind    ON events (kind, created_at DESC);
CREATE INDEX events_author  ON events (pubkey, kind, created_at DESC);
CREATE INDEX events_channel ON events (channel_id, created_at DESC);
CREATE INDEX events_addr    ON events (kind, pubkey, d_tag);

-- Single-letter tags, for #h/#p/#e/#d/... filters.
CREATE TABLE event_tags (
    seq        INTEGER NOT NULL REFERENCES events (seq) ON DELETE CASCADE,
    name       TEXT    NOT NULL,
    value      TEXT    NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX event_tags_lookup ON event_tags (name, value, created_at DESC);
CREATE INDEX event_tags_seq    ON event_tags (seq);

-- NIP-50 search over content; rowid = events.seq.
CREATE VIRTUAL TABLE events_fts USING fts5 (content);

CREATE TABLE channels (
    id           TEXT PRIMARY KEY,
    name         TEXT    NOT NULL,
    about        TEXT    NOT NULL DEFAULT '',
    visibility   TEXT    NOT NULL,
    channel_type TEXT    NOT NULL,
    topic        TEXT    NOT NULL DEFAULT '',
    purpose      TEXT    NOT NULL DEFAULT '',
    archived     INTEGER NOT NULL DEFAULT 0,
    ttl          INTEGER NOT NULL DEFAULT 0,
    created_by   TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    deleted_at   INTEGER
);

CREATE TABLE members (
    channel_id TEXT    NOT NULL REFERENCES channels (id),
    pubkey     TEXT    NOT NULL,
    role       TEXT    NOT NULL,
    joined_at  INTEGER NOT NULL,
    PRIMARY KEY (channel_id, pubkey)
);
CREATE INDEX members_pubkey ON members (pubkey);

-- NIP-98 replay guard: auth event ids seen, kept until they could no longer verify.
CREATE TABLE nip98_seen (
    id         TEXT PRIMARY KEY,
    expires_at INTEGER NOT NULL
);
