-- 0011: reserved for another branch's migration; a placeholder that changes nothing,
-- so that 0012 is applied in order. Dropped at the merge, where the real 0011 lands.
SELECT 1;
