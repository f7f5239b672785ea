-- 0011: the wall between accounts. A user's Unix account on this host (ddpd user add
-- NAME --unix-user ACCOUNT, ddpd user set NAME --unix-user ACCOUNT): every process of
-- its runs runs under that account's uid, gid and groups. NULL: none of its own (its
-- runs go under ddpd serve --run-user, or are refused where only the server's own
-- user would be left).
ALTER TABLE users ADD COLUMN unix_user TEXT;
