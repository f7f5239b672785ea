-- 0021: reserved for another branch's migration; a placeholder that changes nothing,
-- so that 0022 is applied in order. Dropped at the merge, where the real 0021 lands.
SELECT 1;
