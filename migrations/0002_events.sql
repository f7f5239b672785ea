-- 0002: the live feed's durable events (run status changes, rank states, epochs,
-- checkpoints), numbered by one server-wide sequence. The number is the `id:` of
-- the server-sent event, so a client that reconnects with Last-Event-ID gets exactly
-- what it missed, across server restarts too. Step progress is not kept here: it is
-- coalesced, and the steps table already holds every step.

CREATE TABLE events (
    id INTEGER PRIMARY KEY AUTOINCREMENT, -- never reused: a client's Last-Event-ID stays meaningful
    run_id INTEGER NOT NULL,
    type TEXT NOT NULL,                   -- the SSE event name: run, rank, epoch, checkpoint, deleted
    data TEXT NOT NULL,                   -- the SSE data: one line of JSON
    t INTEGER NOT NULL
);
CREATE INDEX events_by_run ON events (run_id, id);
