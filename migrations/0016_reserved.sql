-- 0016: reserved for another branch's migration (numbers are handed out in order);
-- it changes nothing. The branch that owns 0016 replaces this file when merged.
SELECT 1;
