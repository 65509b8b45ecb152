-- NIP-ER due times, as the SQLite store's migration 0003: one row per reminder address whose
-- head has a not_before; the node whose claim sets fired delivers it, once across nodes.
CREATE TABLE reminders_due (
    pubkey     TEXT COLLATE "C" NOT NULL,
    d          TEXT    NOT NULL,
    event_id   TEXT COLLATE "C" NOT NULL,
    not_before BIGINT  NOT NULL,
    fired      BOOLEAN NOT NULL DEFAULT false,
    PRIMARY KEY (pubkey, d)
);
CREATE INDEX reminders_pending ON reminders_due (not_before) WHERE NOT fired;
