-- 0015: who did what, and where the device time went.
--
-- audit: every state-changing action and decision, written through the store's one
-- writer before the action acts (server/store/audit.c), and by `ddpd user` in the
-- transaction of the change it makes. actor: a user's name, or in parentheses one of
-- no name ("(admin token)", "(anonymous)", "(server)", "(ddpd user: ACCOUNT)").
-- action: "run.submit", "run.cancel", ... (docs/operating.md lists them). subject:
-- the user the entry is about (the run's owner, the user changed): with actor, what
-- decides whether a user may read the entry. detail: a JSON object of what changed.
CREATE TABLE audit (
    id      INTEGER PRIMARY KEY,
    t       INTEGER NOT NULL,
    actor   TEXT NOT NULL,
    action  TEXT NOT NULL,
    target  TEXT NOT NULL,
    run_id  INTEGER,
    subject TEXT,
    detail  TEXT
);
CREATE INDEX audit_t ON audit (t);
CREATE INDEX audit_subject ON audit (subject, t);
CREATE INDEX audit_actor ON audit (actor, t);
