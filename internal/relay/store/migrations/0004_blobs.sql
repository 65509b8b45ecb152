-- Blossom blobs: the bytes live in files under blobs/ beside the database (named by their
-- SHA-256); these rows say what is stored and who uploaded it (sqlite_blobs.go).
CREATE TABLE blobs (
    sha256   TEXT    NOT NULL PRIMARY KEY,
    size     INTEGER NOT NULL,
    type     TEXT    NOT NULL,
    uploaded INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE blob_owners (
    sha256   TEXT    NOT NULL,
    pubkey   TEXT    NOT NULL,
    uploaded INTEGER NOT NULL,
    PRIMARY KEY (sha256, pubkey)
) WITHOUT ROWID;
