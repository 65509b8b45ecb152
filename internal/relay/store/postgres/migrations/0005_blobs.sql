-- Blossom blobs, shared by every node: the bytes in blobs.data (bounded by the relay's
-- --max-blob-bytes), and who uploaded each (blobs.go).
CREATE TABLE blobs (
    sha256   TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    size     BIGINT NOT NULL,
    type     TEXT   NOT NULL,
    data     BYTEA  NOT NULL,
    uploaded BIGINT NOT NULL
);
CREATE TABLE blob_owners (
    sha256   TEXT COLLATE "C" NOT NULL REFERENCES blobs (sha256) ON DELETE CASCADE,
    pubkey   TEXT COLLATE "C" NOT NULL,
    uploaded BIGINT NOT NULL,
    PRIMARY KEY (sha256, pubkey)
);
