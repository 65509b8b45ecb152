-- NIP-ER due times: one row per reminder address whose head has a not_before, until it fires.
-- fired is set by the claim that hands the reminder to the relay's scheduler, once.
CREATE TABLE reminders_due (
    pubkey     TEXT    NOT NULL,
    d          TEXT    NOT NULL,
    event_id   TEXT    NOT NULL,
    not_before INTEGER NOT NULL,
    fired      INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (pubkey, d)
);
CREATE INDEX reminders_pending ON reminders_due (not_before) WHERE fired = 0;
