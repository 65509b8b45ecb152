-- Events: one row per stored event. seq keys event_tags. Ids and pubkeys compare bytewise
-- (COLLATE "C") so keyset paging and tie-breaks agree with SQLite whatever the database locale.
CREATE TABLE events (
    seq         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id          TEXT COLLATE "C" NOT NULL UNIQUE,
    pubkey      TEXT COLLATE "C" NOT NULL,
    created_at  BIGINT  NOT NULL,
    kind        INTEGER NOT NULL,
    tags        TEXT    NOT NULL, -- JSON array, as the event carries it
    content     TEXT    NOT NULL, -- NUL-free (PostgreSQL text cannot hold NUL); what search sees
    content_raw TEXT,             -- JSON string of the exact content, only when it had a NUL
    sig         TEXT    NOT NULL,
    channel_id  TEXT,
    d_tag       TEXT,
    deleted_at  BIGINT,
    -- NIP-50: ASCII punctuation splits words, as in SQLite's unicode61 tokenizer; 'simple' is
    -- lowercasing without stemming or stop words.
    search      tsvector GENERATED ALWAYS AS (to_tsvector('simple', translate(content,
                    '!"#$%&''()*+,-./:;<=>?@[\]^_`{|}~', '                                '))) STORED
);
CREATE INDEX events_created ON events (created_at DESC, id);
CREATE INDEX events_kind    ON events (kind, created_at DESC);
CREATE INDEX events_author  ON events (pubkey, kind, created_at DESC);
CREATE INDEX events_channel ON events (channel_id, created_at DESC);
CREATE INDEX events_addr    ON events (kind, pubkey, d_tag);
CREATE INDEX events_search  ON events USING GIN (search);

-- Single-letter tags, for #h/#p/#e/#d/... filters.
CREATE TABLE event_tags (
    seq        BIGINT NOT NULL REFERENCES events (seq) ON DELETE CASCADE,
    name       TEXT   NOT NULL,
    value      TEXT   NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX event_tags_lookup ON event_tags (name, value, created_at DESC);
CREATE INDEX event_tags_seq    ON event_tags (seq);

CREATE TABLE channels (
    id           TEXT PRIMARY KEY,
    name         TEXT    NOT NULL,
    about        TEXT    NOT NULL DEFAULT '',
    visibility   TEXT    NOT NULL,
    channel_type TEXT    NOT NULL,
    topic        TEXT    NOT NULL DEFAULT '',
    purpose      TEXT    NOT NULL DEFAULT '',
    archived     BOOLEAN NOT NULL DEFAULT false,
    ttl          BIGINT  NOT NULL DEFAULT 0,
    created_by   TEXT    NOT NULL,
    created_at   BIGINT  NOT NULL,
    deleted_at   BIGINT
);

CREATE TABLE members (
    channel_id TEXT   NOT NULL REFERENCES channels (id),
    pubkey     TEXT   NOT NULL,
    role       TEXT   NOT NULL,
    joined_at  BIGINT NOT NULL,
    PRIMARY KEY (channel_id, pubkey)
);
CREATE INDEX members_pubkey ON members (pubkey);

-- NIP-98 replay guard shared by every node: the primary key admits one use of an auth event.
CREATE TABLE nip98_seen (
    id         TEXT PRIMARY KEY,
    expires_at BIGINT NOT NULL
);
