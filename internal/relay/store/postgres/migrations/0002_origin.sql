-- The node that stored each event, so a node catching up after a lost LISTEN connection hands
-- on only other nodes' events (it fanned out its own when it stored them).
ALTER TABLE events ADD COLUMN origin TEXT;
