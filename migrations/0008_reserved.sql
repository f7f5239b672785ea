-- 0008: reserved. Migrations are numbered without gaps; this number belongs to a
-- migration of another branch (users and their runs), which replaces this file when
-- the branches are merged. It changes nothing.
SELECT 1;
