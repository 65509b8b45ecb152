-- Fewer index writes per stored event, as the SQLite store's migration 0002 does.

-- events_channel served no query: channel history reads the h tag rows, and the access rule's
-- channel_id test filters rows found by another index.
DROP INDEX events_channel;
-- Replace lookups (kind, pubkey, d_tag) need an index only for addressable events, the only ones
-- with a d_tag: the relay signs every channel's 39000-series under one pubkey, so pubkey+kind
-- alone would scan them all. Messages no longer pay for an entry.
DROP INDEX events_addr;
CREATE INDEX events_addr ON events (pubkey, kind, d_tag) WHERE d_tag IS NOT NULL;

-- Tag rows: one index, keyed by what filters look up. Deleting a replaced event's rows and the
-- access rule's p-tag test address rows by the whole key, which the event row supplies, so
-- neither the seq index nor the cascading foreign key (which needed it) is kept.
ALTER TABLE event_tags DROP CONSTRAINT IF EXISTS event_tags_seq_fkey;
DROP INDEX event_tags_lookup;
DROP INDEX event_tags_seq;
DELETE FROM event_tags a USING event_tags b
    WHERE a.ctid < b.ctid AND a.name = b.name AND a.value = b.value AND a.created_at = b.created_at AND a.seq = b.seq;
ALTER TABLE event_tags ADD PRIMARY KEY (name, value, created_at, seq);

-- Search covers only what NIP-50 search is asked for (store.SearchKinds: messages, forum posts
-- and comments, profiles): other rows get no tsvector and no entry in the partial GIN index.
DROP INDEX events_search;
ALTER TABLE events DROP COLUMN search;
ALTER TABLE events ADD COLUMN search tsvector GENERATED ALWAYS AS (CASE WHEN kind IN (0, 9, 40002, 45001, 45003)
    THEN to_tsvector('simple', translate(content,
        '!"#$%&''()*+,-./:;<=>?@[\]^_`{|}~', '                                ')) END) STORED;
CREATE INDEX events_search ON events USING GIN (search) WHERE search IS NOT NULL;
