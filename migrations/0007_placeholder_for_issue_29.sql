-- 0007: the number issue 29's restarts of command runs take (its migration replaces
-- this file when the branches meet). Empty: migrations are numbered without gaps, and
-- sharing a box is 0008.
SELECT 1;
