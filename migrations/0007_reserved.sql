-- 0007: reserved. Migrations are numbered without gaps; this number belongs to a
-- migration of another branch (the restarts of runs), which replaces this file when
-- the branches are merged. It changes nothing.
SELECT 1;
